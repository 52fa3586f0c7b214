"""Plan-time admission of tenants and workloads: each rule's exact message, and what fits."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucell.admission.inventory import capacity, gpu_offers, nvswitch_offers, nvswitch_quota
from gpucell.admission.placement import place_container, place_vm
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, GpuRequest, StackSpec
from tests.conftest import prod_regions

PROD_FRA1: dict[str, Any] = prod_regions()["fra1"]
DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 100}
QUOTA = {
    "cpuMillicores": 100000,
    "memoryGib": 1024,
    "storageGib": 4096,
    "gpus": {
        "nvidia.com/GH100_H100_SXM5_80GB": 8,
        "nvidia.com/mig-1g.18gb": 8,
        "nvidia.com/gpu": 8,
        "nvidia.com/NVIDIA_L40S-12Q": 4,
    },
}


def region(**tenants: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(PROD_FRA1)
    config["tenants"] = {
        name: {"quota": copy.deepcopy(QUOTA), "egress": "internet", **body} for name, body in tenants.items()
    }
    return config


def errors(config: dict[str, Any]) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"fra1": config}})
    except ConfigError as exc:
        return exc.lines
    return []


def vm(**fields: Any) -> dict[str, Any]:
    """An 8-GPU H100 VM of 512 GiB: in 1 GiB hugepages, as the prod H100 hosts keep little ordinary memory."""
    return {
        "gpuModel": "H100-SXM5-80GB",
        "gpus": 8,
        "memoryGib": 512,
        "hugepages": "1Gi",
        "rootDisk": DISK,
        "noLogin": True,
        **fields,
    }


A = "regions.fra1.tenants.acme"


def test_every_kind_fits_the_prod_region() -> None:
    config = region(
        acme={
            "virtualMachines": {
                "train": vm(dedicatedCpus=True, hugepages="1Gi", numaPassthrough=True),
                "desk": vm(gpuModel="L40S", vgpuProfile="L40S-12Q", gpus=2, memoryGib=32, hugepages=None),
                "bastion": {"memoryGib": 4, "rootDisk": DISK, "noLogin": True},
            },
            "notebooks": {"nb": {"gpu": {"migProfile": "1g.18gb"}}},
            "modelEndpoints": {
                "llm": {
                    "modelFormat": "huggingface",
                    "storageUri": "hf://org/model",
                    "gpu": {"model": "H200-SXM-141GB", "count": 2},
                    "maxReplicas": 3,
                }
            },
        }
    )
    assert errors(config) == []


def test_inventory_of_the_prod_region() -> None:
    spec = CellSpec.model_validate(PROD_FRA1)
    totals = capacity(gpu_offers(spec.node_pools, spec.effective_mig_strategy.value))
    assert totals == {
        "nvidia.com/GH100_H100_SXM5_80GB": 32,  # 4 hosts x 8
        "nvidia.com/mig-1g.18gb": 32,  # 2 hosts x 8 GPUs x 2 (all-balanced)
        "nvidia.com/mig-2g.35gb": 16,
        "nvidia.com/mig-3g.71gb": 16,
        "nvidia.com/gpu": 16,  # the plain H200 pool
        "nvidia.com/NVIDIA_L40S-12Q": 64,  # 2 hosts x 8 GPUs x 4 (48 GB / 12 GB)
    }


def test_vm_model_the_region_lacks() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(gpuModel="B200")}})) == [
        f"{A}.virtualMachines.x.gpuModel: the region has no vm-passthrough pool with B200"
    ]


def test_vm_on_a_container_mode_model() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(gpuModel="H200-SXM-141GB", gpus=1)}})) == [
        f"{A}.virtualMachines.x.gpuModel: no vm-passthrough pool with H200-SXM-141GB; H200-SXM-141GB is only in "
        "h200 (container), h200-mig (container): a GPU VM needs a VM-mode pool"
    ]


def test_vm_with_more_gpus_than_a_node_holds() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(gpus=9)}})) == [
        f"{A}.virtualMachines.x.gpus: 9 H100-SXM5-80GB GPUs do not fit one node: pool h100-vm has 8 per node"
    ]


def test_dedicated_cpus_need_a_topology_pool() -> None:
    config = region(acme={"virtualMachines": {"x": vm(dedicatedCpus=True)}})
    del config["nodePools"]["h100-vm"]["topology"]
    assert errors(config) == [
        f"{A}.virtualMachines.x.dedicatedCpus: dedicated CPUs, hugepages or NUMA passthrough need a pool with a "
        "topology profile; no vm-passthrough pool with H100-SXM5-80GB has one"
    ]


def test_mig_profile_no_layout_offers() -> None:
    assert errors(region(acme={"notebooks": {"nb": {"gpu": {"migProfile": "1g.10gb"}}}})) == [
        f"{A}.notebooks.nb.gpu.migProfile: '1g.10gb' is offered by no node's MIG layout; offered: 1g.18gb, 2g.35gb, "
        "3g.71gb"
    ]


def test_mig_request_under_the_single_strategy() -> None:
    config = region(acme={"notebooks": {"nb": {"gpu": {"migProfile": "1g.18gb"}}}})
    config["nodePools"]["h200-mig"]["migConfig"] = "all-1g.18gb"
    config["gpuOperator"]["migStrategy"] = "single"
    config["tenants"]["acme"]["quota"]["gpus"] = {"nvidia.com/gpu": 8}
    assert errors(config) == [
        f"{A}.notebooks.nb.gpu.migProfile: '1g.18gb': under gpuOperator.migStrategy single MIG instances are "
        "advertised as nvidia.com/gpu; ask for whole GPUs or use migStrategy mixed"
    ]


def test_gpu_notebook_on_a_vm_mode_pool() -> None:
    assert errors(region(acme={"notebooks": {"nb": {"gpu": {"model": "H100-SXM5-80GB"}}}})) == [
        f"{A}.notebooks.nb.gpu: a GPU notebook needs a container-mode pool; h100-vm runs VMs"
    ]


def test_gpu_endpoint_on_a_vm_mode_pool() -> None:
    endpoint = {"modelFormat": "huggingface", "storageUri": "hf://o/m", "gpu": {"model": "L40S"}}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.gpu: a GPU model endpoint needs a container-mode pool; l40s-vgpu runs VMs"
    ]


def test_live_migration_with_gpus_or_rwo_disks() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(evictionStrategy="LiveMigrate")}})) == [
        f"{A}.virtualMachines.x.evictionStrategy: 'LiveMigrate': a VM with GPUs cannot live-migrate; use None or "
        "External"
    ]
    cpu_vm = {"memoryGib": 4, "rootDisk": DISK, "noLogin": True, "evictionStrategy": "LiveMigrateIfPossible"}
    assert errors(region(acme={"virtualMachines": {"x": cpu_vm}})) == [
        f"{A}.virtualMachines.x.evictionStrategy: 'LiveMigrateIfPossible': live migration needs ReadWriteMany "
        "disks, disk 0 is not; use None or External"
    ]


def test_quotas_beyond_capacity_unless_overcommit_is_allowed() -> None:
    big = {"gpus": {"nvidia.com/GH100_H100_SXM5_80GB": 24}}
    config = region(acme={"quota": {**QUOTA, **big}}, beta={"quota": {**QUOTA, **big}})
    assert errors(config) == [
        "regions.fra1.tenants.beta.quota.gpus.nvidia.com/GH100_H100_SXM5_80GB: tenants reserve 48 "
        "nvidia.com/GH100_H100_SXM5_80GB in all, the region has 32; lower the quotas or set allowGpuOvercommit: true"
    ]
    config["allowGpuOvercommit"] = True
    assert errors(config) == []


def test_quota_for_a_resource_the_region_lacks() -> None:
    config = region(acme={"quota": {**QUOTA, "gpus": {"nvidia.com/mig-1g.10gb": 2}}})
    assert errors(config) == [
        f"{A}.quota.gpus.nvidia.com/mig-1g.10gb: is offered by no pool of the region; offered: "
        "nvidia.com/GH100_H100_SXM5_80GB, nvidia.com/NVIDIA_L40S-12Q, nvidia.com/gpu, nvidia.com/mig-1g.18gb, "
        "nvidia.com/mig-2g.35gb, nvidia.com/mig-3g.71gb"
    ]


def test_workloads_beyond_the_tenant_quota() -> None:
    endpoint = {
        "modelFormat": "huggingface",
        "storageUri": "hf://o/m",
        "gpu": {"migProfile": "1g.18gb"},
        "maxReplicas": 5,
    }
    config = region(
        acme={"notebooks": {"nb": {"gpu": {"migProfile": "1g.18gb", "count": 4}}}, "modelEndpoints": {"llm": endpoint}}
    )
    assert errors(config) == [
        f"{A}.modelEndpoints.llm: needs 5 nvidia.com/mig-1g.18gb (9 with the tenant's other workloads), tenant "
        "quota.gpus allows 8"
    ]


@pytest.mark.parametrize(
    ("tenant", "message"),
    [
        (
            "Acme",
            "regions.fra1.tenants.Acme: 'Acme' is not a DNS-1123 label (lower-case letters, digits and '-', at "
            "most 63 characters)",
        ),
        (
            "a" * 57,
            f"regions.fra1.tenants.{'a' * 57}: '{'a' * 57}' is too long: the namespace tenant-{'a' * 57} would "
            "exceed 63 characters",
        ),
    ],
)
def test_tenant_names(tenant: str, message: str) -> None:
    assert errors(region(**{tenant: {}})) == [message]


def test_workload_names_are_labels_and_unique_within_a_tenant() -> None:
    assert errors(region(acme={"notebooks": {"1nb": {}}})) == [
        f"{A}.notebooks.1nb: '1nb' is not a DNS-1035 label (starts with a lower-case letter; lower-case letters, "
        "digits and '-'; at most 63 characters): workloads get Services of that name"
    ]
    assert errors(
        region(
            acme={"notebooks": {"x": {}}, "virtualMachines": {"x": {"memoryGib": 4, "rootDisk": DISK, "noLogin": True}}}
        )
    ) == [
        f"{A}.notebooks.x: 'x' is already the name of virtualMachines.x in this tenant; workload names share the "
        "namespace"
    ]


def test_custom_egress_needs_destinations() -> None:
    assert errors(region(acme={"egress": "custom"})) == [f"{A}.egress: 'custom' needs egressCidrs or egressFqdns"]
    assert errors(region(acme={"egress": "none", "egressFqdns": ["pypi.org"]})) == [
        f"{A}.egressFqdns: only applies with egress: custom (egress is none)"
    ]


def test_endpoint_shape_rules() -> None:
    endpoint = {"storageUri": "hf://o/m"}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.modelFormat: give modelFormat, runtime or both"
    ]
    endpoint = {"modelFormat": "huggingface", "storageUri": "ftp://o/m"}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.storageUri: 'ftp://o/m' is not a KServe storage URI (hf://, s3://, gs://, pvc://, "
        "https://, oci://)"
    ]


def test_placement_feeds_the_renderers() -> None:
    spec = CellSpec.model_validate(PROD_FRA1)
    offers = gpu_offers(spec.node_pools, spec.effective_mig_strategy.value)
    from gpucell.spec import GpuVirtualMachineSpec

    catalog = spec.gpu_catalog
    placed = place_vm("x", GpuVirtualMachineSpec.model_validate(vm()), spec.node_pools, offers, catalog=catalog)
    assert (placed.pools, placed.resource, placed.count) == (("h100-vm",), "nvidia.com/GH100_H100_SXM5_80GB", 8)
    assert placed.model is catalog["H100-SXM5-80GB"]
    mig = place_container(
        GpuRequest(mig_profile="2g.35gb", count=2), spec.node_pools, offers, "mixed", "a GPU notebook", catalog=catalog
    )
    assert (mig.pools, mig.resource, mig.count) == (("h200-mig",), "nvidia.com/mig-2g.35gb", 2)
    whole = place_container(GpuRequest(count=8), spec.node_pools, offers, "mixed", "a GPU notebook", catalog=catalog)
    assert (whole.pools, whole.resource, whole.model) == (("h200",), "nvidia.com/gpu", None)


@pytest.mark.parametrize("egress", ["none", "cluster"])
def test_downloads_need_egress(egress: str) -> None:
    assert errors(region(acme={"egress": egress, "virtualMachines": {"x": vm(gpus=1)}})) == [
        f"{A}.virtualMachines.x.rootDisk.source: CDI imports docker://quay.io/containerdisks/ubuntu:24.04 from the "
        f"tenant's namespace, but its egress is '{egress}'; use egress internet, or custom with those hosts in "
        "egressFqdns"
    ]
    endpoint = {"modelFormat": "huggingface", "storageUri": "hf://o/m"}
    assert errors(region(acme={"egress": egress, "modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.storageUri: KServe downloads hf://o/m from the tenant's namespace, but its egress is "
        f"'{egress}'; use egress internet, or custom with those hosts in egressFqdns"
    ]
    pvc_disk = {"memoryGib": 4, "rootDisk": {"source": {"pvc": "images/ubuntu"}, "sizeGib": 20}, "noLogin": True}
    config = region(acme={"egress": egress, "virtualMachines": {"x": pvc_disk}})
    config["imageNamespaces"] = ["images"]
    assert errors(config) == []


def test_s3_settings_need_s3_and_credentials() -> None:
    endpoint = {"modelFormat": "sklearn", "storageUri": "hf://o/m", "s3Endpoint": "minio.example.net"}
    assert errors(region(acme={"modelEndpoints": {"m": endpoint}})) == [
        f"{A}.modelEndpoints.m.s3Endpoint: only applies to s3:// storage (storageUri is hf://)"
    ]
    endpoint["storageUri"] = "s3://models/m"
    assert errors(region(acme={"modelEndpoints": {"m": endpoint}})) == [
        f"{A}.modelEndpoints.m.s3Endpoint: needs credentialsConfigKey: KServe reads it from the credentials Secret"
    ]
    endpoint["credentialsConfigKey"] = "s3Creds"
    assert errors(region(acme={"modelEndpoints": {"m": endpoint}})) == []


def test_vgpu_profile_typo_and_unoffered_profile() -> None:
    desk = vm(gpuModel="L40S", vgpuProfile="L40S-13Q", gpus=1, memoryGib=32, hugepages=None)
    assert errors(region(acme={"virtualMachines": {"d": desk}})) == [
        f"{A}.virtualMachines.d.vgpuProfile: 'L40S-13Q' is not a vGPU profile of L40S; accepted: L40S-1Q, L40S-2Q, "
        "L40S-3Q, L40S-4C, L40S-4Q, L40S-6C, L40S-6Q, L40S-8C, L40S-8Q, L40S-12C, L40S-12Q, L40S-16C, L40S-16Q, "
        "L40S-24C, L40S-24Q, L40S-48C, L40S-48Q"
    ]
    desk["vgpuProfile"] = "L40S-24Q"
    assert errors(region(acme={"virtualMachines": {"d": desk}})) == [
        f"{A}.virtualMachines.d.vgpuProfile: no vm-vgpu pool with L40S (L40S-24Q); L40S is only in l40s-vgpu "
        "(vm-vgpu, nvidia.com/NVIDIA_L40S-12Q)"
    ]


def test_vms_stay_off_server_pools() -> None:
    server_vm = {"memoryGib": 4, "rootDisk": DISK, "noLogin": True, "pool": "servers"}
    assert errors(region(acme={"virtualMachines": {"x": server_vm}})) == [
        f"{A}.virtualMachines.x.pool: 'servers' is a server pool; VMs run on gpu or cpu pools: h100-vm, h200-mig, "
        "h200, l40s-vgpu, l4-dra, cpu"
    ]


def test_too_many_container_gpus_points_at_the_count() -> None:
    endpoint = {"modelFormat": "huggingface", "storageUri": "hf://o/m", "gpu": {"count": 9}}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.gpu.count: 9 GPUs do not fit one node: pool h200 has 8 per node"
    ]


def test_hugepages_without_topology_points_at_hugepages() -> None:
    config = region(acme={"virtualMachines": {"x": vm(hugepages="1Gi")}})
    del config["nodePools"]["h100-vm"]["topology"]
    assert errors(config)[0].startswith(f"{A}.virtualMachines.x.hugepages: dedicated CPUs, hugepages")


def test_pvc_clones_stay_within_the_tenant_or_image_namespaces() -> None:
    stolen = {"memoryGib": 4, "rootDisk": {"source": {"pvc": "tenant-globex/db-disk"}, "sizeGib": 20}, "noLogin": True}
    config = region(acme={"virtualMachines": {"x": stolen}}, globex={})
    assert errors(config) == [
        f"{A}.virtualMachines.x.rootDisk.source.pvc: 'tenant-globex/db-disk' clones from namespace 'tenant-globex'; "
        "a tenant may clone from its own namespace tenant-acme or from imageNamespaces (none)"
    ]
    own = {"memoryGib": 4, "rootDisk": {"source": {"pvc": "tenant-acme/golden"}, "sizeGib": 20}, "noLogin": True}
    assert errors(region(acme={"virtualMachines": {"x": own}})) == []


def test_load_balancer_services_need_the_regions_load_balancer_and_quota() -> None:
    config = region(
        acme={"virtualMachines": {"x": vm(sshService={"type": "LoadBalancer", "allowFromCidrs": ["198.51.100.0/24"]})}}
    )
    del config["loadBalancer"], config["gateway"]
    assert errors(config) == [
        f"{A}.virtualMachines.x.sshService.type: 'LoadBalancer' needs the region's loadBalancer (pools and their "
        "announcement); configure it, or use NodePort or ClusterIP",
        f"{A}.virtualMachines.x.sshService.type: 'LoadBalancer' brings the tenant's LoadBalancer Services to 1, "
        "quota.loadBalancers allows 0; raise quota.loadBalancers",
    ]


def test_endpoint_credentials_may_not_be_the_ssh_key() -> None:
    endpoint = {"modelFormat": "huggingface", "storageUri": "hf://o/m", "credentialsConfigKey": "sshPrivateKey"}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.credentialsConfigKey: 'sshPrivateKey' is the region's SSH key (or its config); "
        "name a secret that holds only this endpoint's storage credentials"
    ]


def test_declared_workloads_fit_the_cpu_memory_and_storage_quota() -> None:
    config = region(acme={"virtualMachines": {"train": vm(memoryGib=2048)}})
    assert errors(config) == [  # both problems in one run: the quota, and the host's hugepage budget
        f"{A}.virtualMachines.train: brings the tenant's declared memory to 2048 GiB, quota.memoryGib allows 1024",
        f"{A}.virtualMachines.train.memoryGib: 2048 GiB of 1Gi hugepages do not fit one node of pool h100-vm, which "
        "reserves 1920 GiB of them (960 per NUMA node x 2)",
    ]
    endpoint = {"modelFormat": "sklearn", "storageUri": "s3://b/m", "cpuMillicores": 60000, "maxReplicas": 2}
    assert errors(region(acme={"modelEndpoints": {"m": endpoint}})) == [
        f"{A}.modelEndpoints.m: brings the tenant's declared CPU to 120000 millicores, quota.cpuMillicores allows "
        "100000"
    ]


def test_notebook_exposure_fields_are_checked() -> None:
    for expose, message in (
        (
            {"host": "https://nb", "ingressClass": "nginx"},
            "expose.host: 'https://nb' is neither an IP address nor a "
            "DNS name; give a bare address or name such as 10.0.0.10 or api.fra1.example.net (no https://, no :port)",
        ),
        (
            {"host": "nb.example.net", "ingressClass": "Nginx Class"},
            "expose.ingressClass: 'Nginx Class' is not a DNS-1123 label (lower-case letters, digits and '-')",
        ),
        (
            {"host": "nb.example.net", "ingressClass": "nginx", "allowFromCidrs": ["vpn"]},
            "expose.allowFromCidrs[0]: 'vpn' is invalid: Input is not a valid IPv4 network",
        ),
    ):
        assert errors(region(acme={"notebooks": {"nb": {"expose": expose}}})) == [f"{A}.notebooks.nb.{message}"]


def test_storage_uri_needs_a_location() -> None:
    endpoint = {"modelFormat": "huggingface", "storageUri": "hf://"}
    assert errors(region(acme={"modelEndpoints": {"llm": endpoint}})) == [
        f"{A}.modelEndpoints.llm.storageUri: 'hf://' has no location after hf:// (or one with spaces); e.g. "
        "hf://org/model, s3://bucket/path"
    ]


def test_fqdn_wildcards() -> None:
    ok = region(acme={"egress": "custom", "egressFqdns": ["**.hf.co", "*.huggingface.co"]})
    assert errors(ok) == []
    assert errors(region(acme={"egress": "custom", "egressFqdns": ["hf co"]})) == [
        f"{A}.egressFqdns[0]: 'hf co' is not a DNS name (a leading *. or **. wildcard is allowed: Cilium's *. matches "
        "one label, **. any number)"
    ]


def test_the_nvidia_runtime_class_cannot_be_renamed() -> None:
    config = copy.deepcopy(PROD_FRA1)
    config["gpuOperator"]["values"] = {"toolkit": {"env": [{"name": "CONTAINERD_RUNTIME_CLASS", "value": "gpu"}]}}
    assert errors(config) == [
        "regions.fra1.gpuOperator.values.toolkit.env[0].name: 'CONTAINERD_RUNTIME_CLASS' renames the NVIDIA runtime "
        "handler, which gpucell's GPU workloads use as RuntimeClass nvidia; remove it"
    ]


# -- hosts: CPUs, memory and hugepages; HGX boards -------------------------------------------------------------
NUMA_VM = {"dedicatedCpus": True, "numaPassthrough": True, "cpu": {"cores": 64, "sockets": 2}}
BIG = {**QUOTA, "cpuMillicores": 400_000, "memoryGib": 4096}
"""A quota large enough for one big VM, so the host rules speak first."""


def big(**vm_fields: Any) -> dict[str, Any]:
    return {"quota": copy.deepcopy(BIG), "virtualMachines": {"x": vm(**vm_fields)}}


def test_prod_hosts_hold_an_eight_gpu_vm_of_1536_gib_in_hugepages() -> None:
    assert errors(region(acme=big(memoryGib=1536, **NUMA_VM))) == []


def test_hugepage_vm_larger_than_a_node_reserves() -> None:
    assert errors(region(acme=big(memoryGib=2560, **NUMA_VM))) == [
        f"{A}.virtualMachines.x.memoryGib: 2560 GiB of 1Gi hugepages do not fit one node of pool h100-vm, which "
        "reserves 1920 GiB of them (960 per NUMA node x 2)"
    ]


def test_numa_passthrough_memory_follows_the_vcpus() -> None:
    """96 vCPUs fit one 112-CPU NUMA node, so KubeVirt would bind all 1536 GiB there (kubevirt/kubevirt#14854)."""
    config = region(acme=big(memoryGib=1536, **{**NUMA_VM, "cpu": {"cores": 48, "sockets": 2}}))
    assert errors(config) == [
        f"{A}.virtualMachines.x.numaPassthrough: 1536 GiB of 1Gi hugepages: KubeVirt binds guest memory evenly to "
        "the NUMA nodes holding the VM's vCPUs, and on pool h100-vm 96 vCPUs fit on 1 of its NUMA nodes (112 CPUs "
        "each), leaving 1536 GiB per NUMA node where 960 GiB are reserved; lower memoryGib or give the VM more vCPUs"
    ]
    config["nodePools"]["h100-vm"]["topology"]["topologyManagerPolicy"] = "single-numa-node"
    config["tenants"]["acme"]["virtualMachines"]["x"]["cpu"] = {"cores": 64, "sockets": 2}
    assert errors(config) == [
        f"{A}.virtualMachines.x.numaPassthrough: 1536 GiB of 1Gi hugepages: KubeVirt binds guest memory evenly to "
        "the NUMA nodes holding the VM's vCPUs, and on pool h100-vm its topologyManagerPolicy single-numa-node "
        "keeps a VM on one NUMA node, leaving 1536 GiB per NUMA node where 960 GiB are reserved; lower memoryGib or "
        "give the VM more vCPUs"
    ]


def test_hugepage_size_the_hosts_do_not_reserve() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(hugepages="2Mi")}})) == [
        f"{A}.virtualMachines.x.hugepages: '2Mi': pool h100-vm reserves no 2Mi hugepages "
        "(topology.hugepages2MiPerNuma is 0)"
    ]


