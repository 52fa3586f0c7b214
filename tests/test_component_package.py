"""The component package: every exported component analyzable by the Pulumi SDK's analyzer, its schema by name and
type, plugin/PulumiPlugin.yaml publishing them, and components built the way the package's host builds them.

The schema is generated in-process with the SDK's own analyzer and schema writer
(``pulumi.provider.experimental``: what ``pulumi package add`` runs through plugin/__main__.py); components are
constructed through the SDK's ``ComponentProvider.construct`` under the mock engine, with inputs as the engine
sends them (camelCase keys, numbers as floats, enums as strings).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.errors import InputPropertiesError, InputPropertyError

from gpucell.cluster import CONTAINERD_CONFIG, CONTAINERD_SOCKET, Cluster, ContainerRuntime
from gpucell.components.network_operator import NetworkOperator, NetworkOperatorArgs
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.package import component_package
from gpucell.package import inputs as package_inputs
from gpucell.package.component_package import COMPONENTS, PACKAGE, PackageProvider
from gpucell.spec import AccessMode, NodePool
from gpucell.spec._base import SpecModel
from tests.conftest import REPO, cell
from tests.test_fabric import fabric_region
from tools.package_types import render

RELEASE = "kubernetes:helm.sh/v3:Release"
KUBECONFIG = "apiVersion: v1\nkind: Config\n"
CLUSTER = {"kubernetesVersion": "1.33"}
H100_POOL = {
    "role": "gpu",
    "gpuModel": "H100-SXM5-80GB",
    "gpusPerNode": 8.0,
    "gpuMode": "vm-passthrough",
    "hosts": [{"name": "gpu-1", "address": "10.30.0.21"}],
}
FACTS = {
    "network": {"nodeCidr": "10.30.0.0/24", "podCidr": "10.244.0.0/16", "serviceCidr": "10.96.0.0/12",
                "clusterDns": "10.96.0.10", "apiEndpoint": "10.30.0.10"},
    "nodePools": {"h100": H100_POOL},
}  # fmt: skip
ML = {
    "quota": {"cpuMillicores": 64000.0, "memoryGib": 512.0, "storageGib": 1024.0,
              "gpus": {"nvidia.com/GH100_H100_SXM5_80GB": 8.0}},
    "egress": "internet",
}  # fmt: skip
VM = {
    "gpuModel": "H100-SXM5-80GB",
    "gpus": 8.0,
    "memoryGib": 256.0,
    "cpu": {"cores": 32.0},
    "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 100.0},
    "noLogin": True,
}


@functools.cache
def schema() -> dict[str, Any]:
    """The package schema, as the plugin's host serves it (``GetSchema``): the SDK's analyzer and schema writer, run
    by the SDK's ``ComponentProvider`` that :class:`PackageProvider` extends."""
    served = PackageProvider(list(COMPONENTS), PACKAGE).schema
    assert served is not None
    loaded: dict[str, Any] = json.loads(served)
    return loaded


def kind(prop: dict[str, Any]) -> str:
    """A schema property's type in short: ``string``, ``ClusterInputs``, ``map<NodePool>``, ``list<string>``."""
    if "$ref" in prop:
        return prop["$ref"].rpartition(":")[2].rpartition("/")[2]
    if prop.get("type") == "object" and "additionalProperties" in prop:
        return f"map<{kind(prop['additionalProperties'])}>"
    if prop.get("type") == "array":
        return f"list<{kind(prop['items'])}>"
    return str(prop["type"])


def surface(token: str) -> tuple[dict[str, str], list[str], dict[str, str]]:
    """Inputs (name -> kind), required inputs and outputs (name -> kind) of a resource of the schema."""
    resource = schema()["resources"][token]
    inputs = {name: kind(prop) for name, prop in resource["inputProperties"].items()}
    outputs = {name: kind(prop) for name, prop in resource.get("properties", {}).items()}
    return inputs, sorted(resource.get("requiredInputs", [])), outputs


