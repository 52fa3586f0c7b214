"""The inputs of the component package's components, as spec models derived from the components' ``*Args``.

What a TypeScript, Go or C# program passes to :mod:`gpucell.package.component_package` arrives as plain dicts; each
component validates them with its model here, so a mistake is one :class:`~gpucell.errors.ConfigError` line per
problem with its key path (``nodePools.h100.gpuMode: 'passthrough' is not one of ...``), as in stack config. The
``TypedDict`` classes the package schema is inferred from are generated from these models
(:mod:`tools.package_types`).

Each model is derived from its component's ``*Args`` dataclass (:func:`derive`): a field of the ``*Args`` becomes an
input of the same name, type (a ``Mapping`` a ``dict``, a ``Sequence`` a ``list``), default and docstring, and the
component builds its ``*Args`` from what was validated (:meth:`Derivation.build`). A field no plain value can express
(the cluster handle, a Pulumi resource, a secret that may be an output, what only a stack knows) is listed in
:data:`NOT_DERIVED`, with how the package gives it or why it does not; a field neither derivable nor listed fails the
import. So a field added to an ``*Args`` reaches the package, or is refused, without a second hand edit. The inputs
that stand for a handle are written once, in the base a model is derived on: ``cluster`` (:class:`OnCluster`), CDI's
StorageClass (:class:`CdiVolumeInputs`), a workload's tenant (:class:`WorkloadInputs`). Inputs that may be Pulumi
outputs (secrets, a StorageClass name) are not validated: a model names them in ``PASSED_THROUGH``
(:class:`PassedThrough`), the generator adds them to its ``TypedDict`` as ``pulumi.Input[str]`` with their docs, and
the package's schema marks the secret ones ``secret``.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import sys
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field, create_model, field_validator

from gpucell.admission.tenants import ClusterFacts
from gpucell.cell import RegionalCellArgs
from gpucell.cluster import CONTAINERD_CONFIG, CONTAINERD_SOCKET, ContainerRuntime, check_kubernetes_minor
from gpucell.components.cdi import CdiArgs
from gpucell.components.cert_manager import CertManagerArgs
from gpucell.components.dra_driver import DraDriverArgs
from gpucell.components.gpu_operator import GpuOperatorArgs
from gpucell.components.keda import KedaArgs
from gpucell.components.kserve import KServeArgs
from gpucell.components.kubevirt import KubeVirtArgs
from gpucell.components.network_operator import NetworkOperatorArgs
from gpucell.components.storage import StorageArgs
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.workloads import AccessMode, VolumeMode
from gpucell.tenancy.tenant import TenantArgs
from gpucell.workloads.model_endpoint import ModelEndpointArgs
from gpucell.workloads.notebook import NotebookArgs
from gpucell.workloads.virtual_machine import GpuVirtualMachineArgs

__all__ = [
    "CDI",
    "CERT_MANAGER",
    "DERIVATIONS",
    "DRA_DRIVER",
    "GPU_OPERATOR",
    "GPU_VIRTUAL_MACHINE",
    "KEDA",
    "KSERVE",
    "KUBEVIRT",
    "MODEL_ENDPOINT",
    "NETWORK_OPERATOR",
    "NOTEBOOK",
    "NOT_DERIVED",
    "REGIONAL_CELL",
    "STORAGE",
    "TENANT",
    "CdiInputs",
    "CdiVolumeInputs",
    "CertManagerInputs",
    "ClusterInputs",
    "ComponentInputs",
    "ContainerdInputs",
    "Derivation",
    "DraDriverInputs",
    "GpuOperatorInputs",
    "GpuVirtualMachineInputs",
    "GpuVirtualMachineSecrets",
    "KServeInputs",
    "KedaInputs",
    "KubeVirtInputs",
    "ModelEndpointInputs",
    "ModelEndpointSecrets",
    "NetworkOperatorInputs",
    "NotebookInputs",
    "OnCluster",
    "PassedThrough",
    "RegionalCellInputs",
    "RegionalCellSecrets",
    "StorageInputs",
    "TenantInputs",
    "WorkloadInputs",
    "derive",
    "field_docs",
]


@dataclass(frozen=True)
class PassedThrough:
    """An input of a component that may be a Pulumi output (a secret, a StorageClass name from another resource):
    typed ``pulumi.Input[str]`` in the package (``Mapping[str, pulumi.Input[str]]`` when ``mapping``), used as
    given, never validated by the input model."""

    key: str
    """The schema's camelCase key (``sshPrivateKey``)."""
    doc: str
    """Its description in the schema."""
    required: bool = False
    """The component cannot be built without it."""
    secret: bool = False
    """A secret: the schema marks it ``secret`` (the SDKs wrap it as one), and the component makes it one."""
    mapping: bool = False
    """A map of such strings by key (``envSecrets``: one value per config key), not one string."""

    @property
    def annotation(self) -> str:
        """Its type in the generated ``TypedDict``."""
        return "Mapping[str, pulumi.Input[str]]" if self.mapping else "pulumi.Input[str]"


