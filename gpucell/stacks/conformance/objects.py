"""Rendered Kubernetes objects against the API server's schemas, strictly (unknown fields are errors).

- Core kinds (``v1``, ``apps/v1``, ``*.k8s.io``...) use the schemas the ``kubernetes-validate`` package ships,
  at the cell's Kubernetes minor, in their ``-strict`` form.
- Custom resources use the upstream files in the schema directory: KubeVirt's and CDI's ``swagger.json``
  definitions (``v1.VirtualMachine``), and the ``openAPIV3Schema`` of the CRDs that KServe, Cilium and the GPU
  Operator ship, with the CEL rules (``x-kubernetes-validations``) those CRDs carry (:meth:`ObjectChecker.cel_check`).

Before checking, an object gets what the API server applies first: nulls dropped and schema defaults filled
(so ``required`` sees defaulted fields). Patches (``...Patch`` resources) are partial by design, so ``required``
is not enforced on them.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import referencing
from kubernetes_validate import utils as kv

from gpucell.stacks.conformance.cel_rules import CelTally, CrdRules
from gpucell.stacks.conformance.schemas import VELERO_CRDS, SchemaStore

__all__ = ["FALLBACK_SCHEMAS", "ObjectChecker", "Violation", "checker_for", "strict_schema"]

_SWAGGER = {
    "kubevirt.io": "kubevirt/swagger.json",
    "instancetype.kubevirt.io": "kubevirt/swagger.json",
    "cdi.kubevirt.io": "cdi/swagger.json",
}
_CRD_FILES = (
    "kserve/serving.kserve.io_inferenceservices.yaml",
    "kserve/serving.kserve.io_servingruntimes.yaml",
    "kserve/serving.kserve.io_clusterservingruntimes.yaml",
    "cilium/ciliumnetworkpolicies.yaml",
    "cilium/ciliumclusterwidenetworkpolicies.yaml",
    "cilium/ciliumloadbalancerippools.yaml",
    "cilium/ciliuml2announcementpolicies.yaml",
    "cilium/ciliumbgpclusterconfigs.yaml",
    "cilium/ciliumbgppeerconfigs.yaml",
    "cilium/ciliumbgpadvertisements.yaml",
    "gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml",
    "gateway-api/gateway.networking.k8s.io_gateways.yaml",
    "gateway-api/gateway.networking.k8s.io_httproutes.yaml",
    "cert-manager/crd-cert-manager.io_certificates.yaml",
    "cert-manager/crd-cert-manager.io_clusterissuers.yaml",
    "gpu-operator/nvidia.com_clusterpolicies.yaml",
    "gpu-operator/nvidia.com_nvidiadrivers.yaml",
    "prometheus-operator/crd-servicemonitors.yaml",
    "prometheus-operator/crd-podmonitors.yaml",
    "prometheus-operator/crd-prometheusrules.yaml",
    "cluster-api/cluster.x-k8s.io_clusters.yaml",
    "cluster-api/cluster.x-k8s.io_machinedeployments.yaml",
    "cluster-api/cluster.x-k8s.io_machinehealthchecks.yaml",
    "cluster-api/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
    "cluster-api/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
    "cluster-api-provider-kubevirt/infrastructure.cluster.x-k8s.io_kubevirtclusters.yaml",
    "cluster-api-provider-kubevirt/infrastructure.cluster.x-k8s.io_kubevirtmachinetemplates.yaml",
    "cluster-api-operator/operator.cluster.x-k8s.io_coreproviders.yaml",
    "cluster-api-operator/operator.cluster.x-k8s.io_bootstrapproviders.yaml",
    "cluster-api-operator/operator.cluster.x-k8s.io_controlplaneproviders.yaml",
    "cluster-api-operator/operator.cluster.x-k8s.io_infrastructureproviders.yaml",
    "cluster-api-operator/operator.cluster.x-k8s.io_addonproviders.yaml",
    "cluster-api-addon-provider-helm/addons.cluster.x-k8s.io_helmchartproxies.yaml",
    *(f"velero/crd-{plural}.yaml" for plural in VELERO_CRDS),
    "external-snapshotter/snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
    "external-snapshotter/snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
    "external-snapshotter/snapshot.storage.k8s.io_volumesnapshots.yaml",
    "network-operator/mellanox.com_nicclusterpolicies.yaml",
    "network-operator/sriovnetwork.openshift.io_sriovnetworknodepolicies.yaml",
    "network-operator/sriovnetwork.openshift.io_sriovnetworks.yaml",
    "network-operator/k8s.cni.cncf.io_networkattachmentdefinitions_crd.yaml",
)
_STORAGE_PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "claimPropertySets": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["accessModes", "volumeMode"],
                        "properties": {
                            "accessModes": {
                                "type": "array",
                                "items": {
                                    "enum": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]
                                },
                            },
                            "volumeMode": {"enum": ["Filesystem", "Block"]},
                        },
                    },
                },
                "cloneStrategy": {"enum": ["copy", "snapshot", "csi-clone"]},
                "dataImportCronSourceFormat": {"enum": ["pvc", "snapshot"]},
                "snapshotClass": {"type": "string"},
            },
        },
    },
}
"""CDI's ``swagger.json`` has no StorageProfile definition; this is its ``StorageProfileSpec`` Go type
(kubevirt/containerized-data-importer ``staging/src/kubevirt.io/containerized-data-importer-api/pkg/apis/core/
v1beta1/types.go``), written out by hand."""
_STRING: dict[str, Any] = {"type": "string"}
_BOOLEAN: dict[str, Any] = {"type": "boolean"}
_SECRET_REF: dict[str, Any] = {"type": "object", "properties": {"name": _STRING, "namespace": _STRING}}
_HELM_CHART_PROXY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["clusterSelector", "chartName", "repoURL"],
            "properties": {
                "clusterSelector": {
                    "type": "object",
                    "properties": {
                        "matchLabels": {"type": "object", "additionalProperties": _STRING},
                        "matchExpressions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["key", "operator"],
                                "properties": {
                                    "key": _STRING,
                                    "operator": _STRING,
                                    "values": {"type": "array", "items": _STRING},
                                },
                            },
                        },
                    },
                },
                "chartName": _STRING,
                "repoURL": _STRING,
                "releaseName": _STRING,
                "namespace": _STRING,
                "version": _STRING,
                "valuesTemplate": _STRING,
                "reconcileStrategy": {"type": "string", "enum": ["", "InstallOnce", "Continuous"]},
                "options": {
                    "type": "object",
                    "properties": {
                        **dict.fromkeys(
                            (
                                "disableHooks",
                                "wait",
                                "waitForJobs",
                                "dependencyUpdate",
                                "skipCRDs",
                                "options",
                                "disableOpenAPIValidation",
                                "atomic",
                                "enableClientCache",
                                "takeOwnership",
                            ),
                            _BOOLEAN,
                        ),
                        "timeout": _STRING,
                        "install": {
                            "type": "object",
                            "properties": {"createNamespace": _BOOLEAN, "includeCRDs": _BOOLEAN},
                        },
                        "upgrade": {
                            "type": "object",
                            "properties": {
                                **dict.fromkeys(
                                    (
                                        "force",
                                        "resetValues",
                                        "reuseValues",
                                        "resetThenReuseValues",
                                        "recreate",
                                        "cleanupOnFail",
                                    ),
                                    _BOOLEAN,
                                ),
                                "maxHistory": {"type": "integer"},
                            },
                        },
                        "uninstall": {"type": "object", "properties": {"keepHistory": _BOOLEAN}},
                    },
                },
                "credentials": {
                    "type": "object",
                    "required": ["secret", "key"],
                    "properties": {"secret": _SECRET_REF, "key": _STRING},
                },
                "tlsConfig": {
                    "type": "object",
                    "properties": {"caSecret": _SECRET_REF, "insecureSkipTLSVerify": _BOOLEAN},
                },
            },
        },
    },
}
"""``HelmChartProxySpec`` of CAAPH v0.6.4 (kubernetes-sigs/cluster-api-addon-provider-helm ``api/v1alpha1/
helmchartproxy_types.go`` and the CRD generated from it at that tag), written out by hand because this repository's
``shared/upstream`` lacks the CRD: used only when the schema directory has no
``cluster-api-addon-provider-helm/addons.cluster.x-k8s.io_helmchartproxies.yaml``."""
_HAND_SCHEMAS = {("cdi.kubevirt.io/v1beta1", "StorageProfile"): _STORAGE_PROFILE_SCHEMA}
FALLBACK_SCHEMAS = {("addons.cluster.x-k8s.io/v1alpha1", "HelmChartProxy"): _HELM_CHART_PROXY_SCHEMA}
"""Hand schemas used only when no CRD in the schema directory declares the kind."""
_CRD_GROUPS_UNDER_K8S_IO = ("gateway.networking.k8s.io", "snapshot.storage.k8s.io")
"""API groups under ``k8s.io`` that are not built into the API server: Gateway API and CSI snapshots ship as
CRDs."""
_CORE_GROUP = re.compile(r"^([a-z]+/)?v\d+((alpha|beta)\d+)?$|^[a-z.]*k8s\.io/")


@dataclass(frozen=True)
class Violation:
    """One schema error: dotted path into the object and the validator's message."""

    path: str
    message: str