def test_ordinary_memory_left_beside_the_hugepages() -> None:
    assert errors(region(acme={"virtualMachines": {"x": vm(hugepages=None)}})) == [
        f"{A}.virtualMachines.x.memoryGib: 512 GiB of ordinary memory do not fit one node of pool h100-vm, which "
        "leaves 72 GiB beside its hugepages and reserved memory; back the VM with hugepages (hugepages: 1Gi)"
    ]
    assert errors(region(acme={"virtualMachines": {"x": vm(hugepages=None, memoryGib=64)}})) == []


def test_dedicated_vcpus_beyond_the_hosts_cpus() -> None:
    assert errors(region(acme=big(dedicatedCpus=True, cpu={"cores": 120, "sockets": 2}))) == [
        f"{A}.virtualMachines.x.cpu: 240 dedicated vCPUs do not fit one node of pool h100-vm: 224 CPUs, 8 of them "
        "reservedCpus"
    ]


def test_whole_hgx_board_without_a_catalogued_nvswitch() -> None:
    config = region(acme={"virtualMachines": {"x": vm(gpuModel="B200", hugepages=None, memoryGib=64)}})
    config["nodePools"]["b200-vm"] = {
        "role": "gpu",
        "gpuModel": "B200",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "fra1-b200-1", "address": "10.110.0.91"}],
    }
    config["tenants"]["acme"]["quota"]["gpus"]["nvidia.com/GB100_B200"] = 8
    assert errors(config) == [
        f"{A}.virtualMachines.x.gpus: 8 B200 GPUs are a whole HGX board, whose NVLink switches gpucell cannot pass "
        "through (no PCI identity catalogued for them); give at most 7 GPUs (the guest runs with NVLink off) or use "
        "a container-mode pool"
    ]
    config["tenants"]["acme"]["virtualMachines"]["x"]["gpus"] = 7
    assert errors(config) == []