class ComponentInputs(SpecModel):
    """The inputs of one component of the package: validated whole, but for its ``PASSED_THROUGH`` inputs."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = ()
    """The inputs used as given (:class:`PassedThrough`). Defaults to none."""


class ContainerdInputs(SpecModel):
    """Host paths of the nodes' containerd (:class:`gpucell.cluster.ContainerRuntime`); default: containerd's own."""

    config: str = CONTAINERD_CONFIG
    """The file the GPU Operator's toolkit writes its ``nvidia`` runtime into. Defaults to
    ``/etc/containerd/config.toml``; on k3s, ``/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl``."""
    socket: str = CONTAINERD_SOCKET
    """containerd's socket. Defaults to ``/run/containerd/containerd.sock``; on k3s and RKE2,
    ``/run/k3s/containerd/containerd.sock``."""
    config_source: str | None = None
    """``file=<path>`` the current config is read from; none: ``containerd config dump`` (which needs a
    ``containerd`` binary on the host). On k3s, ``file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml``."""

    def runtime(self) -> ContainerRuntime:
        """These paths as a :class:`~gpucell.cluster.ContainerRuntime`."""
        return ContainerRuntime(self.config, self.socket, self.config_source)


class ClusterInputs(SpecModel):
    """The cluster a component deploys onto. Its provider is the ``kubernetes`` provider of the component's resource
    options (``providers``); gpucell never falls back to an ambient kubeconfig."""

    kubernetes_version: str
    """``MAJOR.MINOR`` of the cluster's API server (``1.33``): pins the tenant namespaces' Pod Security version."""
    containerd: ContainerdInputs = ContainerdInputs()
    """Where the nodes' containerd keeps its config and socket. Defaults to containerd's own paths."""

    _minor = field_validator("kubernetes_version")(check_kubernetes_minor)


class OnCluster(ComponentInputs):
    """The inputs of a component on a cluster: ``cluster`` first, then those derived from its ``*Args``."""

    cluster: ClusterInputs
    """The cluster to install into."""


class CdiVolumeInputs(OnCluster):
    """CDI's :class:`~gpucell.components.cdi.VolumeClass` as inputs: the StorageClass (which may be another resource's
    output, so passed through) and the PVC shape of a VM disk in it."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough(
            "storageClass",
            "The StorageClass VM disks live in (the cluster's default): CDI's scratch space, and the StorageProfile "
            "patched with ``volumeMode`` and ``accessModes``.",
            required=True,
        ),
    )

    volume_mode: VolumeMode = VolumeMode.FILESYSTEM
    """``volumeMode`` of a VM disk's PVC in the StorageClass: ``Filesystem`` (default) or ``Block``."""
    access_modes: list[str] = [AccessMode.RWO.value]
    """``accessModes`` of a VM disk's PVC (``ReadWriteOnce``, ``ReadWriteMany``, ``ReadWriteOncePod``). Defaults to
    ``ReadWriteOnce``."""

    @field_validator("access_modes")
    @classmethod
    def _access_modes(cls, values: list[str]) -> list[str]:
        # strings, not AccessMode: the SDK's ComponentProvider maps the items of a list of enums as objects
        # (tools/package_types.py refuses such a field)
        known = [mode.value for mode in AccessMode]
        for index, value in enumerate(values):
            if value not in known:
                raise SpecError((index,), f"{shown(value)} is not one of {', '.join(known)}")
        return values


