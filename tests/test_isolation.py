"""Issue 33: notebooks and model endpoints behind a VM boundary (docs/decisions/0040).

The setting and its one-line refusals, the VM an isolated workload becomes (placement, quota), what it renders (the
same Service, its secrets on a secret disk and never in user data, the guest's unit), the run-time fence of an
isolated-only tenant, and prod's isolated notebook and endpoint checked against the upstream schemas.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.admission.isolation import guest_vm
from gpucell.admission.tenants import ClusterFacts, placements
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.day2.disruption import compare, fingerprint
from gpucell.engine.mock_engine import SECRET, PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.tenancy.tenant import Tenant, TenantArgs, resource_quota_manifest
from gpucell.tenancy.tenant_admission import CDI_CONTROLLER, VIRT_CONTROLLER, admission_manifests
from gpucell.workloads.isolated import GUEST_UNIT, SECRET_VOLUME_LABEL, qualified_image
from gpucell.workloads.isolated_endpoint import guest_env_file
from gpucell.workloads.model_endpoint import ModelEndpoint, ModelEndpointArgs
from gpucell.workloads.notebook import Notebook, NotebookArgs, isolated_manifest
from tests.admission_policies import TENANT_MEMBER, controller, refusals
from tests.conftest import UPSTREAM, cell, minimal_cell_config
from tests.conftest import workload as component
from tests.conftest import workload_children as child

VM = "kubernetes:kubevirt.io/v1:VirtualMachine"
SERVICE = "kubernetes:core/v1:Service"
SECRET_TYPE = "kubernetes:core/v1:Secret"
PASSTHROUGH = "nvidia.com/AD102GL_L40S"
TOKEN = "NOTEBOOK-TOKEN-SENTINEL-iso1"
HF_TOKEN = "hf_SENTINEL_iso_token"
API_KEY = "API-KEY-SENTINEL-iso"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
GUEST = "guests/gpu-guest"
ISOLATED = {"default": "vm", "guestImage": GUEST}


def config(isolation: dict[str, Any] | None = None, **workloads: dict[str, Any]) -> dict[str, Any]:
    """The minimal region plus an L40S ``vm-passthrough`` pool and a guest image catalog, and tenant ``acme``
    (isolated-only unless ``isolation`` says otherwise) with ``workloads`` (``notebooks``, ``modelEndpoints``)."""
    region = minimal_cell_config()
    region["nodePools"]["l40s-vm"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 2,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "lab-gpu-2", "address": "10.20.0.22"}],
    }
    region["imageCatalogs"] = {
        "guests": {
            "images": {"gpu-guest": {"source": {"registry": "docker://registry.lab/guest:580-1"}, "sizeGib": 30}}
        }
    }
    quota = {
        "cpuMillicores": 64000,
        "memoryGib": 256,
        "storageGib": 1000,
        "gpus": {PASSTHROUGH: 2, "nvidia.com/gpu": 2},
    }
    tenant: dict[str, Any] = {"quota": quota, "egress": "internet"}
    tenant["isolation"] = ISOLATED if isolation is None else isolation
    region["tenants"] = {"acme": {**tenant, **workloads}}
    return region


NOTEBOOK = {"gpu": {"model": "L40S"}, "cpuMillicores": 3500, "memoryGib": 16, "homeGib": 100}
ENDPOINT = {
    "modelFormat": "huggingface",
    "storageUri": "hf://Qwen/Qwen2.5-7B-Instruct",
    "gpu": {"model": "L40S"},
    "cpuMillicores": 4000,
    "memoryGib": 32,
    "credentialsConfigKey": "hfToken",
    "args": ["--max_model_len=8192"],
    "env": [{"name": "API_KEY", "secretConfigKey": "apiKey"}, {"name": "LOG_LEVEL", "value": "info"}],
}


def region() -> CellSpec:
    return cell(config(notebooks={"nb": NOTEBOOK}, modelEndpoints={"llm": ENDPOINT}))


def refused(region_config: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as exc:
        cell(region_config)
    return str(exc.value)


# -- the setting: one line naming the key -----------------------------------------------------------------------
def test_an_isolated_only_tenant_refuses_a_container_workload() -> None:
    assert refused(config(notebooks={"nb": {**NOTEBOOK, "isolation": "container"}})) == (
        "tenants.acme.notebooks.nb.isolation: 'container' is refused: the tenant's isolation.default is vm (it runs "
        "isolated workloads only); drop isolation here, or change the tenant's isolation.default"
    )


def test_an_isolated_workload_needs_the_guest_image() -> None:
    assert refused(config({}, notebooks={"nb": {**NOTEBOOK, "isolation": "vm"}})) == (
        "tenants.acme.isolation.guestImage: is required: notebooks.nb runs behind a VM boundary, whose guest boots "
        "this image; name a catalog image carrying podman and the NVIDIA driver (<catalog>/<image>)"
    )


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"gpu": {"migProfile": "1g.18gb"}},
            "tenants.acme.modelEndpoints.llm.gpu.migProfile: '1g.18gb': a MIG slice is a container's device, a VM "
            "gets whole GPUs (passthrough or DRA VFIO); drop migProfile for a whole GPU, or set isolation: container",
        ),
        (
            {"maxReplicas": 4},
            "tenants.acme.modelEndpoints.llm.maxReplicas: minReplicas 1, maxReplicas 4: an isolated endpoint is one "
            "VM behind the endpoint's Service, which no autoscaler scales (KServe scales pods, and Kata pods with GPUs "
            "need the GPU Operator's cluster-wide Kata mode); set minReplicas: 1 and maxReplicas: 1, or isolation: "
            "container",
        ),
        (
            {"storageUri": "s3://models/qwen", "credentialsConfigKey": None},
            "tenants.acme.modelEndpoints.llm.storageUri: s3:// storage: an isolated endpoint's guest downloads its "
            "model from the Hugging Face Hub itself (KServe's storage initializer runs in no guest); use an hf:// URI, "
            "or isolation: container",
        ),
        (
            {"modelFormat": "sklearn"},
            "tenants.acme.modelEndpoints.llm.modelFormat: 'sklearn': an isolated endpoint runs "
            "kserve-huggingfaceserver (modelFormat huggingface) in its guest; use that, or isolation: container",
        ),
    ],
    ids=["mig", "autoscaled", "s3", "runtime"],
)
def test_what_an_isolated_endpoint_refuses(change: dict[str, Any], line: str) -> None:
    endpoint = {k: v for k, v in {**ENDPOINT, **change}.items() if v is not None}
    assert refused(config(modelEndpoints={"llm": endpoint})) == line


def test_the_guest_pulls_through_the_tenants_egress() -> None:
    closed = config(notebooks={"nb": NOTEBOOK})
    closed["tenants"]["acme"]["egress"] = "none"
    assert refused(closed) == (
        "tenants.acme.notebooks.nb.isolation: the guest of an isolated workload pulls "
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24 from the tenant's namespace, but its egress is 'none'; "
        "use egress internet, or custom with those hosts in egressFqdns"
    )
    custom = config(modelEndpoints={"llm": ENDPOINT})
    custom["tenants"]["acme"].update(egress="custom", egressFqdns=["**.huggingface.co", "huggingface.co", "**.hf.co"])
    assert refused(custom) == (
        "tenants.acme.modelEndpoints.llm.isolation: the guest of an isolated workload pulls kserve/huggingfaceserver "
        "from registry-1.docker.io, which the tenant's custom egress does not allow; add it (or a wildcard such as "
        "'**.docker.io') to tenants.acme.egressFqdns"
    )


def test_the_guest_image_must_be_a_catalog_image() -> None:
    assert refused(config({"default": "vm", "guestImage": "guests/nope"}, notebooks={"nb": NOTEBOOK})) == (
        "tenants.acme.isolation.guestImage: 'guests/nope': catalog guests has no image nope; its images: gpu-guest"
    )


def test_a_container_tenant_keeps_its_pods() -> None:
    spec = cell(config({}, notebooks={"nb": {"cpuMillicores": 500, "memoryGib": 1}}))
    assert spec.tenants["acme"].isolation.default.value == "container"
    (path, placement, units), *_ = placements(ClusterFacts.from_cell(spec), spec.tenants["acme"])
    assert (path, placement.resource, units) == (("notebooks", "nb"), None, 0)


# -- admitted, placed and counted as a VM --------------------------------------------------------------------------
def test_an_isolated_workload_is_placed_as_a_passthrough_vm_and_counted_in_the_quota() -> None:
    spec = region()
    facts = ClusterFacts.from_cell(spec)
    placed = {path: (p.pools, p.resource, units) for path, p, units in placements(facts, spec.tenants["acme"])}
    assert placed == {
        ("notebooks", "nb"): (("l40s-vm",), PASSTHROUGH, 1),
        ("modelEndpoints", "llm"): (("l40s-vm",), PASSTHROUGH, 1),
    }
    guest = guest_vm(spec.tenants["acme"].notebooks["nb"], spec.tenants["acme"].isolation)
    assert (guest.cpu.vcpus, guest.memory_gib, [d.size_gib for d in guest.disks]) == (4, 16, [100, 100])
    over = config(notebooks={"nb": NOTEBOOK}, modelEndpoints={"llm": ENDPOINT})
    over["tenants"]["acme"]["quota"]["gpus"] = {PASSTHROUGH: 1}
    assert refused(over) == (
        f"tenants.acme.modelEndpoints.llm: needs 1 {PASSTHROUGH} (2 with the tenant's other workloads), tenant "
        "quota.gpus allows 1"
    )
    hard = resource_quota_manifest("acme", spec.tenants["acme"], facts)["spec"]["hard"]
    assert hard[f"requests.{PASSTHROUGH}"] == "2"


def test_an_isolated_workload_on_a_dra_pool_gets_vfio_devices_through_a_claim() -> None:
    region_config = config(notebooks={"nb": {**NOTEBOOK, "gpu": {"model": "L4", "allocation": "dra"}}})
    region_config["nodePools"]["l4-dra"] = {
        "role": "gpu",
        "gpuModel": "L4",
        "gpusPerNode": 4,
        "gpuMode": "dra",
        "hosts": [{"name": "lab-l4-1", "address": "10.20.0.41"}],
    }
    region_config["tenants"]["acme"]["quota"]["deviceClasses"] = {"vfio.gpu.nvidia.com": 1}
    spec = cell(region_config)
    facts = ClusterFacts.from_cell(spec)
    ((path, placement, units),) = placements(facts, spec.tenants["acme"])
    assert (path, placement.pools, placement.device_class, units) == (
        ("notebooks", "nb"),
        ("l4-dra",),
        "vfio.gpu.nvidia.com",
        1,
    )
    guest = guest_vm(spec.tenants["acme"].notebooks["nb"], spec.tenants["acme"].isolation)
    vm = isolated_manifest("acme", "nb", guest, facts, placement)
    template = vm["spec"]["template"]["spec"]
    assert template["domain"]["devices"]["gpus"] == [{"name": "gpu0", "claimName": "gpus", "requestName": "gpu0"}]
    assert template["resourceClaims"][0]["name"] == "gpus"
    assert template["resourceClaims"][0]["resourceClaimTemplateName"].startswith("nb-gpus-")


# -- rendered: a VM behind the same Service, secrets on a disk -----------------------------------------------------
def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    if args.typ == "random:index/randomPassword:RandomPassword" and args.name == "lab-acme-nb-token":
        return {"result": TOKEN}
    return {}


def deploy() -> PlanResult:
    def program() -> None:
        spec = region()
        lab = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", spec.tenants["acme"], lab))
        under = pulumi.ResourceOptions(parent=tenant)
        book = Notebook("lab-acme-nb", NotebookArgs("nb", spec.tenants["acme"].notebooks["nb"], tenant), opts=under)
        declared = spec.tenants["acme"].model_endpoints["llm"]
        served = ModelEndpoint(
            "lab-acme-llm",
            ModelEndpointArgs(
                "llm",
                declared,
                tenant,
                pulumi.Output.secret(HF_TOKEN),
                env_secrets={"apiKey": pulumi.Output.secret(API_KEY)},
            ),
            opts=under,
        )
        pulumi.export("nb-url", book.url)
        pulumi.export("nb-token", book.token)
        pulumi.export("llm-url", served.url)

    return run_program(program, computed=computed)


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


def test_children_are_a_vm_its_secrets_and_the_same_service(plan: PlanResult) -> None:
    assert sorted(r.name for r in plan.children(component(plan, "nb"))) == [
        "lab-acme-nb-cloud-init",
        "lab-acme-nb-service",
        "lab-acme-nb-token",
        "lab-acme-nb-token-secret",
        "lab-acme-nb-vm",
    ]
    assert sorted(r.name for r in plan.children(component(plan, "llm"))) == [
        "lab-acme-llm-cloud-init",
        "lab-acme-llm-guest",
        "lab-acme-llm-predictor",
        "lab-acme-llm-vm",
    ]
    assert plan.outputs["nb-url"] == "http://nb.tenant-acme.svc:8888/"
    assert plan.outputs["nb-token"] == SECRET
    assert plan.outputs["llm-url"] == "http://llm-predictor.tenant-acme.svc"


def test_the_services_select_the_launcher_pods_by_labels_the_vm_template_carries(plan: PlanResult) -> None:
    for name, port, target in (("nb", 8888, 8888), ("llm", 80, 8080)):
        (service,) = child(plan, name, SERVICE)
        (vm,) = child(plan, name, VM)
        labels = vm.inputs["spec"]["template"]["metadata"]["labels"]
        selector = service.inputs["spec"]["selector"]
        assert selector.items() <= labels.items(), name
        assert service.inputs["spec"]["ports"][0] == {
            "name": "http",
            "protocol": "TCP",
            "port": port,
            "targetPort": target,
        }
        # the DataVolumes keep the VM's own labels: CDI's importer pods never match the Service
        for template in vm.inputs["spec"]["dataVolumeTemplates"]:
            assert not selector.items() <= template["metadata"]["labels"].items()
    (service,) = child(plan, "nb", SERVICE)
    assert service.inputs["metadata"]["name"] == "nb"
    (service,) = child(plan, "llm", SERVICE)
    assert service.inputs["metadata"]["name"] == "llm-predictor"


def test_the_vm_has_its_gpu_the_guest_image_and_the_secret_disk(plan: PlanResult) -> None:
    (vm,) = child(plan, "nb", VM)
    spec = vm.inputs["spec"]
    template = spec["template"]["spec"]
    assert template["domain"]["devices"]["gpus"] == [{"name": "gpu0", "deviceName": PASSTHROUGH}]
    assert template["domain"]["resources"] == {
        "requests": {"cpu": "4", "memory": "16Gi"},
        "limits": {"cpu": "4", "memory": "16Gi"},
    }
    assert spec["dataVolumeTemplates"][0]["spec"]["sourceRef"] == {
        "kind": "DataSource",
        "namespace": "guests",
        "name": "gpu-guest-local-path",
    }
    assert {"name": "secrets", "secret": {"secretName": "nb-token", "volumeLabel": SECRET_VOLUME_LABEL}} in template[
        "volumes"
    ]
    assert {"name": "data0", "disk": {"bus": "virtio"}, "serial": "gpucell-home"} in template["domain"]["devices"][
        "disks"
    ]
    assert vm.options.get("protect") is True  # the notebook's home: the tenant's removalPolicy, protect
    (vm,) = child(plan, "llm", VM)
    assert "protect" not in vm.options  # a cache only
    volumes = vm.inputs["spec"]["template"]["spec"]["volumes"]
    assert {"name": "secrets", "secret": {"secretName": "llm-guest", "volumeLabel": SECRET_VOLUME_LABEL}} in volumes


def user_data(plan: PlanResult, name: str) -> dict[str, Any]:
    secret = next(r for r in child(plan, name, SECRET_TYPE) if r.name.endswith("-cloud-init"))
    assert "stringData" in secret.secret_paths
    return yaml.safe_load(secret.raw_inputs["stringData"]["userdata"])


def test_secrets_reach_the_guest_on_the_secret_disk_never_in_user_data(plan: PlanResult) -> None:
    for registration in plan.resources:
        text = json.dumps(registration.inputs) + json.dumps(registration.raw_inputs, default=str)
        if registration.name not in ("lab-acme-nb-token", "lab-acme-nb-token-secret", "lab-acme-llm-guest"):
            for sentinel in (TOKEN, HF_TOKEN, API_KEY):
                assert sentinel not in text, (registration.name, sentinel)
    (guest,) = (r for r in child(plan, "llm", SECRET_TYPE) if r.name.endswith("-guest"))
    assert guest.inputs["stringData"] == SECRET
    assert guest.raw_inputs["stringData"] == {"env": f'HF_TOKEN="{HF_TOKEN}"\nAPI_KEY="{API_KEY}"\n'}


def test_the_guest_runs_the_image_with_its_gpu_and_reads_the_token_file(plan: PlanResult) -> None:
    data = user_data(plan, "nb")
    (unit,) = (f for f in data["write_files"] if f["path"] == GUEST_UNIT)
    lines = unit["content"].splitlines()
    assert "Image=quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24" in lines
    assert "AddDevice=nvidia.com/gpu=all" in lines
    assert "PublishPort=8888:8888" in lines
    assert "Volume=/run/gpucell/secrets:/etc/gpucell/jupyter:ro" in lines
    assert 'Environment="JUPYTER_TOKEN_FILE=/etc/gpucell/jupyter/token"' in lines
    assert ["LABEL=gpucellsecret", "/run/gpucell/secrets", "iso9660", "ro,nofail"] in data["mounts"]
    assert data["runcmd"][-1] == ["systemctl", "start", "gpucell-workload.service"]
    data = user_data(plan, "llm")
    (unit,) = (f for f in data["write_files"] if f["path"] == GUEST_UNIT)
    lines = unit["content"].splitlines()
    assert "Image=docker.io/kserve/huggingfaceserver:v0.20.0" in lines
    assert "EnvironmentFile=/run/gpucell/secrets/env" in lines
    assert 'Environment="LOG_LEVEL=info"' in lines
    assert (
        'Exec="--model_name=llm" "--model_id=Qwen/Qwen2.5-7B-Instruct" "--http_port=8080" "--max_model_len=8192"'
        in lines
    )


def test_the_guests_user_data_is_valid_cloud_config(plan: PlanResult) -> None:
    """cloud-init 26.2's own schema (``schema-cloud-config-v1.json``, Draft 4, unknown top-level keys refused)."""
    schema = json.loads((UPSTREAM / "cloud-init" / "schema-cloud-config-v1.json").read_text())
    for name in ("nb", "llm"):
        errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(user_data(plan, name))]
        assert errors == [], name
    assert user_data(plan, "nb")["fs_setup"] == [
        {"label": "home", "filesystem": "ext4", "device": "/dev/disk/by-id/virtio-gpucell-home"}
    ]