def test_nvswitches_of_hgx_pools_are_offered_apart_from_gpus() -> None:
    spec = CellSpec.model_validate(PROD_FRA1)
    (offer,) = nvswitch_offers(spec.node_pools)
    assert (offer.resource, offer.pool, offer.per_node, offer.total) == (
        "nvidia.com/GH100_H100_NVSWITCH",
        "h100-vm",
        4,
        16,
    )
    assert "nvidia.com/GH100_H100_NVSWITCH" not in capacity(gpu_offers(spec.node_pools, "mixed"))
    pools = dict(spec.node_pools)
    pools["h200-vm"] = pools["h100-vm"].model_copy(update={"gpu_model": "H200-SXM-141GB"})
    # H100 and H200 boards share the gen-3 NVSwitch: the quota adds up per model, not per pool
    assert nvswitch_quota({"nvidia.com/GH100_H100_SXM5_80GB": 17, "nvidia.com/GH100_H200_SXM_141GB": 8}, pools) == {
        "nvidia.com/GH100_H100_NVSWITCH": 12
    }


def test_dev_shm_of_a_multi_gpu_endpoint_counts_against_the_memory_quota() -> None:
    tp = {
        "modelFormat": "huggingface",
        "storageUri": "hf://org/model",
        "gpu": {"model": "H200-SXM-141GB", "count": 4},
        "memoryGib": 1020,
    }
    assert errors(region(acme={"modelEndpoints": {"tp": tp}})) == []  # 1020 + 4 GiB of /dev/shm = 1024
    assert errors(region(acme={"modelEndpoints": {"tp": {**tp, "memoryGib": 1021}}})) == [
        f"{A}.modelEndpoints.tp: brings the tenant's declared memory to 1025 GiB, quota.memoryGib allows 1024"
    ]