PLATFORM = {"cluster": "ClusterInputs", "version": "string"}
WORKLOAD = {
    "cluster": "ClusterInputs",
    "tenant": "string",
    "name": "string",
    "facts": "ClusterFacts",
    "tenantRemovalPolicy": "RemovalPolicy",
}
EXPECTED: dict[str, tuple[dict[str, str], list[str], dict[str, str]]] = {
    "GpuOperator": (
        {**PLATFORM, "spec": "GpuOperatorSpec", "nodePools": "map<NodePool>", "metrics": "boolean"},
        ["cluster"],
        {"namespace": "string"},
    ),
    "KubeVirt": (
        {
            **PLATFORM,
            "nodePools": "map<NodePool>",
            "vgpuDriverImage": "ImageSpec",
            "removalPolicy": "RemovalPolicy",
            "commonInstancetypes": "boolean",
            "vmStateStorageClass": "string",
            "vmPersistentState": "boolean",
        },
        ["cluster"],
        {"namespace": "string"},
    ),
    "Cdi": (
        {
            **PLATFORM,
            "storageClass": "string",
            "volumeMode": "VolumeMode",
            "accessModes": "list<string>",
            "spec": "CdiSpec",
            "nodePools": "map<NodePool>",
            "removalPolicy": "RemovalPolicy",
        },
        ["cluster", "storageClass"],
        {},
    ),
    "DraDriver": (
        {
            **PLATFORM,
            "spec": "DraDriverSpec",
            "nodePools": "map<NodePool>",
            "driverRoot": "string",
            "toolkit": "string",
        },
        ["cluster"],
        {"namespace": "string"},
    ),
    "CertManager": ({**PLATFORM, "spec": "ChartSpec", "gatewayApi": "boolean"}, ["cluster"], {"namespace": "string"}),
    "KServe": ({**PLATFORM, "spec": "KServeSpec"}, ["cluster"], {"namespace": "string"}),
    "Storage": (
        {**PLATFORM, "spec": "StorageSpec", "nodePools": "map<NodePool>", "removalPolicy": "RemovalPolicy"},
        ["cluster"],
        {"storageClassName": "string"},
    ),
    "Keda": ({**PLATFORM, "values": "map<Any>"}, ["cluster"], {"namespace": "string"}),
    "NetworkOperator": (
        {**PLATFORM, "nodePools": "map<NodePool>", "tenantVlans": "map<integer>", "values": "map<Any>"},
        ["cluster"],
        {"namespace": "string"},
    ),
    "Tenant": (
        {"cluster": "ClusterInputs", "name": "string", "spec": "TenantSpec", "facts": "ClusterFacts"},
        ["cluster", "facts", "name", "spec"],
        {"namespace": "string"},
    ),
    "GpuVirtualMachine": (
        {**WORKLOAD, "spec": "GpuVirtualMachineSpec", "secrets": "map<string>"},
        ["cluster", "facts", "name", "spec", "tenant"],
        {"namespace": "string", "vmName": "string"},
    ),
    "Notebook": (
        {**WORKLOAD, "spec": "NotebookSpec"},
        ["cluster", "facts", "name", "spec", "tenant"],
        {"namespace": "string", "serviceName": "string", "url": "string", "token": "string"},
    ),
    "ModelEndpoint": (
        {**WORKLOAD, "spec": "ModelEndpointSpec", "credentials": "string", "envSecrets": "map<string>"},
        ["cluster", "facts", "name", "spec", "tenant"],
        {"namespace": "string", "url": "string"},
    ),
    "RegionalCell": (
        {
            "cell": "CellSpec",
            "sshPrivateKey": "string",
            "etcdS3Credentials": "string",
            "remoteWriteCredentials": "string",
            "backupCredentials": "string",
            "backupRepositoryPassword": "string",
            "imageCredentials": "map<string>",
        },
        ["cell", "sshPrivateKey"],
        {"kubeconfig": "string", "apiServerUrl": "string", "storageClassName": "string"},
    ),
}