def test_helpers() -> None:
    assert qualified_image("kserve/huggingfaceserver:v0.20.0") == "docker.io/kserve/huggingfaceserver:v0.20.0"
    assert qualified_image("quay.io/jupyter/base-notebook:x") == "quay.io/jupyter/base-notebook:x"
    assert qualified_image("ubuntu:24.04") == "docker.io/library/ubuntu:24.04"
    assert guest_env_file({"A": 'x"y\\z'}) == 'A="x\\"y\\\\z"\n'
    with pytest.raises(ValueError, match=r"^e: the value of A holds a line break") as exc:
        guest_env_file({"A": "s3cr3t\nvalue"}, where="e: ")
    assert "s3cr3t" not in str(exc.value)


# -- run time: an isolated-only tenant's namespace has no plain pod -------------------------------------------------
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "miner", "namespace": "tenant-acme"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}
MESSAGE = (
    "tenant acme runs isolated workloads only (isolation.default: vm): the pods of its namespace are KubeVirt's and "
    "CDI's (a VM's launcher, a disk import), and none gets an ephemeral container; run the code in a VirtualMachine, "
    "or a notebook or model endpoint (isolated)"
)


def test_an_isolated_only_namespace_refuses_plain_pods_but_not_kubevirts_or_cdis() -> None:
    policies = admission_manifests("acme", ClusterFacts.from_cell(region()))
    assert "gpucell-tenant-acme-isolated" in {p["metadata"]["name"] for p in policies}
    verdicts = refusals(policies, POD, "tenant-acme", user=TENANT_MEMBER)
    assert [(v.policy, v.message) for v in verdicts] == [("gpucell-tenant-acme-isolated", MESSAGE)]
    replicaset = controller("kube-system", "replicaset-controller")  # a tenant's Deployment's pods
    assert [v.policy for v in refusals(policies, POD, "tenant-acme", user=replicaset)] == [
        "gpucell-tenant-acme-isolated"
    ]
    for writer in (VIRT_CONTROLLER, CDI_CONTROLLER):
        namespace, name = writer.rsplit(":", 2)[1:]
        assert refusals(policies, POD, "tenant-acme", user=controller(namespace, name)) == [], writer
    debug = {**POD, "spec": {**POD["spec"], "ephemeralContainers": [{"name": "d", "image": "busybox"}]}}
    verdicts = refusals(
        policies,
        debug,
        "tenant-acme",
        "UPDATE",
        old=POD,
        user=controller(*VIRT_CONTROLLER.rsplit(":", 2)[1:]),
        sub_resource="ephemeralcontainers",
    )
    assert [v.policy for v in verdicts] == ["gpucell-tenant-acme-isolated"]