def _dotted(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "-"


_BRANCHES = ("anyOf", "oneOf", "allOf", "not")
_FORMATS = jsonschema.FormatChecker(formats=())
"""The string formats the API server enforces that CRDs we check use (Cilium's ``cidr``)."""


@_FORMATS.checks("cidr", raises=ValueError)
def _is_cidr(value: object) -> bool:
    if isinstance(value, str):
        ipaddress.ip_network(value, strict=False)
    return True


def strict_schema(schema: Any, *, branch: bool = False) -> Any:
    """A copy of ``schema`` in which objects reject unknown keys, as server-side field validation does.

    Objects that declare ``properties`` get ``additionalProperties: false`` unless they say otherwise or carry
    ``x-kubernetes-preserve-unknown-fields``; ``int-or-string`` fields accept both. The branches of ``anyOf``/
    ``oneOf``/``allOf`` are partial constraints on the enclosing object (Cilium: "``ingress`` is required"), so
    they stay open themselves; what they nest is made strict as usual.
    """
    if isinstance(schema, list):
        return [strict_schema(s, branch=branch) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v, branch=k in _BRANCHES) for k, v in schema.items()}
    if out.get("format") == "int-or-string" or out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("format", None)
        out["type"] = ["integer", "string"]
    if (
        not branch
        and "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


class _Defaulter:
    """Fill schema defaults into an instance, following ``$ref`` into the schema's ``definitions``."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.definitions = root.get("definitions", {})

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        seen = 0
        while "$ref" in schema and seen < 32:
            schema = self.definitions.get(schema["$ref"].rsplit("/", 1)[-1], {})
            seen += 1
        return schema

    def apply(self, instance: Any, schema: dict[str, Any]) -> Any:
        schema = self.resolve(schema)
        if isinstance(instance, dict):
            for key, declared in (schema.get("properties") or {}).items():
                sub = self.resolve(declared)
                if key not in instance and "default" in sub:
                    instance[key] = copy.deepcopy(sub["default"])
                if key in instance:
                    instance[key] = self.apply(instance[key], sub)
        elif isinstance(instance, list) and isinstance(schema.get("items"), dict):
            return [self.apply(item, schema["items"]) for item in instance]
        return instance


class ObjectChecker:
    """Validate rendered objects; one instance per schema directory and Kubernetes minor."""

    def __init__(self, store: SchemaStore, kubernetes_minor: str) -> None:
        self.store = store
        self.kubernetes_minor = kubernetes_minor

    @property
    def core_schema_version(self) -> str | None:
        """The kubernetes-validate schema release used for ``kubernetes_minor``: the newest one not newer than it
        (``None`` when it ships none that old)."""
        wanted = _minor_tuple(self.kubernetes_minor)
        older = [v for v in kv.all_versions() if _minor_tuple(kv.major_minor(v)) <= wanted]
        return max(older, key=lambda v: _minor_tuple(kv.major_minor(v))) if older else None

    # -- schema lookup -------------------------------------------------------------------------------------------
    def source_of(self, api_version: str, kind: str) -> str | None:
        """The schema file for a custom resource (relative path), ``"kubernetes"`` for core kinds, or ``None``."""
        group = api_version.split("/", 1)[0] if "/" in api_version else ""
        if group.endswith(_CRD_GROUPS_UNDER_K8S_IO):  # installed by CRDs although named *.k8s.io
            return self._crd_index().get((api_version, kind), (None, None, None))[0]
        if _CORE_GROUP.match(api_version):
            return "kubernetes"
        if (api_version, kind) in _HAND_SCHEMAS:
            return "by hand"
        if group in _SWAGGER:
            return _SWAGGER[group]
        source = self._crd_index().get((api_version, kind), (None, None, None))[0]
        if source is None and (api_version, kind) in FALLBACK_SCHEMAS:
            return "by hand"
        return source

    @cache  # noqa: B019 - one checker per plan; the index is built once
    def _crd_index(self) -> dict[tuple[str, str], tuple[str, dict[str, Any], str]]:
        """(apiVersion, kind) -> (file, the version's ``openAPIV3Schema``, ``NAME/VERSION`` of the CRD)."""
        index: dict[tuple[str, str], tuple[str, dict[str, Any], str]] = {}
        for rel in _CRD_FILES:
            if not self.store.has(rel):
                continue
            loaded = self.store.load(rel)
            for document in loaded if isinstance(loaded, list) else [loaded]:
                if not document or document.get("kind") != "CustomResourceDefinition":
                    continue
                spec = document["spec"]
                for version in spec["versions"]:
                    key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
                    name = f"{document['metadata']['name']}/{version['name']}"
                    index[key] = (rel, version["schema"]["openAPIV3Schema"], name)
        return index

    @cache  # noqa: B019
    def _custom_validator(self, api_version: str, kind: str) -> tuple[jsonschema.Validator, dict[str, Any]]:
        source = self.source_of(api_version, kind)
        if source == "by hand":
            root = strict_schema({**FALLBACK_SCHEMAS, **_HAND_SCHEMAS}[(api_version, kind)])
            return jsonschema.Draft4Validator(root, format_checker=_FORMATS), root
        if source in _SWAGGER.values():
            assert source is not None
            swagger = self.store.load(source)
            definition = f"{api_version.rsplit('/', 1)[-1]}.{kind}"
            if definition not in swagger["definitions"]:
                raise LookupError(f"{source} has no definition {definition}")
            root = {"$ref": f"#/definitions/{definition}", "definitions": strict_schema(swagger["definitions"])}
        else:
            root = strict_schema(self._crd_index()[(api_version, kind)][1])
        return jsonschema.Draft4Validator(root, format_checker=_FORMATS), root

    @cache  # noqa: B019
    def _core_validator(self, api_version: str, kind: str) -> jsonschema.Validator:
        version = self.core_schema_version
        if version is None:
            raise LookupError(f"kubernetes-validate has no schemas for Kubernetes {self.kubernetes_minor}")
        schema_dir = f"v{version}-local-strict"
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        try:
            schema = kv.schema_contents(
                f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", self.kubernetes_minor
            )
        except FileNotFoundError:
            raise LookupError(f"{api_version} {kind} is not a Kubernetes {self.kubernetes_minor} kind") from None
        definitions = kv.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/_definitions.json", self.kubernetes_minor
        )
        registry: referencing.Registry = referencing.Resource.from_contents(definitions) @ (
            referencing.Resource.from_contents(schema) @ referencing.Registry()
        )
        return jsonschema.Draft202012Validator(schema, registry=registry)

    @cache  # noqa: B019
    def cel_rules(self, api_version: str, kind: str) -> CrdRules | None:
        """The CEL rules of the CRD version that serves ``api_version`` ``kind``; ``None`` when no CRD of the schema
        directory does (core kinds, KubeVirt's and CDI's swagger, hand schemas: none of them carries rules)."""
        found = self._crd_index().get((api_version, kind))
        return None if found is None else CrdRules(found[2], found[1])

    # -- checking ------------------------------------------------------------------------------------------------
    def cel_check(self, obj: dict[str, Any], tally: CelTally) -> Iterator[Violation]:
        """The CEL rules of ``obj``'s CRD (:mod:`gpucell.stacks.conformance.cel_rules`) that ``obj`` fails, on the
        value the schema check sees (nulls dropped, defaults filled); counts rules and evaluations into ``tally``."""
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        rules = self.cel_rules(api_version, kind)
        if rules is None:
            return
        root = self._custom_validator(api_version, kind)[1]
        instance = _Defaulter(root).apply(_drop_nulls(copy.deepcopy(obj)), root)
        for path, message in rules.check(instance, tally):
            yield Violation(path, message)

    def check(self, obj: dict[str, Any], *, partial: bool = False) -> Iterator[Violation]:
        """Schema violations of ``obj``; ``partial`` for patches (``required`` not enforced).

        Yields one ``Violation("-", ...)`` when no schema is known for the object's apiVersion and kind.
        """
        api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
        source = self.source_of(api_version, kind)
        if source is None:
            yield Violation("-", f"no upstream schema for {api_version} {kind} in {self.store.root}")
            return
        instance = _drop_nulls(copy.deepcopy(obj))
        try:
            if source == "kubernetes":
                validator: jsonschema.Validator = self._core_validator(api_version, kind)
            else:
                validator, root = self._custom_validator(api_version, kind)
                instance = _Defaulter(root).apply(instance, root)
        except LookupError as exc:
            yield Violation("-", str(exc))
            return
        for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
            if partial and error.validator == "required":
                continue
            yield Violation(_dotted(error.absolute_path), error.message)


def _minor_tuple(minor: str) -> tuple[int, int]:
    major, number = minor.split(".")[:2]
    return int(major), int(number)


@functools.lru_cache(maxsize=8)
def checker_for(root: Path, kubernetes_minor: str) -> ObjectChecker:
    """One :class:`ObjectChecker` per schema directory and Kubernetes minor per process: the strict schemas and
    validators it builds (the KubeVirt swagger alone has ~900 definitions) are reused across regions and runs."""
    return ObjectChecker(SchemaStore(root), kubernetes_minor)