# -- the schema ----------------------------------------------------------------------------------------------------
def test_the_shipped_typed_dicts_are_what_the_spec_models_render() -> None:
    assert (REPO / "gpucell" / "package" / "_generated" / "types.py").read_text() == render()


def test_a_list_of_enums_is_a_list_of_strings_the_model_validates() -> None:
    """pulumi 3.272's ComponentProvider maps each item of a list (or map) of a ``$ref`` type as an object, so an
    enum's value would arrive as ``{}``: the package types such items as strings, and the spec model turns them into
    the enum (or refuses one it does not know, by its key path)."""

    class Modes(SpecModel):
        modes: list[AccessMode] = []
        by_disk: dict[str, AccessMode] = {}

    rendered = render((Modes,))
    assert "    modes: list[str]\n" in rendered
    assert "    byDisk: dict[str, str]\n" in rendered
    assert Modes.model_validate({"modes": ["ReadWriteMany"]}).modes == [AccessMode.RWX]
    with pytest.raises(ConfigError) as refused:
        Modes.model_validate({"modes": ["ReadWriteAll"]})
    assert str(refused.value) == (
        "modes[0]: 'ReadWriteAll' is not one of 'ReadWriteOnce', 'ReadWriteMany' or 'ReadWriteOncePod'"
    )


# -- the inputs, derived from the *Args -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _PoolsArgs:
    cluster: pulumi.Resource
    """A handle."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The pools."""
    replicas: int = 2
    """How many. Defaults to 2."""


@dataclass(frozen=True)
class _HandleArgs:
    gateway: pulumi.Resource | None = None
    """A resource."""


def test_a_field_added_to_an_args_is_an_input_with_its_type_default_and_docstring() -> None:
    package_inputs.NOT_DERIVED[_PoolsArgs] = {"cluster": "the handle"}
    try:
        derived = package_inputs.derive(_PoolsArgs, "Pools.", package_inputs.ComponentInputs)
    finally:
        del package_inputs.NOT_DERIVED[_PoolsArgs]
    assert derived.model.__name__ == "_PoolsInputs"
    assert derived.derived == ("node_pools", "replicas")
    assert '    replicas: int\n    """How many. Defaults to 2."""\n' in render((derived.model,))
    inputs = derived.model.model_validate({"nodePools": {"h100": {**H100_POOL, "gpusPerNode": 8}}})
    built = derived.build(inputs, cluster="handle")
    assert (built.cluster, built.node_pools["h100"].gpus_per_node, built.replicas) == ("handle", 8, 2)


def test_an_args_field_no_input_expresses_is_refused_unless_listed_with_its_reason() -> None:
    with pytest.raises(TypeError) as refused:
        package_inputs.derive(_HandleArgs, "Handle.", package_inputs.ComponentInputs)
    assert str(refused.value) == (
        "_HandleArgs.gateway: <class 'pulumi.resource.Resource'> is no plain value; derive it, or say in "
        "NOT_DERIVED how the package gives it"
    )
    package_inputs.NOT_DERIVED[_HandleArgs] = {"gateway": "a resource: dependsOn", "route": "gone"}
    try:
        with pytest.raises(TypeError) as stale:
            package_inputs.derive(_HandleArgs, "Handle.", package_inputs.ComponentInputs)
    finally:
        del package_inputs.NOT_DERIVED[_HandleArgs]
    assert str(stale.value) == "NOT_DERIVED lists route, which _HandleArgs does not have"


@pytest.mark.parametrize("derivation", package_inputs.DERIVATIONS, ids=lambda d: d.args.__name__)
def test_every_args_field_is_an_input_of_the_same_name_or_listed_with_its_reason(
    derivation: package_inputs.Derivation[Any, Any],
) -> None:
    names = [item.name for item in fields(derivation.args)]
    listed = package_inputs.NOT_DERIVED.get(derivation.args, {})
    assert [name for name in names if name not in listed] == list(derivation.derived)
    assert set(derivation.derived) <= set(derivation.model.model_fields)
    assert all(reason for reason in listed.values())
    # the inputs that are not *Args fields stand for a listed handle: the cluster, CDI's volumes, the tenant
    others = set(derivation.model.model_fields) - set(derivation.derived)
    assert others <= {"cluster", "volume_mode", "access_modes", "tenant", "facts", "tenant_removal_policy"}