def test_an_isolated_only_namespace_refuses_cdis_vddk_import_which_runs_the_tenants_image() -> None:
    """Review of round 1: a DataVolume with source.vddk.initImageURL made CDI's cdi-sa (an allowed writer) create an
    importer pod whose init container runs an image of the tenant's choosing on the host's kernel."""
    policies = admission_manifests("acme", ClusterFacts.from_cell(region()))
    cdi = controller(*CDI_CONTROLLER.rsplit(":", 2)[1:])
    vddk = {**POD, "spec": {**POD["spec"], "initContainers": [{"name": "vddk-side-car", "image": "evil/miner"}]}}
    assert [(v.policy, v.message) for v in refusals(policies, vddk, "tenant-acme", user=cdi)] == [
        (
            "gpucell-tenant-acme-isolated",
            "tenant acme runs isolated workloads only (isolation.default: vm): a disk import from VMware (vddk) runs "
            "its vddk-side-car container from an image of the tenant's choosing on the host's kernel; import the disk "
            "over http or from a registry instead",
        )
    ]
    other_init = {**POD, "spec": {**POD["spec"], "initContainers": [{"name": "init", "image": "cdi-importer"}]}}
    assert refusals(policies, other_init, "tenant-acme", user=cdi) == []


def test_a_mixed_tenant_has_no_isolated_policy() -> None:
    spec = cell(config({"guestImage": GUEST}, notebooks={"nb": {**NOTEBOOK, "isolation": "vm"}}))
    names = {p["metadata"]["name"] for p in admission_manifests("acme", ClusterFacts.from_cell(spec))}
    assert "gpucell-tenant-acme-isolated" not in names
    assert refusals(admission_manifests("acme", ClusterFacts.from_cell(spec)), POD, "tenant-acme") == []