class WorkloadInputs(ComponentInputs):
    """A workload's ``tenant`` handle as inputs (what :class:`gpucell.tenancy.tenant.TenantRef` takes), and its
    ``name``."""

    cluster: ClusterInputs
    """The cluster the workload's tenant lives on."""
    tenant: str
    """Its tenant's key (``acme``); the tenant's namespace must exist (give the workload ``dependsOn`` it)."""
    name: str
    """The workload name (DNS-1123 label, unique in the tenant)."""
    facts: ClusterFacts
    """The cluster's facts, the tenant among their ``tenants``: the workload is admitted with its tenant."""
    tenant_removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The tenant's ``removalPolicy``, the workload's default. Defaults to ``protect``."""


class ModelEndpointSecrets(WorkloadInputs):
    """A model endpoint's secrets, passed through."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough(
            "credentials",
            "The secret ``spec.credentialsConfigKey`` stands for: a Hugging Face token for ``hf://``, or "
            "``<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>`` for ``s3://``.",
            secret=True,
        ),
        PassedThrough(
            "envSecrets",
            "The values of ``spec.env`` entries with ``secretConfigKey``, by that key; one for each such entry.",
            secret=True,
            mapping=True,
        ),
    )


class GpuVirtualMachineSecrets(WorkloadInputs):
    """A VM's secrets, passed through."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough(
            "secrets",
            "The value of every config key the spec names, by that key: ``cloudInit.userDataConfigKey`` (the "
            "user's cloud-config) and each disk's ``source.credentialsConfigKey`` (``<user>:<password>`` of the "
            "import source); one for each.",
            secret=True,
            mapping=True,
        ),
    )


class RegionalCellSecrets(ComponentInputs):
    """A cell's secrets, passed through."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough("sshPrivateKey", "SSH private key for every node of the region.", required=True, secret=True),
        PassedThrough(
            "etcdS3Credentials",
            "``<access key id>:<secret access key>`` for ``etcd.snapshots.s3``; required with it.",
            secret=True,
        ),
        PassedThrough(
            "remoteWriteCredentials",
            "``<user>:<password>`` for ``metrics.remoteWrite``; required with it.",
            secret=True,
        ),
        PassedThrough(
            "backupCredentials",
            "``<access key id>:<secret access key>`` of ``backups.storage``'s bucket; required with ``backups``.",
            secret=True,
        ),
        PassedThrough(
            "backupRepositoryPassword",
            "The password encrypting the backed-up volumes (``backups.repositoryPasswordConfigKey``); required with "
            "``backups``.",
            secret=True,
        ),
        PassedThrough(
            "imageCredentials",
            "``<user>:<password>`` of every ``imageCatalogs`` image source's ``credentialsConfigKey``, by that key; "
            "one for each.",
            secret=True,
            mapping=True,
        ),
    )


# -- the derivation ------------------------------------------------------------------------------------------------

_CLUSTER = "a handle (provider, readiness): the input ``cluster``, and the ``kubernetes`` provider of the options"
_TENANT = (
    "a handle: the inputs ``tenant``, ``facts``, ``cluster`` and ``tenantRemovalPolicy`` (a ``TenantRef``); what it "
    "waits for is ``dependsOn``"
)
_DEPENDS_ON = "Pulumi resources: ``dependsOn``"
_PASSED = "a secret that may be an output: the input ``{}``, used as given"
_LAST_DEPLOYMENT = "what the stack program reads back from the last deployment; the package builds the cell as new"