# -- downloads under custom egress ---------------------------------------------------------------------------
def prod_acme_with(fqdns: list[str], cidrs: list[str] | None = None) -> dict[str, Any]:
    """Prod's fra1 with acme's egress names (and networks) replaced, and train-01's root disk imported from quay.io
    in acme's namespace (prod clones it from the cell's image catalog, which imports outside the tenant)."""
    config = copy.deepcopy(PROD_FRA1)
    acme = config["tenants"]["acme"]
    acme["virtualMachines"]["train-01"]["rootDisk"]["source"] = {
        "registry": "docker://quay.io/containerdisks/ubuntu:24.04"
    }
    acme["egressFqdns"] = fqdns
    if cidrs is not None:
        acme["egressCidrs"] = cidrs
    return config


PROD_FQDNS: list[str] = PROD_FRA1["tenants"]["acme"]["egressFqdns"]


def test_custom_egress_without_the_image_registry() -> None:
    """kubevirt/containerized-data-importer#3497: the importer would hang on quay.io."""
    without = [f for f in PROD_FQDNS if f != "quay.io"]
    assert errors(prod_acme_with(without)) == [
        f"{A}.virtualMachines.train-01.rootDisk.source: CDI imports docker://quay.io/containerdisks/ubuntu:24.04 "
        "from quay.io, which the tenant's custom egress does not allow; add it to tenants.acme.egressFqdns"
    ]
    without_cdn = [f for f in PROD_FQDNS if f != "*.quay.io"]
    assert errors(prod_acme_with(without_cdn)) == [
        f"{A}.virtualMachines.train-01.rootDisk.source: CDI imports docker://quay.io/containerdisks/ubuntu:24.04 "
        "from cdn.quay.io, which the tenant's custom egress does not allow; add it (or a wildcard such as "
        "'**.quay.io') to tenants.acme.egressFqdns"
    ]
    assert errors(prod_acme_with(PROD_FQDNS)) == []