# -- the review: a running workload's isolation changes -------------------------------------------------------------
def test_changing_a_running_workloads_isolation_is_disruptive_and_says_what_happens() -> None:
    mixed = {"guestImage": GUEST}
    plain = cell(config(mixed, notebooks={"nb": NOTEBOOK}, modelEndpoints={"llm": {**ENDPOINT, "isolation": "vm"}}))
    isolated = cell(config(mixed, notebooks={"nb": {**NOTEBOOK, "isolation": "vm"}}, modelEndpoints={"llm": ENDPOINT}))
    assert fingerprint(isolated)["isolatedWorkloads"] == {
        "tenant-acme/nb": {"key": "tenants.acme.notebooks.nb.isolation"}
    }
    assert "tenant-acme/nb-data0" in fingerprint(isolated)["storage"]["volumes"]
    changes = compare(fingerprint(plain), fingerprint(isolated), "lab")
    # the pod's home volume leaves the config too: reported as for a removed notebook (dataDeleted), the way back
    # deletes the VM's disks for real
    assert [(c.change.value, c.subject, c.key, c.old, c.new) for c in changes] == [
        (
            "dataDeleted",
            "tenant-acme/home-nb-0",
            "regions.lab.tenants.acme.notebooks.nb",
            "volume tenant-acme/home-nb-0",
            "removed",
        ),
        (
            "workloadIsolation",
            "tenant-acme/llm",
            "regions.lab.tenants.acme.modelEndpoints.llm.isolation",
            "vm",
            "container",
        ),
        ("workloadIsolation", "tenant-acme/nb", "regions.lab.tenants.acme.notebooks.nb.isolation", "container", "vm"),
    ]
    assert changes[2].effect.startswith(
        "the notebook or endpoint is replaced by its other form (its pods and a VM, docs/decisions/0040): it is down"
    )
    assert compare(fingerprint(isolated), fingerprint(isolated), "lab") == []
    # a workload declared for the first time is no change of a running one
    fresh = cell(config(mixed, notebooks={"nb": {**NOTEBOOK, "isolation": "vm"}}))
    assert compare(fingerprint(cell(config(mixed))), fingerprint(fresh), "lab") == []