NOT_DERIVED: dict[type, dict[str, str]] = {
    GpuOperatorArgs: {"cluster": _CLUSTER},
    KubeVirtArgs: {"cluster": _CLUSTER},
    CdiArgs: {
        "cluster": _CLUSTER,
        "volumes": "a handle: the inputs ``storageClass`` (may be an output), ``volumeMode`` and ``accessModes``; "
        "what the class waits for is ``dependsOn``",
    },
    DraDriverArgs: {"cluster": _CLUSTER},
    CertManagerArgs: {"cluster": _CLUSTER},
    KServeArgs: {"cluster": _CLUSTER},
    StorageArgs: {"cluster": _CLUSTER},
    KedaArgs: {"cluster": _CLUSTER},
    NetworkOperatorArgs: {"cluster": _CLUSTER},
    TenantArgs: {"cluster": _CLUSTER, "platform": f"component handles, not schema types; {_DEPENDS_ON}"},
    GpuVirtualMachineArgs: {
        "tenant": _TENANT,
        "after": _DEPENDS_ON,
        "secrets": _PASSED.format("secrets"),
    },
    NotebookArgs: {"tenant": _TENANT},
    ModelEndpointArgs: {
        "tenant": _TENANT,
        "credentials": _PASSED.format("credentials"),
        "route": "derived from ``facts.gateway`` and ``spec.expose``, as the cell derives it",
        "gateway": _DEPENDS_ON,
        "env_secrets": _PASSED.format("envSecrets"),
        "runtime": f"a tenant's ServingRuntime, which the package does not export; {_DEPENDS_ON}",
    },
    RegionalCellArgs: {
        "ssh_private_key": _PASSED.format("sshPrivateKey"),
        "etcd_s3_credentials": _PASSED.format("etcdS3Credentials"),
        "registered_hosts": _LAST_DEPLOYMENT,
        "remote_write_credentials": _PASSED.format("remoteWriteCredentials"),
        "backup_credentials": "secrets that may be outputs: the inputs ``backupCredentials`` and "
        "``backupRepositoryPassword``, used as given",
        "control_server": f"{_LAST_DEPLOYMENT} (a server being removed)",
        "deployed_gpu_nodes": _LAST_DEPLOYMENT,
        "image_credentials": _PASSED.format("imageCredentials"),
        "other_cells": "the stack's other cells: a package program builds one",
    },
}
"""``*Args`` -> its fields that are not derived as inputs -> how the package gives each, or why it does not. Every
other field of a package component's ``*Args`` is an input of its model (:func:`derive`)."""

_A = TypeVar("_A")
_M = TypeVar("_M", bound=ComponentInputs)


@dataclass(frozen=True)
class Derivation(Generic[_A, _M]):
    """A component's input model, derived from its ``*Args`` (:func:`derive`)."""

    args: type[_A]
    """The ``*Args`` dataclass."""
    model: type[_M]
    """The input model: the base's inputs, then one per derived field."""
    derived: tuple[str, ...]
    """The ``*Args`` fields that are inputs of the same name, in order (the base's included)."""

    def build(self, inputs: _M, **given: Any) -> _A:
        """The ``*Args`` of validated ``inputs``: each derived field as validated, the others ``given`` (the handles
        :data:`NOT_DERIVED` names; left out, a field keeps its default)."""
        return self.args(**{name: getattr(inputs, name) for name in self.derived}, **given)


