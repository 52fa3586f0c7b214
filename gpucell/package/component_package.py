"""gpucell's components as a Pulumi component package, for TypeScript, Go, C#, Java and YAML programs.

Each class here is the component of the same name (same type token ``gpucell:index:<Class>``, same children and
outputs) with a schema-friendly surface: ``args`` is a ``TypedDict`` generated from :mod:`gpucell.package.inputs`
(:mod:`gpucell.package._generated.types`), which Pulumi's analyzer (``pulumi.provider.experimental``) turns into the
package schema; what arrives is validated by those models, so a mistake is the same one-line
:class:`~gpucell.errors.ConfigError` as in stack config, and the component refuses before registering anything.

What the package takes differently from Python:

- the Kubernetes provider is the component's resource option (``providers``), never an input; a component without one
  is refused (gpucell never falls back to an ambient kubeconfig). ``cluster`` gives the Kubernetes minor and the
  containerd paths;
- ordering is the resource option ``dependsOn`` (a tenant after KubeVirt, KServe after cert-manager, a workload after
  its tenant): the Python components' handles (:class:`~gpucell.platform.Platform`) are not schema types;
- a workload names its tenant and takes the cluster's facts holding that tenant
  (:class:`~gpucell.tenancy.tenant.TenantRef`).

``plugin/PulumiPlugin.yaml`` and ``plugin/__main__.py`` host them (:func:`main`); docs/component-package.md shows a
TypeScript program. Decision 0019 says which components are exported and why.
"""

import dataclasses
import importlib.metadata
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pulumi
from pulumi.errors import InputPropertiesError, InputPropertyErrorDetails
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ComponentInitError

from gpucell import cell
from gpucell.cluster import Cluster
from gpucell.components import cdi, cert_manager, gpu_operator, keda, kserve, kubevirt, network_operator, storage
from gpucell.components import dra_driver as dra  # the component's own name is DraDriver
from gpucell.components.backups import BackupCredentials
from gpucell.components.gateway import EndpointRoute, gateway_name
from gpucell.errors import ConfigError
from gpucell.package import inputs as package_inputs
from gpucell.package._generated import types
from gpucell.spec import ModelEndpointSpec
from gpucell.spec.traffic import endpoint_host
from gpucell.tenancy import tenant as tenancy
from gpucell.workloads import model_endpoint, notebook, virtual_machine

__all__ = [
    "COMPONENTS",
    "SECRET_OUTPUTS",
    "Cdi",
    "CertManager",
    "DraDriver",
    "GpuOperator",
    "GpuVirtualMachine",
    "KServe",
    "Keda",
    "KubeVirt",
    "ModelEndpoint",
    "NetworkOperator",
    "Notebook",
    "PackageProvider",
    "RegionalCell",
    "Storage",
    "Tenant",
    "main",
]

PACKAGE = "gpucell"
"""The package name: type tokens ``gpucell:index:<Class>``, the SDK ``@pulumi/gpucell`` in TypeScript."""
_Inputs = TypeVar("_Inputs", bound=package_inputs.ComponentInputs)


def _whole_numbers(value: Any, key: str = "") -> Any:
    """``value`` with integral floats made ints: Pulumi sends every number as a float, and the analyzer turns only
    properties declared ``int`` back into ints, not the values of a map (``quota.gpus``). Chart ``values`` are left as
    given."""
    if isinstance(value, float) and value.is_integer() and key != "values":
        return int(value)
    if isinstance(value, Mapping) and key != "values":
        return {k: _whole_numbers(v, k) for k, v in value.items()}
    if isinstance(value, list) and key != "values":
        return [_whole_numbers(v) for v in value]
    return value


def _validated(model: type[_Inputs], args: Mapping[str, Any]) -> _Inputs:
    """``args`` validated by ``model`` (raises :class:`ConfigError`), leaving out its ``PASSED_THROUGH`` inputs (that
    may be Pulumi outputs, used as given: :class:`gpucell.package.inputs.PassedThrough`)."""
    passed = {item.key for item in model.PASSED_THROUGH}
    plain = {key: value for key, value in args.items() if key not in passed}
    return model.model_validate(_whole_numbers(plain))