def test_custom_egress_without_the_hugging_face_download_hosts() -> None:
    without = [f for f in PROD_FQDNS if f != "**.hf.co"]
    assert errors(prod_acme_with(without)) == [
        f"{A}.modelEndpoints.llama-8b.storageUri: KServe downloads hf://meta-llama/Llama-3.1-8B-Instruct from "
        "cdn-lfs.hf.co, which the tenant's custom egress does not allow; add it (or a wildcard such as '**.hf.co') "
        "to tenants.acme.egressFqdns"
    ]


def test_custom_egress_for_an_address_and_an_s3_endpoint() -> None:
    config = prod_acme_with(PROD_FQDNS)
    disk = config["tenants"]["acme"]["virtualMachines"]["train-01"]["dataDisks"][0]
    disk["source"] = {"http": "http://10.201.0.7/scratch.qcow2", "allowPlainHttp": True}
    assert errors(config) == [
        f"{A}.virtualMachines.train-01.dataDisks[0].source: CDI imports http://10.201.0.7/scratch.qcow2 from "
        "10.201.0.7, which the tenant's custom egress does not allow; add a network holding it to "
        "tenants.acme.egressCidrs"
    ]
    disk["source"] = {"http": "http://10.200.3.7/scratch.qcow2", "allowPlainHttp": True}  # in egressCidrs 10.200.0.0/16
    endpoint = config["tenants"]["acme"]["modelEndpoints"]["llama-8b"]
    endpoint.update(storageUri="s3://models/llama", s3Endpoint="minio.storage.acme.example")
    assert errors(config) == [
        f"{A}.modelEndpoints.llama-8b.storageUri: KServe downloads s3://models/llama from minio.storage.acme.example, "
        "which the tenant's custom egress does not allow; add it (or a wildcard such as '**.acme.example') to "
        "tenants.acme.egressFqdns"
    ]