def derive(args: type[_A], doc: str, base: type[_M], cluster: str | None = None) -> Derivation[_A, _M]:
    """The input model of the component taking ``args`` (``<Component>Args``), named ``<Component>Inputs`` and
    documented ``doc``: ``base``'s inputs (``cluster`` documented ``cluster``, when given), then each field of
    ``args`` neither in ``base`` nor in :data:`NOT_DERIVED`, with its type (:func:`_input_type`), default and
    docstring.

    Raises :class:`TypeError` for a field with no input type that :data:`NOT_DERIVED` does not list, or for a listed
    name that is not a field of ``args``.
    """
    listed = NOT_DERIVED.get(args, {})
    fields = {field.name: field for field in dataclasses.fields(args)}  # type: ignore[arg-type]
    if stale := sorted(set(listed) - set(fields)):
        raise TypeError(f"NOT_DERIVED lists {', '.join(stale)}, which {args.__name__} does not have")
    docs = field_docs(args)
    namespace = vars(sys.modules[args.__module__])
    derived: list[str] = []
    inputs: dict[str, Any] = {}
    for key, field in fields.items():
        if key in listed:
            continue
        derived.append(key)
        if key in base.model_fields:
            continue
        hint = eval(field.type, namespace) if isinstance(field.type, str) else field.type  # the own source of an *Args
        try:
            annotation = _input_type(hint)
        except TypeError as error:
            raise TypeError(
                f"{args.__name__}.{key}: {error}; derive it, or say in NOT_DERIVED how the package gives it"
            ) from None
        inputs[key] = (annotation, Field(description=docs.get(key), **_default(field)))
    if cluster is not None:  # the base's field, documented for this component (it keeps its place)
        inputs["cluster"] = (ClusterInputs, Field(description=cluster))
    model = create_model(
        args.__name__.removesuffix("Args") + "Inputs",
        __base__=base,
        __doc__=doc,
        __module__=__name__,
        **inputs,
    )
    return Derivation(args, model, tuple(derived))


def _input_type(hint: Any) -> Any:
    """The input type of an ``*Args`` field's type: plain values as they are (a ``Mapping`` a ``dict``, a ``Sequence``
    a ``list``, ``X | None`` an optional ``X``); raises :class:`TypeError` for anything else (a handle, a resource,
    ``pulumi.Input``)."""
    origin, inner = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and len(inner) == 2 and type(None) in inner:
        present = next(item for item in inner if item is not type(None))
        return _input_type(present) | None
    if origin in (dict, Mapping) and inner[0] is str:
        return dict[str, _input_type(inner[1])]  # type: ignore[misc]
    if origin in (list, Sequence) or (origin is tuple and len(inner) == 2 and inner[1] is Ellipsis):
        return list[_input_type(inner[0])]  # type: ignore[misc]
    if hint in (str, int, bool, float, Any):
        return hint
    if isinstance(hint, type) and issubclass(hint, enum.Enum | BaseModel):
        return hint
    raise TypeError(f"{hint!r} is no plain value")


def _default(field: dataclasses.Field[Any]) -> dict[str, Any]:
    if field.default is not dataclasses.MISSING:
        return {"default": field.default}
    if field.default_factory is not dataclasses.MISSING:
        return {"default_factory": field.default_factory}
    return {}


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring under it in ``cls``'s source (how gpucell documents dataclass fields), cleaned
    (:func:`inspect.cleandoc`). The package's input docs and the component pages (``tools/component_pages.py``) read
    the ``*Args`` through it."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    for statement, following in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


# -- the models ----------------------------------------------------------------------------------------------------