def _provider(opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource:
    """The ``kubernetes`` provider of ``opts``; raises :class:`ConfigError` without one."""
    candidates: list[Any] = []
    if opts is not None:
        providers = opts.providers
        if isinstance(providers, Mapping):
            candidates.append(providers.get("kubernetes"))
        elif isinstance(providers, Sequence):
            candidates += list(providers)
        candidates.append(opts.provider)
    for candidate in candidates:
        if isinstance(candidate, pulumi.ProviderResource) and candidate.package == "kubernetes":
            return candidate
    raise ConfigError(
        [
            "providers: the resource options name no kubernetes provider; pass the cluster's (providers: "
            "[new kubernetes.Provider(...)]): gpucell never falls back to an ambient kubeconfig"
        ]
    )


def _cluster(inputs: package_inputs.ClusterInputs, opts: pulumi.ResourceOptions | None) -> Cluster:
    """The handle on the cluster ``inputs`` describe, on the provider of ``opts``."""
    return Cluster(_provider(opts), inputs.kubernetes_version, inputs.containerd.runtime())


class GpuOperator(gpu_operator.GpuOperator):
    """The NVIDIA GPU Operator: drivers, container toolkit, device plugins, MIG, vGPU, VFIO and DCGM, configured from
    the cluster's GPU pools (one Helm release ``gpu-operator`` in namespace ``gpu-operator``)."""

    namespace: pulumi.Output[str]
    """Namespace the operator and its operands run in (``gpu-operator``)."""

    def __init__(self, name: str, args: types.GpuOperatorInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.GPU_OPERATOR.model, args)
        super().__init__(name, package_inputs.GPU_OPERATOR.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class KubeVirt(kubevirt.KubeVirt):
    """KubeVirt: the operator and its ``KubeVirt`` CR (Available), permitting the GPUs of the cluster's VM pools."""

    namespace: pulumi.Output[str]
    """Namespace of KubeVirt (``kubevirt``)."""

    def __init__(self, name: str, args: types.KubeVirtInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.KUBEVIRT.model, args)
        super().__init__(name, package_inputs.KUBEVIRT.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class Cdi(cdi.Cdi):
    """CDI (Containerized Data Importer): the operator, its ``CDI`` CR and the StorageProfile of VM disks' class."""

    def __init__(self, name: str, args: types.CdiInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.CDI.model, args)
        volumes = cdi.VolumeClass(args["storageClass"], tuple(inputs.access_modes), inputs.volume_mode.value)
        spec = package_inputs.CDI.build(inputs, cluster=_cluster(inputs.cluster, opts), volumes=volumes)
        super().__init__(name, spec, opts)


class DraDriver(dra.DraDriver):
    """The NVIDIA DRA driver for GPUs on the cluster's ``dra`` pools (give it ``dependsOn`` the GPU Operator)."""

    namespace: pulumi.Output[str]
    """Namespace of the kubelet plugin (``dra-driver-nvidia-gpu``)."""

    def __init__(self, name: str, args: types.DraDriverInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.DRA_DRIVER.model, args)
        super().__init__(name, package_inputs.DRA_DRIVER.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class CertManager(cert_manager.CertManager):
    """cert-manager, with its CRDs; done when its webhook admits Certificates."""

    namespace: pulumi.Output[str]
    """Namespace cert-manager runs in (``cert-manager``)."""

    def __init__(self, name: str, args: types.CertManagerInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.CERT_MANAGER.model, args)
        spec = package_inputs.CERT_MANAGER.build(inputs, cluster=_cluster(inputs.cluster, opts))
        super().__init__(name, spec, opts)


class KServe(kserve.KServe):
    """KServe in raw-Deployment mode: CRDs, controller, built-in serving runtimes (give it ``dependsOn``
    cert-manager)."""

    namespace: pulumi.Output[str]
    """Namespace the KServe controller runs in (``kserve``)."""

    def __init__(self, name: str, args: types.KServeInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.KSERVE.model, args)
        super().__init__(name, package_inputs.KSERVE.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class Storage(storage.Storage):
    """The storage layer: Longhorn and its default StorageClass ``longhorn`` (``local-path`` is k3s's own)."""

    storage_class_name: pulumi.Output[str]
    """The default StorageClass; resolves once the storage is ready."""

    def __init__(self, name: str, args: types.StorageInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.STORAGE.model, args)
        super().__init__(name, package_inputs.STORAGE.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class Keda(keda.Keda):
    """KEDA, the autoscaler behind model endpoints scaled on a vLLM metric."""

    namespace: pulumi.Output[str]
    """``keda``."""

    def __init__(self, name: str, args: types.KedaInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.KEDA.model, args)
        super().__init__(name, package_inputs.KEDA.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


class NetworkOperator(network_operator.NetworkOperator):
    """The NVIDIA Network Operator for the cluster's fabric pools: the DOCA driver, SR-IOV VFs per rail, Multus and
    one network per tenant and rail on the tenant's VLAN (one Helm release ``network-operator`` in namespace
    ``nvidia-network-operator``, then its ``NicClusterPolicy``, ``SriovNetworkNodePolicy`` and ``SriovNetwork``
    objects)."""

    namespace: pulumi.Output[str]
    """Namespace of the operator and its policies (``nvidia-network-operator``)."""

    def __init__(
        self, name: str, args: types.NetworkOperatorInputs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = _validated(package_inputs.NETWORK_OPERATOR.model, args)
        cluster = _cluster(inputs.cluster, opts)
        super().__init__(name, package_inputs.NETWORK_OPERATOR.build(inputs, cluster=cluster), opts)


class Tenant(tenancy.Tenant):
    """One tenant: namespace (Pod Security ``restricted``), quota, limit defaults, RBAC and default-deny Cilium
    policies, admitted against the cluster's facts (give it ``dependsOn`` KubeVirt, and Cilium when this program
    installs it)."""

    namespace: pulumi.Output[str]
    """The tenant namespace (``tenant-<name>``)."""

    def __init__(self, name: str, args: types.TenantInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.TENANT.model, args)
        super().__init__(name, package_inputs.TENANT.build(inputs, cluster=_cluster(inputs.cluster, opts)), opts)


def _tenant(inputs: package_inputs.WorkloadInputs, opts: pulumi.ResourceOptions | None) -> tenancy.TenantRef:
    """The workload's tenant, as built elsewhere (its ``dependsOn``)."""
    return tenancy.TenantRef(
        inputs.tenant, inputs.facts, _cluster(inputs.cluster, opts), removal_policy=inputs.tenant_removal_policy
    )


class GpuVirtualMachine(virtual_machine.GpuVirtualMachine):
    """A tenant's KubeVirt VM with GPUs (passthrough, vGPU or DRA), its cloud-init Secret and SSH Service (give it
    ``dependsOn`` its tenant, KubeVirt and CDI)."""

    namespace: pulumi.Output[str]
    """The tenant namespace the VM lives in."""
    vm_name: pulumi.Output[str]
    """``metadata.name`` of the VirtualMachine."""

    def __init__(
        self, name: str, args: types.GpuVirtualMachineInputs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = _validated(package_inputs.GPU_VIRTUAL_MACHINE.model, args)
        secrets = {key: pulumi.Output.secret(value) for key, value in (args.get("secrets") or {}).items()}
        spec = package_inputs.GPU_VIRTUAL_MACHINE.build(inputs, tenant=_tenant(inputs, opts), secrets=secrets)
        super().__init__(name, spec, opts)


class Notebook(notebook.Notebook):
    """A tenant's Jupyter notebook (StatefulSet, Service, token), with GPUs when it asks for them (give it
    ``dependsOn`` its tenant and the GPU Operator)."""

    namespace: pulumi.Output[str]
    """The tenant namespace the notebook lives in."""
    service_name: pulumi.Output[str]
    """Name of the notebook's ``ClusterIP`` Service (port 8888)."""
    url: pulumi.Output[str]
    """Where the notebook is reached."""
    token: pulumi.Output[str]
    """The access token (secret)."""

    def __init__(self, name: str, args: types.NotebookInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.NOTEBOOK.model, args)
        super().__init__(name, package_inputs.NOTEBOOK.build(inputs, tenant=_tenant(inputs, opts)), opts)


class ModelEndpoint(model_endpoint.ModelEndpoint):
    """A tenant's model endpoint (a KServe InferenceService in raw-Deployment mode), with its route through the
    cluster's Gateway when exposed (give it ``dependsOn`` its tenant, KServe and the GPU Operator)."""

    namespace: pulumi.Output[str]
    """The tenant namespace the endpoint lives in."""
    url: pulumi.Output[str]
    """In-cluster URL of the predictor."""

    def __init__(self, name: str, args: types.ModelEndpointInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.MODEL_ENDPOINT.model, args)
        env_secrets = {key: pulumi.Output.secret(value) for key, value in (args.get("envSecrets") or {}).items()}
        spec = package_inputs.MODEL_ENDPOINT.build(
            inputs, tenant=_tenant(inputs, opts), credentials=args.get("credentials"), env_secrets=env_secrets
        )
        super().__init__(name, dataclasses.replace(spec, route=_route(inputs, spec.spec)), opts)


def _route(inputs: package_inputs.WorkloadInputs, spec: ModelEndpointSpec) -> EndpointRoute | None:
    """The Gateway listener of an exposed endpoint, as :func:`gpucell.components.gateway.exposed_endpoints` names it
    (admission refuses ``expose`` without the facts' ``gateway``)."""
    gateway, expose = inputs.facts.gateway, spec.expose
    if gateway is None or expose is None:
        return None
    host = endpoint_host(inputs.name, inputs.tenant, gateway.domain, expose.host)
    return EndpointRoute(inputs.tenant, inputs.name, host, gateway_name(gateway, inputs.tenant))


class RegionalCell(cell.RegionalCell):
    """A whole regional cell from its region config: k3s over SSH, Cilium, storage, KubeVirt, CDI, the GPU Operator,
    cert-manager, KServe (and what its config turns on), with its own Kubernetes provider."""

    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig of the cell (secret)."""
    api_server_url: pulumi.Output[str]
    """``https://<apiEndpoint>:<apiPort>``."""
    storage_class_name: pulumi.Output[str]
    """The cell's default StorageClass."""

    def __init__(self, name: str, args: types.RegionalCellInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        inputs = _validated(package_inputs.REGIONAL_CELL.model, args)
        bucket, password = args.get("backupCredentials"), args.get("backupRepositoryPassword")
        backups = (
            BackupCredentials(pulumi.Output.secret(bucket), pulumi.Output.secret(password))
            if bucket is not None and password is not None
            else None
        )
        spec = package_inputs.REGIONAL_CELL.build(
            inputs,
            ssh_private_key=pulumi.Output.secret(args["sshPrivateKey"]),
            etcd_s3_credentials=args.get("etcdS3Credentials"),
            remote_write_credentials=args.get("remoteWriteCredentials"),
            backup_credentials=backups,
            image_credentials={
                key: pulumi.Output.secret(value) for key, value in (args.get("imageCredentials") or {}).items()
            },
        )
        super().__init__(name, spec, opts)


COMPONENTS: tuple[type[pulumi.ComponentResource], ...] = (
    GpuOperator,
    KubeVirt,
    Cdi,
    DraDriver,
    CertManager,
    KServe,
    Storage,
    Keda,
    NetworkOperator,
    Tenant,
    GpuVirtualMachine,
    Notebook,
    ModelEndpoint,
    RegionalCell,
)
"""What the package exports, in the order of the schema's resources (decision 0019 says why these)."""


def version() -> str:
    """The package version: the installed distribution's (``0.0.0`` from a source tree)."""
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


SECRET_OUTPUTS: dict[str, tuple[str, ...]] = {"Notebook": ("token",), "RegionalCell": ("kubeconfig",)}
"""Component -> its outputs that are Pulumi secrets (the schema marks them ``secret``)."""


def _mark_secrets(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``secret: true`` on every secret input (a ``PassedThrough`` marked secret) and output
    (:data:`SECRET_OUTPUTS`): the analyzer has no way to say so, and without it an SDK neither wraps a plain string
    given for ``sshPrivateKey`` as a secret (the engine would store the component's inputs in plain text) nor lists
    the secret outputs in ``additionalSecretOutputs``."""
    for component in COMPONENTS:
        resource = schema["resources"][f"{PACKAGE}:index:{component.__name__}"]
        for passed in getattr(package_inputs, f"{component.__name__}Inputs").PASSED_THROUGH:
            if passed.secret:
                resource["inputProperties"][passed.key]["secret"] = True
        for output in SECRET_OUTPUTS.get(component.__name__, ()):
            resource["properties"][output]["secret"] = True
    return schema


class PackageProvider(ComponentProvider):
    """The SDK's component provider for :data:`COMPONENTS`, serving the analyzer's schema with its secrets marked
    (:func:`_mark_secrets`), and with a :class:`ConfigError` from a component returned as the engine's invalid-inputs
    error: one ``property path: reason`` per problem, no Python stack (the SDK reports any other exception of a
    component with its traceback)."""

    def __init__(
        self,
        components: list[type[pulumi.ComponentResource]],
        name: str,
        namespace: str | None = None,
        version: str = "0.0.0",
    ) -> None:
        super().__init__(components, name, namespace, version)
        assert self.schema is not None  # the SDK's ComponentProvider always generates one
        self.schema = json.dumps(_mark_secrets(json.loads(self.schema)))

    def construct(
        self, name: str, resource_type: str, inputs: pulumi.Inputs, options: pulumi.ResourceOptions | None = None
    ) -> Any:
        """Construct component ``name`` of ``resource_type`` from ``inputs`` (see the class doc for errors)."""
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            if not isinstance(error.inner, ConfigError):
                raise
            problems = [line.partition(": ") for line in error.inner.lines]
            details = [InputPropertyErrorDetails(property_path=path, reason=reason) for path, _, reason in problems]
            raise InputPropertiesError(f"{resource_type} {name}: invalid inputs", details) from None


def main() -> None:
    """Serve :data:`COMPONENTS` to the Pulumi engine as the package ``gpucell`` (``plugin/__main__.py``), as
    ``pulumi.provider.experimental.component_provider_host`` does, through :class:`PackageProvider`."""
    from pulumi.provider import main as serve  # noqa: PLC0415  (only when hosting)

    serve(PackageProvider(list(COMPONENTS), PACKAGE, version=version()), sys.argv[1:])