# -- KServe runtimes -----------------------------------------------------------------------------------------
def endpoint(**fields: Any) -> dict[str, Any]:
    return {"storageUri": "pvc://models/m", **fields}


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        (
            {"runtime": "kserve-vllm", "modelFormat": "vLLM"},
            f"{A}.modelEndpoints.e.runtime: 'kserve-vllm' is not a ClusterServingRuntime KServe v0.20.0 installs nor "
            "a servingRuntime of the tenant; "
            "installed: kserve-autogluonserver, kserve-huggingfaceserver, kserve-huggingfaceserver-multinode, "
            "kserve-lgbserver, kserve-mlserver, kserve-paddleserver, kserve-pmmlserver, kserve-predictiveserver, "
            "kserve-sklearnserver, kserve-tensorflow-serving, kserve-torchserve, kserve-tritonserver, "
            "kserve-vllmserver, kserve-xgbserver",
        ),
        (
            {"runtime": "kserve-huggingfaceserver-multinode"},
            f"{A}.modelEndpoints.e.runtime: 'kserve-huggingfaceserver-multinode' serves one model across nodes "
            "(predictor.workerSpec), which gpucell does not render; use kserve-huggingfaceserver with tensor "
            "parallelism within one node",
        ),
        (
            {"runtime": "kserve-sklearnserver", "modelFormat": "xgboost"},
            f"{A}.modelEndpoints.e.modelFormat: 'xgboost' is not a model format of kserve-sklearnserver; it serves "
            "sklearn",
        ),
        (
            {"modelFormat": "onnx"},
            f"{A}.modelEndpoints.e.modelFormat: 'onnx': no ClusterServingRuntime of KServe v0.20.0 is auto-selected "
            "for it under protocol v1 (formats: autogluon, huggingface, lightgbm, paddle, pmml, pytorch, sklearn, "
            "tensorflow, vLLM, xgboost); name a runtime that serves it",
        ),
        (
            {"runtime": "kserve-vllmserver"},
            f"{A}.modelEndpoints.e.runtimeVersion: is required with kserve-vllmserver, whose image is "
            "vllm/vllm-openai:latest: pin a release tag of vllm/vllm-openai",
        ),
        (
            {"modelFormat": "sklearn", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
            f"{A}.modelEndpoints.e.gpu: kserve-sklearnserver runs kserve/sklearnserver:v0.20.0, a CPU build; a GPU "
            "endpoint needs a GPU build of that image in runtimeVersion, or no gpu",
        ),
        (
            {"modelFormat": "tensorflow", "runtimeVersion": "2.6.2", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
            f"{A}.modelEndpoints.e.runtimeVersion: '2.6.2' is a CPU build of tensorflow/serving; a GPU endpoint needs "
            "its -gpu build, e.g. 2.6.2-gpu (or leave runtimeVersion out)",
        ),
    ],
    ids=[
        "unknown-runtime",
        "multinode",
        "format-of-runtime",
        "format-nobody-serves",
        "floating-tag",
        "cpu-image",
        "tensorflow-cpu-tag",
    ],
)
def test_runtimes_and_formats_are_the_pinned_kserves(fields: dict[str, Any], line: str) -> None:
    assert errors(region(acme={"modelEndpoints": {"e": endpoint(**fields)}})) == [line]