def test_every_exported_component_is_in_the_schema_as_a_component() -> None:
    assert schema()["name"] == "gpucell"
    assert sorted(schema()["resources"]) == sorted(f"gpucell:index:{name}" for name in EXPECTED)
    assert all(resource["isComponent"] for resource in schema()["resources"].values())
    assert schema()["dependencies"] == []  # no resource references: the Kubernetes provider is a resource option


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_components_inputs_and_outputs_by_name_and_type(name: str) -> None:
    assert surface(f"gpucell:index:{name}") == EXPECTED[name]


def test_every_input_and_output_is_described() -> None:
    """The analyzer looks a property's docstring up in the class that declares the args: inherited keys lost theirs
    (Cdi, ModelEndpoint and RegionalCell had 14 inputs without a description)."""
    undescribed = [
        f"{token}.{key}"
        for token, resource in schema()["resources"].items()
        for section in ("inputProperties", "properties")
        for key, prop in resource.get(section, {}).items()
        if not prop.get("description")
    ]
    undescribed += [
        f"{token}.{key}"
        for token, spec_type in schema()["types"].items()
        for key, prop in spec_type.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert undescribed == []


def test_secrets_are_marked_secret_in_the_schema() -> None:
    """Without ``secret``, an SDK sends a plain ``sshPrivateKey`` as is and the engine keeps the component's inputs in
    its state in plain text; the analyzer cannot say so, the package's provider does."""
    secret = {
        (token.rpartition(":")[2], section, key)
        for token, resource in schema()["resources"].items()
        for section in ("inputProperties", "properties")
        for key, prop in resource.get(section, {}).items()
        if prop.get("secret")
    }
    assert secret == {
        ("RegionalCell", "inputProperties", "sshPrivateKey"),
        ("RegionalCell", "inputProperties", "etcdS3Credentials"),
        ("RegionalCell", "inputProperties", "remoteWriteCredentials"),
        ("RegionalCell", "inputProperties", "backupCredentials"),
        ("RegionalCell", "inputProperties", "backupRepositoryPassword"),
        ("RegionalCell", "inputProperties", "imageCredentials"),
        ("GpuVirtualMachine", "inputProperties", "secrets"),
        ("RegionalCell", "properties", "kubeconfig"),
        ("ModelEndpoint", "inputProperties", "credentials"),
        ("ModelEndpoint", "inputProperties", "envSecrets"),
        ("Notebook", "properties", "token"),
    }


def test_spec_types_follow_the_spec_models_names_enums_and_required_keys() -> None:
    types = schema()["types"]
    pool = types["gpucell:index:NodePool"]
    assert {k: kind(v) for k, v in pool["properties"].items() if k in ("role", "gpuMode", "gpusPerNode", "hosts")} == {
        "role": "NodeRole",
        "hosts": "list<Host>",
        "gpusPerNode": "integer",
        "gpuMode": "GpuMode",
    }
    assert sorted(pool["required"]) == ["hosts", "role"]
    assert [v["value"] for v in types["gpucell:index:GpuMode"]["enum"]] == [
        "container",
        "vm-passthrough",
        "vm-vgpu",
        "dra",
    ]
    assert types["gpucell:index:TenantQuota"]["properties"]["gpus"]["additionalProperties"]["type"] == "integer"
    assert types["gpucell:index:Network"]["properties"]["nodeCidr"]["type"] == "string"
    assert types["gpucell:index:ClusterInputs"]["required"] == ["kubernetesVersion"]


def test_the_plugin_manifest_runs_the_package_host_in_python() -> None:
    manifest = yaml.safe_load((REPO / "plugin" / "PulumiPlugin.yaml").read_text())
    assert manifest["runtime"]["name"] == "python"
    main = ast.parse((REPO / "plugin" / "__main__.py").read_text())
    imported = [(n.module, [a.name for a in n.names]) for n in ast.walk(main) if isinstance(n, ast.ImportFrom)]
    assert imported == [("gpucell.package.component_package", ["main"])]
    assert (REPO / "plugin" / "requirements.txt").read_text().splitlines()[-1] == ".."
    # `pulumi package add ./plugin` creates the plugin's virtualenv in the checkout (PulumiPlugin.yaml's `virtualenv`)
    ignored = subprocess.run(
        [
            "git",
            "check-ignore",
            "--no-index",
            "-q",
            f"plugin/{manifest['runtime']['options']['virtualenv']}/bin/python",
        ],
        cwd=REPO,
        check=False,
    )
    assert ignored.returncode == 0


def test_the_typescript_example_names_the_schemas_types_and_inputs() -> None:
    """docs/component-package.md's program, read against the schema: every SDK type it names is a schema type, every
    component it builds takes the keys it gives, and every object it builds apart is typed (TypeScript widens an
    untyped ``role: "gpu"`` to ``string``, which is not the enum ``NodeRole``: the example did not type-check)."""
    doc = (REPO / "docs" / "component-package.md").read_text()
    (program,) = re.findall(r"```ts\n(.*?)```", doc, re.S)
    named = set(re.findall(r"gpucell\.types\.input\.(\w+)Args", program))
    assert named == {"ClusterInputs", "NodePool", "TenantSpec", "ClusterFacts"}
    assert {f"gpucell:index:{name}" for name in named} <= set(schema()["types"])
    untyped = re.findall(r"^const (\w+) = \{", program, re.M)
    assert untyped == ["on"]  # the resource options, not a schema type
    built = re.findall(r"new gpucell\.(\w+)\(\"[\w-]+\", \{(.*?)\}, (?:on\)|\{ \.\.\.on)", program, re.S)
    assert [name for name, _ in built] == ["GpuOperator", "KubeVirt", "Cdi", "Tenant", "GpuVirtualMachine"]
    for name, args in built:
        keys = set(re.findall(r"(?:^|[,{]\s*)(\w+)(?=[,:\s]|$)", args.split("spec:")[0]))
        inputs = schema()["resources"][f"gpucell:index:{name}"]["inputProperties"]
        assert keys <= set(inputs), (name, keys - set(inputs))


# -- components built as the package's host builds them ------------------------------------------------------------
def construct(*resources: tuple[str, str, dict[str, Any]]) -> PlanResult:
    """Construct ``(type, name, inputs)`` through the package's provider, as its host does, each on one kubeconfig
    provider and after a resource ``<name>-after`` (what a program's ``dependsOn`` names)."""

    def program() -> None:
        provider = PackageProvider(list(COMPONENTS), PACKAGE)
        k8s = pulumi.ProviderResource("kubernetes", "lab-k8s", {"kubeconfig": KUBECONFIG})
        for token, name, inputs in resources:
            after = pulumi.CustomResource("test:index:Thing", f"{name}-after")
            options = pulumi.ResourceOptions(providers={"kubernetes": k8s}, depends_on=[after])
            provider.construct(name, f"gpucell:index:{token}", inputs, options)

    return run_program(program)


def test_the_gpu_operator_from_engine_inputs_renders_what_the_python_component_does() -> None:
    containerd = {"config": "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl",
                  "socket": "/run/k3s/containerd/containerd.sock"}  # fmt: skip
    inputs = {"cluster": {**CLUSTER, "containerd": containerd}, "nodePools": {"h100": H100_POOL}}
    release = construct(("GpuOperator", "lab-gpu-operator", inputs)).named("lab-gpu-operator-gpu-operator")
    values = release.inputs["values"]
    assert values["toolkit"]["env"][:2] == [
        {"name": "CONTAINERD_CONFIG", "value": containerd["config"]},
        {"name": "CONTAINERD_SOCKET", "value": containerd["socket"]},
    ]
    assert values["vfioManager"]["enabled"] is True
    assert release.provider == "lab-k8s"
    assert release.inputs["version"] == "v26.7.0"


def test_the_network_operator_from_engine_inputs_renders_what_the_python_component_does() -> None:
    region = fabric_region()
    pool = {**region["nodePools"]["h100-vm"], "gpusPerNode": 8.0}
    inputs = {"cluster": CLUSTER, "nodePools": {"h100-vm": pool}, "tenantVlans": {"ml": 210.0}}
    plan = construct(("NetworkOperator", "lab-network-operator", inputs))
    release = plan.named("lab-network-operator-network-operator")
    assert (release.inputs["version"], release.inputs["namespace"]) == ("26.4.1", "nvidia-network-operator")
    assert release.provider == "lab-k8s"
    policies = [r.inputs for r in plan.of_type("kubernetes:sriovnetwork.openshift.io/v1:SriovNetworkNodePolicy")]
    assert [p["spec"]["resourceName"] for p in policies] == [f"h100vm_rail{i}" for i in range(8)]
    assert policies[0]["spec"]["nicSelector"]["rootDevices"] == ["0000:17:00.0"]
    networks = [r.inputs for r in plan.of_type("kubernetes:sriovnetwork.openshift.io/v1:SriovNetwork")]
    assert {(n["spec"]["networkNamespace"], n["spec"]["vlan"]) for n in networks} == {("tenant-ml", 210)}
    assert len(networks) == 8
    python = run_program(
        lambda: NetworkOperator(
            "lab-network-operator",
            NetworkOperatorArgs(
                Cluster(
                    pulumi.ProviderResource("kubernetes", "lab-k8s", {}),
                    "1.33",
                    ContainerRuntime(CONTAINERD_CONFIG, CONTAINERD_SOCKET),
                ),
                cell(region).node_pools,
                {"ml": 210},
            ),
        )
    )
    assert sorted(r.name for r in python.resources if r.type.startswith("kubernetes:")) == sorted(
        r.name for r in plan.resources if r.type.startswith("kubernetes:") and r.name != "lab-k8s"
    )


def test_a_tenant_and_its_vm_from_engine_inputs() -> None:
    facts = {**FACTS, "tenants": {"ml": {**ML, "virtualMachines": {"train": VM}}}}
    plan = construct(
        ("KubeVirt", "lab-kubevirt", {"cluster": CLUSTER, "nodePools": {"h100": H100_POOL}}),
        ("Tenant", "lab-ml", {"cluster": CLUSTER, "name": "ml", "spec": ML, "facts": FACTS}),
        ("GpuVirtualMachine", "lab-ml-train", {**CLUSTER_OF_WORKLOAD, "name": "train", "spec": VM, "facts": facts}),
    )
    namespace = plan.named("lab-ml-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] == "v1.33"
    assert namespace.parent == plan.named("lab-ml").urn
    vm = plan.named("lab-ml-train-vm")
    gpus = vm.inputs["spec"]["template"]["spec"]["domain"]["devices"]["gpus"]
    assert [g["deviceName"] for g in gpus] == ["nvidia.com/GH100_H100_SXM5_80GB"] * 8
    assert plan.named("lab-ml-train-after").urn in vm.dependencies  # dependsOn reaches every child
    assert vm.options["protect"] is True
    assert plan.named("lab-ml-quota").inputs["spec"]["hard"]["requests.nvidia.com/GH100_H100_SXM5_80GB"] == "8"


def test_a_vms_user_data_from_engine_inputs_is_a_secret_of_its_cloud_init() -> None:
    """``secrets`` was missing from the package: a VM naming ``cloudInit.userDataConfigKey`` failed with a bare
    ValueError traceback in the plugin's host."""
    vm = {**VM, "cloudInit": {"userDataConfigKey": "trainUserData"}}
    facts = {**FACTS, "tenants": {"ml": {**ML, "virtualMachines": {"train": vm}}}}
    user_data = "#cloud-config\npackages: [htop]\n"
    inputs = {
        **CLUSTER_OF_WORKLOAD,
        "name": "train",
        "spec": vm,
        "facts": facts,
        "secrets": {"trainUserData": user_data},
    }
    plan = construct(("GpuVirtualMachine", "lab-ml-train", inputs))
    cloud_init = plan.named("lab-ml-train-cloud-init")
    assert "stringData" in cloud_init.secret_paths, cloud_init.secret_paths
    assert "packages:\n- htop\n" in cloud_init.raw_inputs["stringData"]["userdata"]


def test_cdi_from_engine_inputs_takes_the_pvc_modes_as_enums() -> None:
    inputs = {"cluster": CLUSTER, "storageClass": "ceph-block", "volumeMode": "Block", "accessModes": ["ReadWriteMany"]}
    profile = construct(("Cdi", "lab-cdi", inputs)).named("lab-cdi-storage-profile")
    assert profile.inputs["spec"] == {
        "claimPropertySets": [
            {"accessModes": ["ReadWriteMany"], "volumeMode": "Block"},
            {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},  # KubeVirt's VM state PVCs (issue 22)
        ]
    }
    assert [v["value"] for v in schema()["types"]["gpucell:index:VolumeMode"]["enum"]] == ["Filesystem", "Block"]
    with pytest.raises(InputPropertiesError) as info:
        construct(("Cdi", "x", {**inputs, "accessModes": ["RWX"]}))
    reason = "'RWX' is not one of ReadWriteOnce, ReadWriteMany, ReadWriteOncePod"
    assert info.value.errors == [{"property_path": "accessModes[0]", "reason": reason}]


CLUSTER_OF_WORKLOAD = {"cluster": CLUSTER, "tenant": "ml"}


def test_a_mistake_is_one_config_error_line_per_problem_with_its_key_path() -> None:
    bad_pool = {**H100_POOL, "migConfig": "all-1g.10gb"}
    with pytest.raises(InputPropertiesError) as info:
        construct(("GpuOperator", "x", {"cluster": {"kubernetesVersion": "v1.33"}, "nodePools": {"h100": bad_pool}}))
    assert info.value.message == "gpucell:index:GpuOperator x: invalid inputs"
    assert info.value.errors == [
        {"property_path": "cluster.kubernetesVersion", "reason": "'v1.33' is not MAJOR.MINOR, e.g. '1.34'"},
        {
            "property_path": "nodePools.h100.migConfig",
            "reason": "'all-1g.10gb' needs a container-mode pool; this pool is vm-passthrough",
        },
    ]


def test_an_enum_value_that_is_not_one_is_refused_by_the_sdk_with_its_path() -> None:
    with pytest.raises(InputPropertyError) as info:
        construct(("GpuOperator", "x", {"cluster": CLUSTER, "nodePools": {"h100": {**H100_POOL, "gpuMode": "gpu"}}}))
    assert (info.value.property_path, info.value.reason) == (
        "nodePools.h100.gpuMode",
        "Invalid value gpu of type <class 'str'> for enum 'GpuMode'",
    )


def test_a_vm_that_fits_nowhere_is_refused_with_its_tenants_path() -> None:
    facts = {**FACTS, "tenants": {"ml": ML}}
    with pytest.raises(InputPropertiesError) as info:
        construct(("GpuVirtualMachine", "x", {**CLUSTER_OF_WORKLOAD, "name": "big", "spec": {**VM, "gpus": 16.0},
                                              "facts": facts}))  # fmt: skip
    assert info.value.errors == [
        {
            "property_path": "tenants.ml.virtualMachines.big.gpus",
            "reason": "16 H100-SXM5-80GB GPUs do not fit one node: pool h100 has 8 per node",
        }
    ]


def test_a_component_without_a_kubernetes_provider_is_refused() -> None:
    def program() -> None:
        component_package.Keda("lab-keda", {"cluster": {"kubernetesVersion": "1.33"}})

    with pytest.raises(ConfigError) as info:
        run_program(program)
    assert info.value.lines[0].startswith("providers: the resource options name no kubernetes provider;")