GPU_OPERATOR = derive(
    GpuOperatorArgs,
    "Inputs of the NVIDIA GPU Operator (:class:`gpucell.components.gpu_operator.GpuOperatorArgs`).",
    OnCluster,
    cluster="The cluster to install into: its containerd paths reach the container toolkit.",
)
GpuOperatorInputs = GPU_OPERATOR.model
KUBEVIRT = derive(KubeVirtArgs, "Inputs of KubeVirt (:class:`gpucell.components.kubevirt.KubeVirtArgs`).", OnCluster)
KubeVirtInputs = KUBEVIRT.model
CDI = derive(CdiArgs, "Inputs of CDI (:class:`gpucell.components.cdi.CdiArgs`).", CdiVolumeInputs)
CdiInputs = CDI.model
DRA_DRIVER = derive(
    DraDriverArgs,
    "Inputs of the NVIDIA DRA driver (:class:`gpucell.components.dra_driver.DraDriverArgs`).",
    OnCluster,
)
DraDriverInputs = DRA_DRIVER.model
CERT_MANAGER = derive(
    CertManagerArgs,
    "Inputs of cert-manager (:class:`gpucell.components.cert_manager.CertManagerArgs`).",
    OnCluster,
)
CertManagerInputs = CERT_MANAGER.model
KSERVE = derive(
    KServeArgs,
    "Inputs of KServe (:class:`gpucell.components.kserve.KServeArgs`); give it ``dependsOn`` cert-manager.",
    OnCluster,
)
KServeInputs = KSERVE.model
STORAGE = derive(
    StorageArgs,
    "Inputs of the storage layer (:class:`gpucell.components.storage.StorageArgs`): Longhorn (``local-path`` is\n"
    "k3s's).",
    OnCluster,
)
StorageInputs = STORAGE.model
KEDA = derive(KedaArgs, "Inputs of KEDA (:class:`gpucell.components.keda.KedaArgs`).", OnCluster)
KedaInputs = KEDA.model
NETWORK_OPERATOR = derive(
    NetworkOperatorArgs,
    "Inputs of the NVIDIA Network Operator (:class:`gpucell.components.network_operator.NetworkOperatorArgs`);\n"
    "give it ``dependsOn`` the GPU Operator when this program installs it (its node labels).",
    OnCluster,
)
NetworkOperatorInputs = NETWORK_OPERATOR.model
TENANT = derive(
    TenantArgs,
    "Inputs of a tenant (:class:`gpucell.tenancy.tenant.TenantArgs`); give it ``dependsOn`` KubeVirt (and Cilium when\n"
    "this program installs it).",
    OnCluster,
    cluster="The cluster the tenant lives on.",
)
TenantInputs = TENANT.model
GPU_VIRTUAL_MACHINE = derive(
    GpuVirtualMachineArgs,
    "Inputs of a tenant's VM (:class:`gpucell.workloads.virtual_machine.GpuVirtualMachineArgs`).",
    GpuVirtualMachineSecrets,
)
GpuVirtualMachineInputs = GPU_VIRTUAL_MACHINE.model
NOTEBOOK = derive(
    NotebookArgs, "Inputs of a tenant's notebook (:class:`gpucell.workloads.notebook.NotebookArgs`).", WorkloadInputs
)
NotebookInputs = NOTEBOOK.model
MODEL_ENDPOINT = derive(
    ModelEndpointArgs,
    "Inputs of a tenant's model endpoint (:class:`gpucell.workloads.model_endpoint.ModelEndpointArgs`).",
    ModelEndpointSecrets,
)
ModelEndpointInputs = MODEL_ENDPOINT.model
REGIONAL_CELL = derive(
    RegionalCellArgs, "Inputs of a whole cell (:class:`gpucell.cell.RegionalCellArgs`).", RegionalCellSecrets
)
RegionalCellInputs = REGIONAL_CELL.model

DERIVATIONS: tuple[Derivation[Any, Any], ...] = (
    GPU_OPERATOR,
    KUBEVIRT,
    CDI,
    DRA_DRIVER,
    CERT_MANAGER,
    KSERVE,
    STORAGE,
    KEDA,
    NETWORK_OPERATOR,
    TENANT,
    GPU_VIRTUAL_MACHINE,
    NOTEBOOK,
    MODEL_ENDPOINT,
    REGIONAL_CELL,
)
"""Every component's input model, in the order of the package's components."""