@pytest.mark.parametrize(
    "fields",
    [
        {"modelFormat": "tensorflow", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
        {"runtime": "kserve-tritonserver", "modelFormat": "onnx", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
        {"runtime": "kserve-vllmserver", "runtimeVersion": "v0.11.0", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
        {"runtime": "kserve-torchserve", "runtimeVersion": "0.9.0-gpu", "gpu": {"count": 1, "model": "H200-SXM-141GB"}},
        {"runtime": "kserve-mlserver", "modelFormat": "mlflow"},
        {"runtime": "kserve-tritonserver", "modelFormat": "tensorflow"},
    ],
    ids=["tensorflow-gpu", "onnx-triton", "vllm-pinned", "torchserve-gpu-build", "mlflow-mlserver", "triton-tf"],
)
def test_runtimes_that_serve_as_declared(fields: dict[str, Any]) -> None:
    assert errors(region(acme={"modelEndpoints": {"e": endpoint(**fields)}})) == []


def test_endpoints_on_a_kserve_without_a_runtime_table() -> None:
    config = region(acme={"modelEndpoints": {"e": endpoint(modelFormat="sklearn")}})
    config["versions"] = {"kserve": "v0.21.0"}
    assert errors(config) == [
        "regions.fra1.versions.kserve: 'v0.21.0': gpucell checks model endpoints against the ClusterServingRuntimes "
        "KServe installs, which it knows for v0.20 only; pin such a release, or add this one's runtimes to "
        "gpucell.catalog.kserve_runtimes"
    ]
    del config["tenants"], config["loadBalancer"], config["gateway"]  # the prod pools name its tenants
    assert errors(config) == []
