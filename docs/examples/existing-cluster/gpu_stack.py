"""GPU VMs on a cluster gpucell did not build: the NVIDIA GPU Operator, KubeVirt and CDI, then tenant `ml` with one
8-GPU VM, from gpucell's components alone (no K3sCluster, RegionalCell or CellSpec).

The cluster this describes: Kubernetes 1.33 (kubeadm), Cilium as its CNI (the tenant's isolation is
CiliumNetworkPolicy objects), containerd at its packaged paths, a default StorageClass `ceph-block` (Ceph RBD, raw
block volumes), and two HGX H100 nodes prepared for VFIO (IOMMU on, no NVIDIA driver installed) and labelled
`gpucell.io/pool=h100` and `nvidia.com/gpu.workload.config=vm-passthrough`. gpucell sets none of that on a cluster it
did not build: the facts below describe it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gpucell import (
    Cdi,
    CdiArgs,
    Cluster,
    ClusterFacts,
    ContainerRuntime,
    GpuOperator,
    GpuOperatorArgs,
    GpuVirtualMachine,
    GpuVirtualMachineArgs,
    GpuVirtualMachineSpec,
    KubeVirt,
    KubeVirtArgs,
    Platform,
    Tenant,
    TenantArgs,
    TenantSpec,
    VolumeClass,
)

CLUSTER_FACTS: dict[str, Any] = {
    "network": {
        "nodeCidr": "10.30.0.0/24",
        "podCidr": "10.244.0.0/16",
        "serviceCidr": "10.96.0.0/12",
        "clusterDns": "10.96.0.10",
        "apiEndpoint": "10.30.0.10",
    },
    "nodePools": {
        "h100": {
            "role": "gpu",
            "gpuModel": "H100-SXM5-80GB",
            "gpusPerNode": 8,
            "gpuMode": "vm-passthrough",
            "hosts": [{"name": "gpu-1", "address": "10.30.0.21"}, {"name": "gpu-2", "address": "10.30.0.22"}],
        },
    },
    "storage": {"otherClasses": ["ceph-block"]},
}
"""What the plan knows of the cluster, in the camelCase shape of a gpucell region (``ClusterFacts``)."""

ML_TENANT: dict[str, Any] = {
    "quota": {
        "cpuMillicores": 128000,
        "memoryGib": 1024,
        "storageGib": 4096,
        "gpus": {"nvidia.com/GH100_H100_SXM5_80GB": 8},
    },
    "egress": "internet",
}

TRAIN_VM: dict[str, Any] = {
    "gpuModel": "H100-SXM5-80GB",
    "gpus": 8,
    "memoryGib": 512,
    "cpu": {"cores": 64},
    "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 200},
    "sshKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0Zi1KGzcvBMcpPg4ZOgSjpQ0wUuvD9mGMyW2SGhbQ ml@example.com"],
}


@dataclass(frozen=True)
class GpuStack:
    """What :func:`deploy` built."""

    cluster: Cluster
    gpu_operator: GpuOperator
    kubevirt: KubeVirt
    cdi: Cdi
    tenant: Tenant
    vm: GpuVirtualMachine


def deploy(kubeconfig: pulumi.Input[str], kubernetes_version: str, vm: dict[str, Any] | None = None) -> GpuStack:
    """The platform and tenant ``ml`` with VM ``train`` (``vm``: its spec, :data:`TRAIN_VM` by default) on the
    cluster ``kubeconfig`` reaches. Raises ``gpucell.ConfigError`` (one line per problem) before registering
    anything of the tenant when the facts, the tenant or the VM are wrong."""
    facts = ClusterFacts.model_validate(CLUSTER_FACTS)
    cluster = Cluster.from_kubeconfig("lab", kubeconfig, kubernetes_version, ContainerRuntime.containerd())
    gpu_operator = GpuOperator("lab-gpu-operator", GpuOperatorArgs(cluster, node_pools=facts.node_pools))
    kubevirt = KubeVirt("lab-kubevirt", KubeVirtArgs(cluster, node_pools=facts.node_pools))
    cdi = Cdi("lab-cdi", CdiArgs(cluster, VolumeClass("ceph-block", volume_mode="Block"), node_pools=facts.node_pools))
    platform = Platform(kubevirt=kubevirt, cdi=cdi, gpu_operator=gpu_operator)
    tenant = Tenant("lab-ml", TenantArgs("ml", TenantSpec.model_validate(ML_TENANT), cluster, facts, platform))
    train = GpuVirtualMachine(
        "lab-ml-train",
        GpuVirtualMachineArgs("train", GpuVirtualMachineSpec.model_validate(vm or TRAIN_VM), tenant),
        opts=pulumi.ResourceOptions(parent=tenant),
    )
    return GpuStack(cluster, gpu_operator, kubevirt, cdi, tenant, train)
