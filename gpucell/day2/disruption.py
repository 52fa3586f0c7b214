"""Disruptive changes: which settings of a live cell disrupt its running workloads, and the rule that finds them.

A cell's *fingerprint* is a plain JSON object holding exactly those settings (:func:`fingerprint`): the pod and
service address plan, cluster DNS, Cilium's datapath, every node's role and GPU configuration, the storage classes
of its volumes and the versions whose jump is not a routine upgrade. The program exports it per region (stack
output ``<region>Fingerprint``) and reads the last deployed one back on the next ``pulumi up`` (see
:mod:`gpucell.stacks.guard`); ``gpucell diff`` compares the fingerprints of two plans. Both use :func:`compare`, so
a reviewer sees in the pull request exactly the changes ``pulumi up`` will refuse without an acknowledgement
(:class:`Acknowledgement`, stack config ``gpucell:acknowledge``).

Why each setting is disruptive (what happens to running workloads) is :data:`EFFECTS`; the sources:

- Cilium IPAM: "Don't change the IPAM mode of an existing cluster. Changing the IPAM mode in a live environment may
  cause persistent disruption of connectivity for existing workloads" (docs.cilium.io, network/concepts/ipam).
- A Service's ``spec.clusterIP`` cannot be changed in place (pulumi-kubernetes replaces the object,
  ``provider/pkg/provider/diff.go``), and the cluster DNS address is the ``kube-dns`` Service's ClusterIP and every
  pod's ``resolv.conf`` nameserver (kubelet ``clusterDNS``, k3s ``cluster-dns``).
- GPU Operator reconfiguration (``nvidia.com/gpu.workload.config``, ``nvidia.com/mig.config``,
  ``nvidia.com/vgpu.config``): the operand set of a node changes and mig-manager / vgpu-device-manager pause the
  GPU clients of the node; GPU VMs cannot live-migrate (GPU Operator v26.7.0 ``controllers/state_manager.go``,
  mig-parted v0.15.0 ``pkg/mig/reconfigure``, KubeVirt v1.9.0 ``pkg/virt-handler/vm.go``).
- k3s servers are etcd members (k3s docs "High Availability Embedded etcd"), and an etcd member's address cannot
  change in place: "You can't change the node IP on etcd cluster members, you need to do a --cluster-reset ... or
  delete the node from the cluster and rejoin it" (k3s maintainers in rancher/rke2#5651, k3s-io/k3s#6524).
  Kubernetes supports upgrading the control plane one minor version at a time
  (kubernetes.io/releases/version-skew-policy).
- A StatefulSet's ``volumeClaimTemplates`` and a PVC's ``storageClassName`` are immutable (pulumi-kubernetes
  ``diff.go``); KubeVirt creates a VM's DataVolume from its template only when it is missing (KubeVirt
  ``pkg/virt-controller/watch/vm/vm.go`` ``handleDataVolumes``) and CDI rejects any DataVolume spec update
  ("Cannot update DataVolume Spec", CDI ``pkg/apiserver/webhooks/datavolume-validate.go``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from ipaddress import IPv4Address
from typing import Any

from pydantic import Field, field_validator

from gpucell.admission.isolation import is_isolated
from gpucell.admission.vm_shape import ShapeError, resolve_vm
from gpucell.components._chart import deep_merge
from gpucell.components.cilium import cilium_values
from gpucell.components.storage import longhorn_values
from gpucell.spec import CellSpec, GpuMode, NodeRole, StorageBackend
from gpucell.spec._base import SpecModel
from gpucell.spec.fabric import FabricSpec
from gpucell.spec.instancetypes import InstancetypeKind
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.traffic import parse_block, vm_pool

__all__ = [
    "DOWNGRADE_FLOORS",
    "EFFECTS",
    "FINGERPRINT_VERSION",
    "LONGHORN_VOLUME_SETTINGS",
    "MINOR_DOWNGRADES_ONLY",
    "NO_DOWNGRADES",
    "ROUTING_VALUES",
    "UNACKNOWLEDGEABLE",
    "Acknowledgement",
    "Change",
    "DisruptiveChange",
    "Judgement",
    "StackAcknowledgements",
    "compare",
    "fabric_text",
    "fingerprint",
    "judge",
    "refused_together",
    "release_line",
    "removed_regions",
    "skipped_releases",
]

FINGERPRINT_VERSION = 1
"""Version of the fingerprint's shape; :func:`compare` reads older shapes key by key."""
ROUTING_VALUES = ("routingMode", "tunnelProtocol", "autoDirectNodeRoutes", "ipv4NativeRoutingCIDR")
"""Cilium chart values that choose how pod traffic crosses nodes (cilium ``values.yaml`` 1.20.0)."""
_K3S_MINOR = re.compile(r"^v(\d+)\.(\d+)\.")
LONGHORN_VOLUME_SETTINGS = ("taintToleration", "systemManagedComponentsNodeSelector", "priorityClass", "storageNetwork")
"""Longhorn ``defaultSettings`` that must not change while a volume is attached (longhorn 1.12.1
``chart/questions.yaml``: "You cannot modify this setting while volumes are still attached" for all but
``priorityClass``, "DO NOT CHANGE THIS SETTING WITH ATTACHED VOLUMES" for it)."""


class Change(StrEnum):
    """The kinds of disruptive change; the value is what ``gpucell:acknowledge[].change`` names."""

    POD_CIDR = "podCidr"
    POD_CIDR_MASK_SIZE = "podCidrMaskSize"
    SERVICE_CIDR = "serviceCidr"
    CLUSTER_DNS = "clusterDns"
    KUBE_PROXY_REPLACEMENT = "kubeProxyReplacement"
    CILIUM_ROUTING = "ciliumRouting"
    CILIUM_IPAM = "ciliumIpam"
    GPU_MODE = "gpuMode"
    MIG_CONFIG = "migConfig"
    VGPU_PROFILE = "vgpuProfile"
    NODE_ROLE = "nodeRole"
    SERVER_ADDRESS = "serverAddress"
    SERVER_REMOVED = "serverRemoved"
    NODE_REMOVED = "nodeRemoved"
    DATA_DELETED = "dataDeleted"
    STORAGE_CLASS = "storageClass"
    K3S_MINOR = "k3sMinor"
    CHART_MAJOR = "chartMajor"
    METRICS_STORAGE = "metricsStorage"
    REGION_REMOVED = "regionRemoved"
    PUBLIC_ADDRESS = "publicAddress"
    LOAD_BALANCER_ANNOUNCE = "loadBalancerAnnounce"
    INSTANCETYPE_RESIZED = "instancetypeResized"
    VM_FIRMWARE = "vmFirmware"
    TENANT_CLUSTER_VERSION = "tenantClusterVersion"
    LOAD_BALANCER_POOL = "loadBalancerPool"
    GATEWAY_ADDRESS = "gatewayAddress"
    TENANT_CLUSTER_API_ADDRESS = "tenantClusterApiAddress"
    METRICS_RETENTION = "metricsRetention"
    API_VIP = "apiVip"
    ENDPOINT_HPA_TO_KEDA = "endpointHpaToKeda"
    ENDPOINT_KEDA_TO_HPA = "endpointKedaToHpa"
    WORKLOAD_ISOLATION = "workloadIsolation"
    FABRIC = "fabric"
    FABRIC_VLAN = "fabricVlan"
    LONGHORN_VOLUME_SETTING = "longhornVolumeSetting"


EFFECTS: dict[Change, str] = {
    Change.FABRIC: (
        "the SR-IOV Network Operator reconfigures the host's NICs (VFs recreated, the link type or MTU changed), "
        "which drains the node, and the rail resources its VMs ask for change: GPU VMs with RDMA NICs stop, and the "
        "host's install script checks the new PCIe topology against the hardware before k3s is touched"
    ),
    Change.FABRIC_VLAN: (
        "the tenant's SriovNetworks take the new VLAN, but a running VM keeps its VFs on the old one until it is "
        "restarted (the SR-IOV CNI tags a VF when the VM's pod starts): the tenant's VMs are split between two VLANs, "
        "and an old VLAN given to another tenant in the same run joins that tenant's new VMs to this one's running "
        "VMs; stop the tenant's VMs with rdmaNics first, or restart them right after"
    ),
    Change.POD_CIDR: (
        "every pod and VM keeps its address from the old range until it is recreated, and gpucell does not migrate "
        "the pod ranges Cilium already gave the nodes; plan a restart of every workload, and update network "
        "policies and firewalls written for the old range"
    ),
    Change.POD_CIDR_MASK_SIZE: (
        "changes the size of the pod range Cilium's cluster-pool IPAM gives each node; ranges already given keep "
        "their old size, so nodes disagree until every node is drained and its CiliumNode recreated"
    ),
    Change.SERVICE_CIDR: (
        "every Service keeps its ClusterIP from the old range (a ClusterIP cannot change in place) while new "
        "Services get addresses from the new one, and the cluster DNS address moves with it; plan to recreate "
        "every Service and restart every pod"
    ),
    Change.CLUSTER_DNS: (
        "running pods keep the old nameserver in /etc/resolv.conf and lose name resolution once the kube-dns "
        "Service moves (its ClusterIP cannot change in place); every pod must be restarted"
    ),
    Change.KUBE_PROXY_REPLACEMENT: (
        "Service load-balancing moves between kube-proxy and Cilium's eBPF datapath while every Cilium agent "
        "restarts; connections through Services are dropped, and without either, Services stop working"
    ),
    Change.CILIUM_ROUTING: (
        "pod traffic between nodes changes path (tunnel or native routing) while every Cilium agent restarts; "
        "cross-node connections of running pods and VMs are reset, and native routing needs routes to every "
        "node's pod range in the node network"
    ),
    Change.CILIUM_IPAM: (
        "Cilium's docs: changing the IPAM mode of a live cluster may cause persistent disruption of connectivity "
        "for existing workloads; the supported path is a new cluster"
    ),
    Change.GPU_MODE: (
        "the GPU Operator replaces the node's GPU stack (driver and device plugin, vfio-pci, or the vGPU "
        "manager): its GPU pods and GPU VMs must be stopped first (VMs with GPUs cannot live-migrate), and the GPU "
        "resources it advertises change name, so workloads asking for the old ones no longer fit there"
    ),
    Change.MIG_CONFIG: (
        "mig-manager repartitions the node's GPUs: it pauses the device plugin and fails while GPU pods still hold "
        "a GPU, so the node's GPU workloads must be drained first; the MIG resources it advertises change"
    ),
    Change.VGPU_PROFILE: (
        "the vGPU device manager recreates the node's vGPUs as the new type: VMs using the old type must be "
        "stopped first, and the vGPU resource the node advertises changes name"
    ),
    Change.NODE_ROLE: (
        "the host's k3s role or pool changes: gpucell reinstalls k3s on it with the other role's config "
        "(server/agent) or relabels it, and workloads placed by the old pool must be drained first"
    ),
    Change.SERVER_ADDRESS: (
        "the server's etcd member keeps its old peer address: k3s restarts with the new node-ip, but an etcd "
        "member's address cannot change in place (k3s maintainers, rancher/rke2#5651, k3s-io/k3s#6524), so the "
        "member stays unreachable and the cluster loses a vote; remove the server in one pulumi up "
        "(serverRemoved) and add it again with its new address in the next"
    ),
    Change.SERVER_REMOVED: (
        "the server is drained and leaves etcd (it deletes its own Node, k3s removes its member, then k3s is "
        "uninstalled; with removalPolicy forget only its Node is deleted, from a healthy server); remove one "
        "server per pulumi up and keep an odd number, or the cluster can lose its etcd quorum and its API"
    ),
    Change.NODE_REMOVED: (
        "gpucell drains the node (cordons it, stops its GPU VMs, which cannot live-migrate, and evicts its pods "
        "through the Eviction API), uninstalls k3s from the host and deletes its Node; with removalPolicy forget "
        "nothing runs on the host and only its Node is deleted, its pods going with it"
    ),
    Change.DATA_DELETED: (
        "the object is deleted with the data behind it (a tenant's namespace and every volume in it, a VM's "
        "disks, a notebook's home volume, a tenant cluster's VMs with their disks and its etcd): nothing brings it "
        "back; set removalPolicy retain first to keep it"
    ),
    Change.STORAGE_CLASS: (
        "existing volumes keep their StorageClass and data: a PVC's class is immutable, KubeVirt does not "
        "recreate an existing VM disk from its template and CDI refuses DataVolume spec updates; the new class "
        "applies only to volumes created afterwards, or after the volume is deleted on purpose (data lost)"
    ),
    Change.K3S_MINOR: (
        "Kubernetes upgrades the control plane one minor version at a time and does not support downgrades; "
        "jumping further can leave the API server unable to read what etcd holds; upgrade minor by minor"
    ),
    Change.CHART_MAJOR: (
        "a new major chart version may rename values, change CRDs and restart or replace the component's "
        "workloads; read the chart's upgrade notes before applying it"
    ),
    Change.METRICS_STORAGE: (
        "a PersistentVolumeClaim cannot shrink: Prometheus keeps its volume at the old size, and getting the "
        "smaller one means deleting the volume and with it every sample not yet sent by remote write (the GPU "
        "metering history of metrics.retentionDays); run gpucell usage for the open billing period first"
    ),
    Change.REGION_REMOVED: (
        "the whole cell is destroyed: every workload of the region stops and k3s is uninstalled from every node "
        "(protected resources stop the run)"
    ),
    Change.PUBLIC_ADDRESS: (
        "the VM's public address moves (or goes away): Cilium LB IPAM gives its Service the new address, open "
        "connections to the old one are dropped and clients, DNS records and firewall rules must follow"
    ),
    Change.LOAD_BALANCER_ANNOUNCE: (
        "every LoadBalancer address of the region is withdrawn from one announcement (L2 ARP or BGP) and announced "
        "by the other: the addresses are unreachable until the network routes the pools the new way"
    ),
    Change.INSTANCETYPE_RESIZED: (
        "the VMs that use it keep the size they captured (each stores a ControllerRevision of its instancetype when "
        "it first starts, KubeVirt v1.9.0 pkg/instancetype/revision/store.go) while admission, quotas and the "
        "capacity view count the new one; give the new size a new name and move the VMs to it (each takes it at its "
        "next restart), or acknowledge that only VMs created from now on get it"
    ),
    Change.VM_FIRMWARE: (
        "the VM boots its disk with other firmware at its next restart (KubeVirt marks it RestartRequired): a disk "
        "partitioned for BIOS has no EFI system partition and an EFI install no BIOS boot code, so the guest may not "
        "boot; Secure Boot refuses an unsigned bootloader or kernel module (a DKMS-built NVIDIA driver); dropping "
        "persistent EFI or TPM state loses the NVRAM's boot entries and enrolled keys, and every secret sealed to "
        "the TPM (BitLocker, LUKS TPM unlock); check the guest first, or give the new firmware to a new VM"
    ),
    Change.TENANT_CLUSTER_VERSION: (
        "Cluster API's KubeadmControlPlane upgrades a tenant cluster one minor version at a time (its webhook "
        "refuses 'cannot update Kubernetes version', controlplane/kubeadm/webhooks/admission) and kubeadm never "
        "downgrades; no acknowledgement makes it work"
    ),
    Change.LOAD_BALANCER_POOL: (
        "Cilium LB IPAM reassigns addresses when a pool shrinks or moves: a Service whose address it assigned (no "
        "fixed address) may get another address of the pool, even when its own is still inside the new blocks "
        "(cilium/cilium#41458, #40358); its clients, DNS records and firewall rules must follow; to keep the "
        "addresses, give those Services fixed ones first (sshService.address, gateway.address) and pulumi up"
    ),
    Change.GATEWAY_ADDRESS: (
        "the Gateway's Service takes the new address (Cilium LB IPAM): every model endpoint's host name under "
        "gateway.domain resolves to the old one until DNS follows, and open connections to it are dropped; point "
        "*.<gateway.domain> at the new address"
    ),
    Change.TENANT_CLUSTER_API_ADDRESS: (
        "the tenant cluster's API Service takes the new address at once while its KubeadmControlPlane replaces "
        "every control-plane VM, one at a time, to put it in the API server's certificate (certSANs): until the "
        "roll ends clients of the new address fail TLS verification, and every kubeconfig handed out (the tenant "
        "users', the exported one) names the old address; hand out the new kubeconfig after the roll"
    ),
    Change.METRICS_RETENTION: (
        "Prometheus deletes every block older than the new retention at its next compaction after the restart: "
        "the samples (and the GPU metering history) of those days are gone unless remote write sent them; run "
        "gpucell usage for the open billing period first"
    ),
    Change.API_VIP: (
        "turning it on, kube-vip on the servers starts announcing apiEndpoint, so whatever served that address "
        "before (an external load balancer) must stop first or the address is claimed twice; turning it off "
        "removes kube-vip and the address with it: the agents, Cilium (k8sServiceHost) and every kubeconfig lose "
        "the API until an external load balancer or DNS serves apiEndpoint; switch them over in the same "
        "maintenance window"
    ),
    Change.ENDPOINT_HPA_TO_KEDA: (
        "KServe creates the endpoint's ScaledObject while the HorizontalPodAutoscaler it made before still manages "
        "the predictor: KEDA's webhook refuses it ('is already managed by the hpa') and the endpoint stays in a "
        "reconcile error until that HPA is deleted by hand (kserve/kserve#5196); after pulumi up, run kubectl -n "
        "<namespace> delete hpa <endpoint>-predictor"
    ),
    Change.ENDPOINT_KEDA_TO_HPA: (
        "KEDA may have scaled the predictor to zero, and the HorizontalPodAutoscaler KServe creates instead never "
        "scales a workload up from zero replicas (autoscaling is off at 0; kedacore/keda#947): the endpoint stays "
        "down; after pulumi up, run kubectl -n <namespace> scale deployment <endpoint>-predictor --replicas=1"
    ),
    Change.LONGHORN_VOLUME_SETTING: (
        "Longhorn applies a changed taint-toleration, system-managed-components-node-selector, priority-class or "
        "storage-network only while every volume is detached, since it recreates the instance managers that serve "
        "them: with a volume "
        "attached its webhook rejects the new value (longhorn/longhorn#7675) and longhorn-manager keeps failing to "
        "apply it, also at its next upgrade (longhorn/longhorn#4160), so the components it deploys keep the old "
        "tolerations and node selector (on a newly tainted node no instance manager starts and no volume attaches); "
        "stop the VMs, notebooks, endpoints and metrics that use Longhorn volumes for the run"
    ),
    Change.WORKLOAD_ISOLATION: (
        "the notebook or endpoint is replaced by its other form (its pods and a VM, docs/decisions/0040): it is down "
        "from the old form's deletion until the new one answers (a VM clones its guest image, boots and pulls the "
        "workload's image: minutes), kernels and requests in flight are lost, and a notebook's home does not move "
        "(the pod's home-<notebook>-0 volume is kept, the VM's home disk <notebook>-data0 starts empty; the other "
        "way the VM's disks go with it); with removalPolicy protect (the default) pulumi up refuses to delete the "
        "old form: copy the home first, then set removalPolicy retain or delete for the change"
    ),
}
"""What each kind of change does to running workloads: the text the diff and the refusal show."""
UNACKNOWLEDGEABLE = frozenset({Change.TENANT_CLUSTER_VERSION})
"""Kinds of change no acknowledgement allows: :func:`refused_together` refuses each, :func:`judge` passes them by, and
an acknowledgement naming one is refused."""


@dataclass(frozen=True)
class DisruptiveChange:
    """One disruptive change of one region between two fingerprints."""

    change: Change
    """Its kind."""
    region: str
    """The region it happens in."""
    subject: str | None
    """What it applies to: a host (node changes), ``<namespace>/<claim>`` or ``default`` (storageClass), a chart
    (chartMajor); ``None`` for region-wide changes."""
    key: str
    """The config key path that changed, e.g. ``regions.lab1.network.podCidr``."""
    old: str
    """The deployed value, as text."""
    new: str
    """The planned value, as text (``removed`` for removals)."""

    @property
    def effect(self) -> str:
        """What it does to running workloads (:data:`EFFECTS`)."""
        return EFFECTS[self.change]

    def acknowledgement(self) -> str:
        """The ``gpucell:acknowledge`` entry that accepts it, in YAML flow style."""
        subject = f", subject: {self.subject}" if self.subject is not None else ""
        return f'{{change: {self.change.value}, region: {self.region}{subject}, reason: "..."}}'

    def summary(self) -> str:
        """``<old> -> <new>`` (or what was removed) in one phrase."""
        if self.change in (Change.SERVER_REMOVED, Change.NODE_REMOVED, Change.REGION_REMOVED):
            return f"{self.old} removed"
        target = f"{self.subject}: " if self.subject is not None else ""
        return f"{target}{self.old} -> {self.new}"

    def refusal(self) -> str:
        """The one-line error ``pulumi up`` stops with while the change is not acknowledged."""
        return (
            f"{self.key}: {self.summary()} is a disruptive change ({self.change.value}: {self.effect}); "
            f"to apply it, add {self.acknowledgement()} to gpucell:acknowledge"
        )


class Acknowledgement(SpecModel):
    """One entry of ``gpucell:acknowledge``: a disruptive change the next ``pulumi up`` may apply.

    It matches the changes of its ``change`` kind in ``region`` (only the one of ``subject`` when set). An entry that
    matches nothing in a region with a known previous deployment is an error, so remove it after the ``pulumi up``
    that applied the change.
    """

    change: Change
    """The kind of change (``podCidr``, ``gpuMode``, ... see docs/reviewing-changes.md)."""
    region: str
    """The region it applies to."""
    subject: str | None = None
    """Only the change of this host (node changes), ``<namespace>/<claim>`` or ``default`` (storageClass), chart
    (chartMajor), namespace or ``<namespace>/<claim>`` (dataDeleted). Defaults to every change of that kind in the
    region."""
    reason: str = Field(min_length=1)
    """Why it is safe now (maintenance window, ticket): for the reviewer and the stack's history."""

    @field_validator("change")
    @classmethod
    def _acknowledgeable(cls, value: Change) -> Change:
        if value in UNACKNOWLEDGEABLE:
            raise ValueError(f"cannot be acknowledged: {EFFECTS[value]}")
        return value

    @field_validator("reason")
    @classmethod
    def _says_why(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is blank; say why the disruption is acceptable (maintenance window, ticket)")
        return value

    def matches(self, change: DisruptiveChange) -> bool:
        """True when this entry acknowledges ``change``."""
        return self.change is change.change and self.region == change.region and self.subject in (None, change.subject)

    def shown(self) -> str:
        """The entry in YAML flow style, without its reason."""
        subject = f", subject: {self.subject}" if self.subject is not None else ""
        return f"{{change: {self.change.value}, region: {self.region}{subject}}}"


# -- the fingerprint ---------------------------------------------------------------------------------------------
def fingerprint(cell: CellSpec) -> dict[str, Any]:
    """The disruptive settings of ``cell`` as plain JSON (only str, int, bool, None, lists and string-keyed maps).

    Shape (version :data:`FINGERPRINT_VERSION`)::

        {"version": 1,
         "network": {"podCidr", "podCidrMaskSize", "serviceCidr", "clusterDns", "apiVip": "arp" | "bgp" | None},
         "cilium": {"kubeProxyReplacement", "routing": {<ROUTING_VALUES set in the chart values>}, "ipamMode"},
         "nodes": {<host>: {"pool", "role", "address", "gpuMode", "migConfig", "vgpuProfile", "removalPolicy",
                            "fabric" (only with one: fabric_text)}},
         "tenants": {<tenant>: {"namespace", "removalPolicy", "fabricVlan" (only with one)}},
         "storage": {"defaultClass",
                     "volumes": {"<namespace>/<claim>": {"storageClass", "key", "owner", "removalPolicy"}},
                     "longhornSettings": {<LONGHORN_VOLUME_SETTINGS>: <value> or None}},  # only on Longhorn
         "versions": {"k3s", "kubevirt", "charts": {<versions key>: <version>},
                      "clusterApi" (only with tenant clusters), "gatewayApi" (only with a gateway)},
         "metrics": {"storageGib", "retentionDays"},     # only with metrics.enabled
         # only with loadBalancer (gateway only with a gateway):
         "loadBalancer": {"announce", "pools": {<pool>: [<block>]}},
         "publicAddresses": {"<namespace>/<vm>": "<address>" or "pool <pool>"},
         "gateway": {"address": "<address>" or "pool <pool>"},
         # only when VMs use gpucell-defined instancetypes:
         "instancetypes": {"<kind>/[<namespace>/]<name>": {"size", "key", "vms"}},
         # only when a VM boots with EFI or has a TPM (its own, or its preference's); any other VM boots BIOS:
         "vmFirmware": {"<namespace>/<vm>": {"boot", "efiPersistent", "tpm", "key"}},
         # only with tenant clusters:
         "tenantClusters": {"<namespace>/<cluster>": {"owner", "removalPolicy", "kubernetesVersion", "apiAddress"}},
         # only with model endpoints:
         "modelEndpoints": {"<namespace>/<endpoint>": {"autoscaler": "hpa" | "keda", "minReplicas", "key"}},
         # only with isolated notebooks or endpoints (docs/decisions/0040):
         "isolatedWorkloads": {"<namespace>/<workload>": {"key"}}}

    Cilium values are the merged chart values (gpucell's, then ``cilium.values``), so an override of
    ``kubeProxyReplacement`` or ``routingMode`` counts. ``storageClass`` is ``None`` for volumes of the cell's
    default class; ``key`` is the config key (below the region) that names the volume's class.
    """
    # gpucell's own values of these keys do not depend on the rest of CiliumArgs
    values = deep_merge(cilium_values(cell.network, cell.api_endpoint), cell.cilium.values)
    return {
        "version": FINGERPRINT_VERSION,
        "network": {
            "podCidr": str(cell.network.pod_cidr),
            "podCidrMaskSize": cell.network.pod_cidr_mask_size,
            "serviceCidr": str(cell.network.service_cidr),
            "clusterDns": str(cell.network.cluster_dns),
            "apiVip": cell.network.api_vip.mode.value if cell.network.api_vip is not None else None,
        },
        "cilium": {
            # The chart takes "true"/"false" strings and booleans alike (values.yaml default: "false").
            "kubeProxyReplacement": str(values.get("kubeProxyReplacement", "false")).lower(),
            "routing": {key: values[key] for key in ROUTING_VALUES if key in values},
            "ipamMode": (values.get("ipam") or {}).get("mode"),
        },
        "nodes": {
            host.name: {
                "pool": pool_name,
                "role": pool.role.value,
                "address": str(host.address),
                "gpuMode": pool.gpu_mode.value if pool.gpu_mode is not None else None,
                "migConfig": pool.mig_config,
                "vgpuProfile": pool.vgpu_profile,
                "removalPolicy": (host.removal_policy or cell.removal_policy_of(pool_name, host)).value,
                **({"fabric": fabric_text(pool.fabric)} if pool.fabric is not None else {}),
            }
            for pool_name, pool in cell.node_pools.items()
            for host in pool.hosts
        },
        "tenants": {
            name: {
                "namespace": namespace_of(name),
                "removalPolicy": tenant.removal_policy.value,
                **({"fabricVlan": tenant.fabric_vlan} if tenant.fabric_vlan is not None else {}),
            }
            for name, tenant in cell.tenants.items()
        },
        "storage": {"defaultClass": _default_class(cell), "volumes": _volumes(cell), **_longhorn_settings(cell)},
        "versions": {
            "k3s": cell.versions.k3s,
            "kubevirt": cell.versions.kubevirt,
            "charts": _charts(cell),
            **({"clusterApi": cell.versions.cluster_api} if _has_tenant_clusters(cell) else {}),
            **({"gatewayApi": cell.versions.gateway_api} if cell.gateway is not None else {}),
        },
        **(
            {"metrics": {"storageGib": cell.metrics.storage_gib, "retentionDays": cell.metrics.retention_days}}
            if cell.metrics.enabled
            else {}
        ),
        **_traffic(cell),
        **_instancetypes_in_use(cell),
        **_vm_firmware(cell),
        **_tenant_clusters(cell),
        **_endpoints(cell),
        **_isolated(cell),
    }


def fabric_text(fabric: FabricSpec) -> str:
    """A pool's ``fabric`` in one line for the review: ``ethernet, 8 x ConnectX-7, 1 VF each, mtu 9000,
    topology 3f2a9c01`` (the last part: the first 8 hex digits of a SHA-256 of the whole declared topology)."""
    digest = hashlib.sha256(json.dumps(fabric.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:8]
    mtu = f", mtu {fabric.mtu}" if fabric.mtu is not None else ""
    return (
        f"{fabric.link_type.value}, {len(fabric.rails)} x {fabric.nic_model}, {fabric.vfs_per_nic} VF each{mtu}, "
        f"topology {digest}"
    )


def _endpoints(cell: CellSpec) -> dict[str, Any]:
    """Each model endpoint's autoscaler (``keda`` for a vLLM metric, KServe's ``autoscalerClass``; else ``hpa``) and
    ``minReplicas``, only in regions with endpoints: the fingerprints of other regions stay as they were."""
    endpoints = {
        f"{namespace_of(tenant_name)}/{name}": {
            "autoscaler": "keda" if endpoint.scale_metric.is_vllm else "hpa",
            "minReplicas": endpoint.min_replicas,
            "key": f"tenants.{tenant_name}.modelEndpoints.{name}.scaleMetric",
        }
        for tenant_name, tenant in cell.tenants.items()
        for name, endpoint in tenant.model_endpoints.items()
    }
    return {"modelEndpoints": endpoints} if endpoints else {}


def _isolated(cell: CellSpec) -> dict[str, Any]:
    """Each isolated notebook and endpoint (``<namespace>/<workload>`` -> its ``isolation`` key), only in regions that
    have one: the fingerprints of other regions stay as they were."""
    isolated = {
        f"{namespace_of(tenant_name)}/{name}": {"key": f"tenants.{tenant_name}.{kind}.{name}.isolation"}
        for tenant_name, tenant in cell.tenants.items()
        for kind, workloads in (("notebooks", tenant.notebooks), ("modelEndpoints", tenant.model_endpoints))
        for name, workload in workloads.items()
        if is_isolated(workload, tenant.isolation)
    }
    return {"isolatedWorkloads": isolated} if isolated else {}


def _has_tenant_clusters(cell: CellSpec) -> bool:
    """True when a tenant of ``cell`` has a tenant cluster (the region installs Cluster API)."""
    return any(tenant.tenant_clusters for tenant in cell.tenants.values())


def _tenant_clusters(cell: CellSpec) -> dict[str, Any]:
    """Each tenant cluster (``<namespace>/<cluster>`` -> its config key, removal policy and Kubernetes version),
    only in regions that have one: the fingerprints of other regions stay as they were."""
    clusters = {
        f"{namespace_of(tenant_name)}/{name}": {
            "owner": f"tenants.{tenant_name}.tenantClusters.{name}",
            "removalPolicy": (cluster.removal_policy or tenant.removal_policy).value,
            "kubernetesVersion": cluster.kubernetes_version,
            # None: a ClusterIP API server (no address of a pool)
            "apiAddress": str(cluster.api_server.address) if cluster.api_server.address is not None else None,
        }
        for tenant_name, tenant in cell.tenants.items()
        for name, cluster in tenant.tenant_clusters.items()
    }
    return {"tenantClusters": clusters} if clusters else {}


def _instancetypes_in_use(cell: CellSpec) -> dict[str, Any]:
    """Each gpucell-defined instancetype that VMs use (``kubevirt.instancetypes``, a tenant's ``instancetypes``):
    ``{"instancetypes": {"<kind>/<name>" (or ``<kind>/<namespace>/<name>``): {"size", "key", "vms"}}}``; nothing
    (so other regions' fingerprints stay as they were) when no VM uses one."""
    used: dict[str, dict[str, Any]] = {}
    for tenant_name, tenant in cell.tenants.items():
        for vm_name, vm in tenant.virtual_machines.items():
            ref = vm.instancetype
            if ref is None:
                continue
            if ref.kind is InstancetypeKind.NAMESPACED and ref.name in tenant.instancetypes:
                subject = f"{ref.kind.value}/{namespace_of(tenant_name)}/{ref.name}"
                spec, key = tenant.instancetypes[ref.name], f"tenants.{tenant_name}.instancetypes.{ref.name}"
            elif ref.kind is InstancetypeKind.CLUSTER and ref.name in cell.kubevirt.instancetypes:
                subject = f"{ref.kind.value}/{ref.name}"
                spec, key = cell.kubevirt.instancetypes[ref.name], f"kubevirt.instancetypes.{ref.name}"
            else:
                continue  # KubeVirt's common ones change only with KubeVirt itself
            size = json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True), sort_keys=True)
            entry = used.setdefault(subject, {"size": size, "key": key, "vms": []})
            entry["vms"].append(f"{namespace_of(tenant_name)}/{vm_name}")
    return {"instancetypes": used} if used else {}


_BIOS = {"boot": "bios", "efiPersistent": False, "tpm": "none"}
"""The firmware of a VM that says nothing: BIOS (SeaBIOS), no TPM; every gpucell VM before ``efi`` and ``tpm``."""


def _vm_firmware(cell: CellSpec) -> dict[str, Any]:
    """Each VM's firmware as it boots (its own ``efi``/``tpm``, else its preference's:
    :func:`gpucell.admission.vm_shape.resolve_vm`), for the VMs whose firmware is not :data:`_BIOS`: ``{"vmFirmware":
    {"<namespace>/<vm>": {"boot": "bios" | "efi" | "efi-secure-boot", "efiPersistent", "tpm": "none" | "ephemeral" |
    "persistent", "key"}}}``; nothing when every VM boots BIOS (so the fingerprints of such regions stay as they
    were)."""
    found: dict[str, dict[str, Any]] = {}
    for tenant_name, tenant in cell.tenants.items():
        for vm_name, vm in tenant.virtual_machines.items():
            try:
                shape = resolve_vm(cell.kubevirt, cell.versions.kubevirt, tenant, vm)
            except ShapeError:
                continue  # refused by admission
            efi, tpm = shape.efi, shape.tpm
            firmware = {
                "boot": "bios" if efi is None else "efi-secure-boot" if efi.secure_boot else "efi",
                "efiPersistent": efi is not None and efi.persistent,
                "tpm": "none" if tpm is None else "persistent" if tpm.persistent else "ephemeral",
            }
            if firmware != _BIOS:
                key = f"tenants.{tenant_name}.virtualMachines.{vm_name}"
                found[f"{namespace_of(tenant_name)}/{vm_name}"] = {**firmware, "key": key}
    return {"vmFirmware": found} if found else {}


def _traffic(cell: CellSpec) -> dict[str, Any]:
    """``loadBalancer.announce`` and each LoadBalancer VM's address (``<namespace>/<vm>`` -> its fixed address, or
    ``pool <name>``), only in regions with a ``loadBalancer``: the fingerprints of other regions stay as they were."""
    lb = cell.load_balancer
    if lb is None:
        return {}
    addresses: dict[str, str] = {}
    for tenant_name, tenant in cell.tenants.items():
        for vm_name, vm in tenant.virtual_machines.items():
            service = vm.ssh_service
            if service is None or service.type.value != "LoadBalancer":
                continue
            pool = vm_pool(lb, tenant_name, service.pool)
            addresses[f"{namespace_of(tenant_name)}/{vm_name}"] = (
                str(service.address) if service.address is not None else f"pool {pool}"
            )
    gateway = cell.gateway
    return {
        "loadBalancer": {
            "announce": lb.announce.value,
            "pools": {name: list(pool.blocks) for name, pool in lb.pools.items()},
        },
        "publicAddresses": addresses,
        **(
            {"gateway": {"address": _gateway_address(gateway.address, gateway.pool, gateway.per_tenant)}}
            if gateway is not None
            else {}
        ),
    }


def _gateway_address(address: IPv4Address | None, pool: str, per_tenant: bool) -> str:
    """The Gateway's address as the fingerprint holds it: the fixed one, ``pool <pool>`` (Cilium assigns it) or
    ``pool <pool>, one per tenant`` (``gateway.perTenant``: an address per tenant's Gateway)."""
    if address is not None:
        return str(address)
    return f"pool {pool}, one per tenant" if per_tenant else f"pool {pool}"


def _longhorn_settings(cell: CellSpec) -> dict[str, Any]:
    """``longhornSettings``: each of :data:`LONGHORN_VOLUME_SETTINGS` as the chart gets it (gpucell's value, then
    ``storage.values``; ``None`` when unset), only on a Longhorn cell."""
    if cell.storage.backend is not StorageBackend.LONGHORN:
        return {}
    values = deep_merge(longhorn_values(cell.storage, cell.node_pools), cell.storage.values)
    settings = values.get("defaultSettings") or {}
    return {"longhornSettings": {name: settings.get(name) for name in LONGHORN_VOLUME_SETTINGS}}


def _default_class(cell: CellSpec) -> str:
    # The class names of gpucell.components.storage; not imported to keep this module free of pulumi_kubernetes
    # resources.
    return "longhorn" if cell.storage.backend is StorageBackend.LONGHORN else "local-path"


def _volumes(cell: CellSpec) -> dict[str, dict[str, Any]]:
    """Every persistent volume gpucell renders: VM disks (DataVolume ``<vm>-root``, ``<vm>-data<N>``) and notebook
    homes (the StatefulSet's claim ``home-<notebook>-0``, or an isolated notebook's VM disk ``<notebook>-data0``)."""
    volumes: dict[str, dict[str, Any]] = {}
    for tenant_name, tenant in cell.tenants.items():
        namespace = namespace_of(tenant_name)
        for vm_name, vm in tenant.virtual_machines.items():
            for index, disk in enumerate(vm.disks):
                claim = f"{vm_name}-root" if index == 0 else f"{vm_name}-data{index - 1}"
                where = "rootDisk" if index == 0 else f"dataDisks[{index - 1}]"
                volumes[f"{namespace}/{claim}"] = {
                    "storageClass": disk.storage_class,
                    "key": f"tenants.{tenant_name}.virtualMachines.{vm_name}.{where}.storageClass",
                    "owner": f"tenants.{tenant_name}.virtualMachines.{vm_name}",
                    "removalPolicy": (vm.removal_policy or tenant.removal_policy).value,
                }
        for notebook_name, notebook in tenant.notebooks.items():
            # An isolated notebook's home is its VM's first data disk (gpucell.admission.isolation.guest_vm).
            home = f"{notebook_name}-data0" if is_isolated(notebook, tenant.isolation) else f"home-{notebook_name}-0"
            volumes[f"{namespace}/{home}"] = {
                "storageClass": notebook.storage_class,
                "key": f"tenants.{tenant_name}.notebooks.{notebook_name}.storageClass",
                "owner": f"tenants.{tenant_name}.notebooks.{notebook_name}",
                "removalPolicy": (notebook.removal_policy or tenant.removal_policy).value,
            }
    return volumes


def _charts(cell: CellSpec) -> dict[str, str]:
    """The Helm charts the cell installs, by their ``versions`` key."""
    versions = cell.versions
    charts = {
        "cilium": versions.cilium,
        "certManager": versions.cert_manager,
        "gpuOperator": versions.gpu_operator,
        "kserve": versions.kserve,
    }
    if cell.storage.backend is StorageBackend.LONGHORN:
        charts["longhorn"] = versions.longhorn
    if cell.gpu_pools(GpuMode.DRA):
        # A 0.x minor of the DRA driver may change its device attributes, classes and gates (docs/decisions/0017).
        charts["draDriver"] = versions.dra_driver
    if cell.metrics.enabled:
        charts["kubePrometheusStack"] = versions.kube_prometheus_stack
    if any(e.scale_metric.is_vllm for t in cell.tenants.values() for e in t.model_endpoints.values()):
        charts["keda"] = versions.keda
    if cell.backups is not None:
        charts["velero"] = versions.velero
    return charts


# -- the rule ----------------------------------------------------------------------------------------------------
def release_line(version: str) -> tuple[int, ...]:
    """The part of a version whose change is a major change: ``(major,)``, or ``(0, minor)`` for ``0.x`` releases
    (semver: anything may change in 0.x). ``release_line("v1.20.3") == (1,)``, ``release_line("v0.20.0") == (0, 20)``.
    """
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] or [0]
    return (0, parts[1]) if parts[0] == 0 and len(parts) > 1 else (parts[0],)


def compare(old: Mapping[str, Any] | None, new: Mapping[str, Any], region: str) -> list[DisruptiveChange]:
    """The disruptive changes from fingerprint ``old`` (deployed) to ``new`` (planned) of ``region``, in a fixed order.

    ``old`` is ``None`` on the region's first deploy: nothing is disruptive then. Missing keys in ``old`` (an
    older fingerprint shape) count as unchanged.
    """
    if old is None:
        return []
    base = f"regions.{region}"
    return [
        *_network(old, new, region, base),
        *_cilium(old, new, region, base),
        *_nodes(old, new, region, base),
        *_storage(old, new, region, base),
        *_versions(old, new, region, base),
        *_metrics(old, new, region, base),
        *_addresses(old, new, region, base),
        *_resized(old, new, region, base),
        *_firmware(old, new, region, base),
        *_clusters(old, new, region, base),
        *_pools(old, new, region, base),
        *_endpoint_autoscalers(old, new, region, base),
        *_isolation(old, new, region, base),
        *_fabric_vlans(old, new, region, base),
    ]


def refused_together(changes: Iterable[DisruptiveChange]) -> list[str]:
    """Lines for what no acknowledgement allows: more than one server removed from a region in one run (etcd
    reconfigures one member at a time; two at once can cost the quorum), and each change of
    :data:`UNACKNOWLEDGEABLE` (a tenant cluster's Kubernetes skipping a minor or going back). Empty when nothing is
    refused."""
    removed: dict[str, list[str]] = {}
    lines: list[str] = []
    for change in changes:
        if change.change is Change.SERVER_REMOVED and change.subject is not None:
            removed.setdefault(change.region, []).append(change.subject)
        if change.change in UNACKNOWLEDGEABLE:
            lines.append(f"{change.key}: {change.summary()} cannot be applied ({change.effect})")
    return [
        f"regions.{region}.nodePools: removes {len(hosts)} servers in one run ({', '.join(hosts)}); remove one "
        f"server per pulumi up (keep {hosts[0]} in the config, pulumi up, then remove the next)"
        for region, hosts in removed.items()
        if len(hosts) > 1
    ] + lines


SINGLE_STEP_UPGRADES: dict[str, tuple[str, str]] = {
    "k3s": (
        "k3s",
        "Kubernetes allows one minor release between API servers, and k3s's upgrade docs say not to skip intermediate "
        "minor releases (rancher/rke2-docs#132; k3s-io/k3s#9560)",
    ),
    "cilium": (
        "Cilium",
        "its upgrade guide tests consecutive minor releases only; cilium/cilium#46608: after 1.16 -> 1.19 the agent "
        "no longer started on new nodes",
    ),
    "longhorn": (
        "Longhorn",
        "its manager refuses an upgrade that skips a minor release, and the chart's pre-upgrade hook fails the Helm "
        "upgrade (longhorn/longhorn#9569)",
    ),
    "kubevirt": (
        "KubeVirt",
        "updates are supported from the previous minor release only; the maintainers test N-1 -> N "
        "(kubevirt/kubevirt#13783)",
    ),
    "certManager": (
        "cert-manager",
        "its upgrade guide says to upgrade one minor release at a time, to the latest patch release, each with its own "
        "upgrade notes (cert-manager/website#852)",
    ),
    "clusterApi": (
        "Cluster API",
        "it supports upgrades of up to three minor releases (N-3 -> N) and plans its API removals on that; clusterctl "
        "refuses a longer skip (kubernetes-sigs/cluster-api#12017)",
    ),
}
"""Component (``versions`` key) -> (name, why) of components upgraded a bounded number of minor releases at a time
(:data:`SKIP_LEVELS`, one unless listed)."""
SKIP_LEVELS: dict[str, int] = {"clusterApi": 3}
"""Minor releases one upgrade may cross, for the components of :data:`SINGLE_STEP_UPGRADES` that allow more than one:
Cluster API supports N-3 -> N (kubernetes-sigs/cluster-api#12017, its book's "Skip-level upgrades")."""


NO_DOWNGRADES: dict[str, tuple[str, str]] = {
    "k3s": (
        "k3s",
        "Kubernetes supports no downgrade of a minor release (its version skew policy), and a k3s downgrade stops at "
        "the first node, left NotReady (rancher/system-upgrade-controller#212)",
    ),
    "longhorn": (
        "Longhorn",
        "Longhorn does not support downgrades at all, not even to an earlier patch release: its manager refuses to "
        "start on data of a newer release (longhorn/longhorn#5131, #9291)",
    ),
    "kubevirt": (
        "KubeVirt",
        "an older release's operator does not roll KubeVirt back: the update gets stuck at the KubeVirt CR "
        "(kubevirt/kubevirt#4797), and downgrades are not officially supported (kubevirt/kubevirt#12002, #15018)",
    ),
    "gatewayApi": (
        "the Gateway API CRDs",
        "from v1.5.0 on, their safe-upgrades ValidatingAdmissionPolicy denies installing CRDs of an earlier release "
        '(kubernetes-sigs/gateway-api#4165; hcloud-k8s/terraform-hcloud-kubernetes#349: "Installing CRDs with '
        'version before v1.5.0 is prohibited by default"), so the run stops half way',
    ),
}
"""Component (``versions`` key) -> (name, why) of components that cannot go back to an earlier release (or below
their :data:`DOWNGRADE_FLOORS` once deployed at or above it)."""
MINOR_DOWNGRADES_ONLY = frozenset({"k3s"})
"""Components of :data:`NO_DOWNGRADES` that may go back to an earlier patch release of the same minor (Kubernetes
patch releases of one minor are interchangeable), not to an earlier minor."""
DOWNGRADE_FLOORS: dict[str, tuple[int, int, int]] = {"gatewayApi": (1, 5, 0)}
"""Components of :data:`NO_DOWNGRADES` that may go back, but not from this release or later to one before it: the
Gateway API bundle's safe-upgrades policy, shipped since v1.5.0, allows a patch downgrade within v1.5."""
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def _release_of(version: str) -> tuple[int, int, int] | None:
    found = _RELEASE.match(version)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def _downgraded(old: Mapping[str, Any], new: Mapping[str, Any], region: str) -> tuple[list[str], set[str]]:
    """Lines for the components of :data:`NO_DOWNGRADES` planned at an earlier release than deployed, and their
    keys."""
    lines: list[str] = []
    keys: set[str] = set()
    for key, (name, why) in NO_DOWNGRADES.items():
        was, now = _component_version(old, key), _component_version(new, key)
        before, after = _release_of(was or ""), _release_of(now or "")
        if before is None or after is None or after >= before:
            continue
        if key in MINOR_DOWNGRADES_ONLY and after[:2] == before[:2]:
            continue
        floor = DOWNGRADE_FLOORS.get(key)
        if floor is None or after < floor <= before:
            keys.add(key)
            keep = was if floor is None else "v" + ".".join(str(part) for part in floor)
            if key in MINOR_DOWNGRADES_ONLY:
                keep = f"a {before[0]}.{before[1]} release"
            lines.append(
                f"regions.{region}.versions.{key}: {was} -> {now} is a downgrade of {name}: {why}; keep "
                f"versions.{key} at {keep} or later"
            )
    return lines, keys


def _minor_of(version: str) -> tuple[int, int] | None:
    found = re.match(r"^v?(\d+)\.(\d+)\.", version)
    return (int(found[1]), int(found[2])) if found else None


def skipped_releases(old: Mapping[str, Any] | None, new: Mapping[str, Any], region: str) -> list[str]:
    """Lines for what no acknowledgement allows in one run: a component of :data:`SINGLE_STEP_UPGRADES` moved more
    minor releases (up or down) than :data:`SKIP_LEVELS` allows (one unless listed) within its major from fingerprint
    ``old`` (deployed) to ``new``; each names the release to go through first. A component of
    :data:`NO_DOWNGRADES` planned at an earlier release than deployed (any, a patch release too) gets one line naming
    the release to keep instead. Empty on a first deploy or when a version is not ``MAJOR.MINOR.PATCH``."""
    if old is None:
        return []
    lines, downgraded = _downgraded(old, new, region)
    for key, (name, why) in SINGLE_STEP_UPGRADES.items():
        if key in downgraded:
            continue
        was, now = _component_version(old, key), _component_version(new, key)
        before, after = _minor_of(was or ""), _minor_of(now or "")
        levels = SKIP_LEVELS.get(key, 1)
        if before is None or after is None or before[0] != after[0] or abs(after[1] - before[1]) <= levels:
            continue
        step = f"{before[0]}.{before[1] + (levels if after > before else -levels)}"
        lines.append(
            f"regions.{region}.versions.{key}: {was} -> {now} skips {name} {step}: {why}; set versions.{key} to the "
            f"latest {step} release first, pulumi up, then {now}"
        )
    return lines


def _component_version(fingerprint: Mapping[str, Any], key: str) -> str | None:
    versions = fingerprint.get("versions") or {}
    value = versions.get(key) or (versions.get("charts") or {}).get(key)
    return str(value) if value is not None else None


def removed_regions(deployed: Iterable[str], planned: Iterable[str]) -> list[DisruptiveChange]:
    """A :data:`Change.REGION_REMOVED` for every region deployed but no longer planned."""
    planned_set = set(planned)
    return [
        DisruptiveChange(Change.REGION_REMOVED, region, None, f"regions.{region}", f"region {region}", "removed")
        for region in sorted(set(deployed) - planned_set)
    ]


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in sorted(value.items())) or "chart defaults"
    return str(value)


def _addresses(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """A changed announcement mode, and every LoadBalancer VM whose address (fixed, or its pool) changed or went."""
    changes: list[DisruptiveChange] = []
    before, after = (old.get("loadBalancer") or {}).get("announce"), (new.get("loadBalancer") or {}).get("announce")
    if before is not None and before != after:
        changes.append(
            DisruptiveChange(
                Change.LOAD_BALANCER_ANNOUNCE, region, None, f"{base}.loadBalancer.announce", before, _text(after)
            )
        )
    was, now = old.get("publicAddresses") or {}, new.get("publicAddresses") or {}
    for subject, address in was.items():
        if now.get(subject) != address:
            namespace, vm = subject.split("/", 1)
            key = f"{base}.tenants.{namespace.removeprefix('tenant-')}.virtualMachines.{vm}.sshService.address"
            changes.append(
                DisruptiveChange(Change.PUBLIC_ADDRESS, region, subject, key, address, now.get(subject, "removed"))
            )
    return changes


def _resized(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """Every instancetype whose size changed while a VM that used it is still declared with it."""
    was, now = old.get("instancetypes") or {}, new.get("instancetypes") or {}
    changes: list[DisruptiveChange] = []
    for subject, before in sorted(was.items()):
        after = now.get(subject)
        if after is None or after.get("size") == before.get("size"):
            continue
        if set(before.get("vms") or []) & set(after.get("vms") or []):
            changes.append(
                DisruptiveChange(
                    Change.INSTANCETYPE_RESIZED,
                    region,
                    subject,
                    f"{base}.{after.get('key')}",
                    str(before.get("size")),
                    str(after.get("size")),
                )
            )
    return changes


def _deployed_vms(fingerprint: Mapping[str, Any]) -> set[str]:
    """``<namespace>/<vm>`` of every VM a fingerprint holds: the owners of its disks (every VM has a root disk)."""
    vms = set((fingerprint.get("vmFirmware") or {}).keys())
    for volume in ((fingerprint.get("storage") or {}).get("volumes") or {}).values():
        parts = str(volume.get("owner", "")).split(".")
        if len(parts) == 4 and parts[0] == "tenants" and parts[2] == "virtualMachines":
            vms.add(f"{namespace_of(parts[1])}/{parts[3]}")
    return vms


def _firmware_text(firmware: Mapping[str, Any]) -> str:
    persistent = ", persistent NVRAM" if firmware.get("efiPersistent") else ""
    return f"{firmware.get('boot')}{persistent}, TPM {firmware.get('tpm')}"


def _firmware(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """Every VM deployed and still declared whose boot firmware changed (BIOS, EFI, EFI with Secure Boot), or that
    loses persistent EFI or TPM state. A VM missing from ``vmFirmware`` boots :data:`_BIOS` (and every VM of a
    fingerprint older than the key did)."""
    was, now = old.get("vmFirmware") or {}, new.get("vmFirmware") or {}
    changes: list[DisruptiveChange] = []
    for subject in sorted(_deployed_vms(old) & _deployed_vms(new)):
        before, after = {**_BIOS, **was.get(subject, {})}, {**_BIOS, **now.get(subject, {})}
        lost_state = (before["efiPersistent"] and not after["efiPersistent"]) or (
            before["tpm"] == "persistent" and after["tpm"] != "persistent"
        )
        if before["boot"] != after["boot"] or lost_state:
            namespace, vm = subject.split("/", 1)
            key = after.get("key") or f"tenants.{namespace.removeprefix('tenant-')}.virtualMachines.{vm}"
            changes.append(
                DisruptiveChange(
                    Change.VM_FIRMWARE, region, subject, f"{base}.{key}", _firmware_text(before), _firmware_text(after)
                )
            )
    return changes


def _clusters(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """A tenant cluster removed (its Cluster's deletion deletes its VMs, their disks and its etcd: ``dataDeleted``,
    unless it was ``retain``), and a Kubernetes version that goes back or skips a minor (refused whatever is
    acknowledged, :data:`UNACKNOWLEDGEABLE`)."""
    was, now = old.get("tenantClusters") or {}, new.get("tenantClusters") or {}
    changes: list[DisruptiveChange] = []
    for subject, before in sorted(was.items()):
        after = now.get(subject)
        key = f"{base}.{before.get('owner')}"
        if after is None:
            if before.get("removalPolicy") != "retain":
                changes.append(
                    DisruptiveChange(Change.DATA_DELETED, region, subject, key, f"tenant cluster {subject}", "removed")
                )
            continue
        if "apiAddress" in before and before["apiAddress"] != after.get("apiAddress"):
            changes.append(
                DisruptiveChange(
                    Change.TENANT_CLUSTER_API_ADDRESS,
                    region,
                    subject,
                    f"{key}.apiServer",
                    _text(before["apiAddress"]),
                    _text(after.get("apiAddress")),
                )
            )
        old_minor, new_minor = _minor(str(before.get("kubernetesVersion"))), _minor(str(after.get("kubernetesVersion")))
        if (
            old_minor is not None
            and new_minor is not None
            and (new_minor < old_minor or new_minor[1] - old_minor[1] > 1)
        ):
            changes.append(
                DisruptiveChange(
                    Change.TENANT_CLUSTER_VERSION,
                    region,
                    subject,
                    f"{key}.kubernetesVersion",
                    str(before.get("kubernetesVersion")),
                    str(after.get("kubernetesVersion")),
                )
            )
    return changes


def _network(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    before, after = old.get("network") or {}, new.get("network") or {}
    kinds = (
        ("podCidr", Change.POD_CIDR),
        ("podCidrMaskSize", Change.POD_CIDR_MASK_SIZE),
        ("serviceCidr", Change.SERVICE_CIDR),
        ("clusterDns", Change.CLUSTER_DNS),
    )
    changes = [
        DisruptiveChange(kind, region, None, f"{base}.network.{key}", _text(before[key]), _text(after.get(key)))
        for key, kind in kinds
        if key in before and before[key] != after.get(key)
    ]
    # On or off only: between arp and bgp the address stays served by kube-vip.
    if "apiVip" in before and (before["apiVip"] is None) != (after.get("apiVip") is None):
        changes.append(
            DisruptiveChange(
                Change.API_VIP,
                region,
                None,
                f"{base}.network.apiVip",
                _text(before["apiVip"]),
                _text(after.get("apiVip")),
            )
        )
    return changes


def _cilium(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    before, after = old.get("cilium") or {}, new.get("cilium") or {}
    values = f"{base}.cilium.values"
    kinds = (
        ("kubeProxyReplacement", Change.KUBE_PROXY_REPLACEMENT, f"{values}.kubeProxyReplacement"),
        ("routing", Change.CILIUM_ROUTING, f"{values}.routingMode"),
        ("ipamMode", Change.CILIUM_IPAM, f"{values}.ipam.mode"),
    )
    return [
        DisruptiveChange(kind, region, None, key, _text(before[name]), _text(after.get(name)))
        for name, kind, key in kinds
        if name in before and before[name] != after.get(name)
    ]


def _nodes(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    before, after = old.get("nodes") or {}, new.get("nodes") or {}
    changes: list[DisruptiveChange] = []
    for host, was in before.items():
        now = after.get(host)
        if now is None and was.get("removalPolicy") == "retain":
            continue  # nothing runs: gpucell only forgets the node, k3s keeps running
        if now is None:
            kind = Change.SERVER_REMOVED if was.get("role") == NodeRole.SERVER.value else Change.NODE_REMOVED
            changes.append(
                DisruptiveChange(
                    kind,
                    region,
                    host,
                    f"{base}.nodePools.{was.get('pool')}.hosts",
                    f"{was.get('role')} {host}",
                    "removed",
                )
            )
            continue
        key = f"{base}.nodePools.{now.get('pool')}"
        if (was.get("role"), was.get("pool")) != (now.get("role"), now.get("pool")):
            changes.append(
                DisruptiveChange(
                    Change.NODE_ROLE,
                    region,
                    host,
                    f"{key}.hosts",
                    f"{was.get('pool')} ({was.get('role')})",
                    f"{now.get('pool')} ({now.get('role')})",
                )
            )
        if (
            now.get("role") == was.get("role") == NodeRole.SERVER.value
            and "address" in was
            and was["address"] != now.get("address")
        ):
            changes.append(
                DisruptiveChange(
                    Change.SERVER_ADDRESS,
                    region,
                    host,
                    f"{key}.hosts",
                    _text(was["address"]),
                    _text(now.get("address")),
                )
            )
        for name, kind in (
            ("gpuMode", Change.GPU_MODE),
            ("migConfig", Change.MIG_CONFIG),
            ("vgpuProfile", Change.VGPU_PROFILE),
            ("fabric", Change.FABRIC),
        ):
            if was.get(name) != now.get(name) and (was.get(name) is not None or now.get(name) is not None):
                changes.append(
                    DisruptiveChange(kind, region, host, f"{key}.{name}", _text(was.get(name)), _text(now.get(name)))
                )
    return changes


def _storage(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    before, after = old.get("storage") or {}, new.get("storage") or {}
    changes: list[DisruptiveChange] = []
    if "defaultClass" in before and before["defaultClass"] != after.get("defaultClass"):
        changes.append(
            DisruptiveChange(
                Change.STORAGE_CLASS,
                region,
                "default",
                f"{base}.storage.backend",
                _text(before["defaultClass"]),
                _text(after.get("defaultClass")),
            )
        )
    was_set, now_set = before.get("longhornSettings"), after.get("longhornSettings")
    if isinstance(was_set, Mapping) and isinstance(now_set, Mapping):
        for name in LONGHORN_VOLUME_SETTINGS:
            if name in was_set and was_set.get(name) != now_set.get(name):
                changes.append(
                    DisruptiveChange(
                        Change.LONGHORN_VOLUME_SETTING,
                        region,
                        name,
                        f"{base}.storage.values.defaultSettings.{name}"
                        if name != "taintToleration"
                        else f"{base}.nodePools",
                        _text(was_set.get(name)),
                        _text(now_set.get(name)),
                    )
                )
    old_volumes, new_volumes = before.get("volumes") or {}, after.get("volumes") or {}
    for tenant, was in sorted((old.get("tenants") or {}).items()):
        if tenant not in (new.get("tenants") or {}) and was.get("removalPolicy") != "retain":
            changes.append(
                DisruptiveChange(
                    Change.DATA_DELETED,
                    region,
                    was.get("namespace"),
                    f"{base}.tenants.{tenant}",
                    f"namespace {was.get('namespace')}",
                    "removed",
                )
            )
    for claim, was in sorted(old_volumes.items()):
        now = new_volumes.get(claim)
        if now is None and "owner" in was and was.get("removalPolicy") != "retain":
            changes.append(
                DisruptiveChange(
                    Change.DATA_DELETED, region, claim, f"{base}.{was['owner']}", f"volume {claim}", "removed"
                )
            )
            continue
        if now is not None and was.get("storageClass") != now.get("storageClass"):
            default = f"default ({_text(after.get('defaultClass'))})"
            changes.append(
                DisruptiveChange(
                    Change.STORAGE_CLASS,
                    region,
                    claim,
                    f"{base}.{now.get('key')}",
                    _text(was.get("storageClass")) if was.get("storageClass") else default,
                    _text(now.get("storageClass")) if now.get("storageClass") else default,
                )
            )
    return changes


def _metrics(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """A smaller ``metrics.storageGib`` than deployed (growing converges: :mod:`gpucell.components.metrics` expands the
    claim)."""
    before, after = old.get("metrics") or {}, new.get("metrics") or {}
    changes: list[DisruptiveChange] = []
    for name, kind, unit in (
        ("storageGib", Change.METRICS_STORAGE, "GiB"),
        ("retentionDays", Change.METRICS_RETENTION, "days"),
    ):
        was, now = before.get(name), after.get(name)
        if isinstance(was, int) and isinstance(now, int) and now < was:
            changes.append(
                DisruptiveChange(kind, region, None, f"{base}.metrics.{name}", f"{was} {unit}", f"{now} {unit}")
            )
    return changes


def _minor(version: str) -> tuple[int, int] | None:
    match = _K3S_MINOR.match(version)
    return (int(match[1]), int(match[2])) if match else None


def _versions(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    before, after = old.get("versions") or {}, new.get("versions") or {}
    changes: list[DisruptiveChange] = []
    was, now = _minor(str(before.get("k3s", ""))), _minor(str(after.get("k3s", "")))
    if was is not None and now is not None and (now < was or now[0] != was[0] or now[1] - was[1] > 1):
        changes.append(
            DisruptiveChange(
                Change.K3S_MINOR, region, None, f"{base}.versions.k3s", str(before["k3s"]), str(after["k3s"])
            )
        )
    old_charts, new_charts = before.get("charts") or {}, after.get("charts") or {}
    for chart, version in sorted(old_charts.items()):
        planned = new_charts.get(chart)
        if planned is not None and release_line(str(version)) != release_line(str(planned)):
            changes.append(
                DisruptiveChange(
                    Change.CHART_MAJOR, region, chart, f"{base}.versions.{chart}", str(version), str(planned)
                )
            )
    return changes


# -- acknowledgements --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    """Disruptive changes sorted by whether the stack config acknowledges them."""

    refused: list[DisruptiveChange]
    """Changes no acknowledgement matches: ``pulumi up`` stops on them."""
    acknowledged: list[tuple[DisruptiveChange, Acknowledgement]]
    """Changes with the first acknowledgement that matches them."""
    stale: list[tuple[int, Acknowledgement]]
    """(index in ``gpucell:acknowledge``, entry) of acknowledgements that match nothing in a judged region."""


def judge(
    changes: list[DisruptiveChange], acknowledgements: list[Acknowledgement], judged_regions: Iterable[str]
) -> Judgement:
    """Match ``changes`` against ``acknowledgements``.

    ``judged_regions`` are the regions whose deployed state is known (a fingerprint was read back, or the region
    was removed): only there can an acknowledgement be stale. On a first deploy and in the offline plan, where
    nothing deployed is known, acknowledgements are kept for later.
    """
    judged = set(judged_regions)
    refused: list[DisruptiveChange] = []
    acknowledged: list[tuple[DisruptiveChange, Acknowledgement]] = []
    used: set[int] = set()
    for change in changes:
        if change.change in UNACKNOWLEDGEABLE:
            continue  # refused whatever is acknowledged (refused_together)
        match = next(((i, a) for i, a in enumerate(acknowledgements) if a.matches(change)), None)
        if match is None:
            refused.append(change)
        else:
            acknowledged.append((change, match[1]))
            used.update(i for i, a in enumerate(acknowledgements) if a.matches(change))
    stale = [(i, a) for i, a in enumerate(acknowledgements) if i not in used and a.region in judged]
    return Judgement(refused=refused, acknowledged=acknowledged, stale=stale)


class StackAcknowledgements(SpecModel):
    """The ``gpucell:acknowledge`` stack config key, as a model so that errors read ``acknowledge[0].change``."""

    acknowledge: list[Acknowledgement] = []
    """Disruptive changes the next ``pulumi up`` may apply, e.g.
    ``[{change: podCidr, region: fra1, reason: "maintenance window CHG-1234"}]``."""


def _addresses_of(blocks: Iterable[str]) -> list[tuple[int, int]]:
    """``(first, last)`` of each block as integers (blocks that do not parse are left out: admission refuses them)."""
    spans: list[tuple[int, int]] = []
    for text in blocks:
        try:
            block = parse_block(str(text))
        except ValueError:
            continue
        spans.append((int(block.first), int(block.last)))
    return spans


def _covers(new: list[tuple[int, int]], old: list[tuple[int, int]]) -> bool:
    """True when every address of the ``old`` spans is in one of the ``new`` spans (merged, so that two adjacent
    blocks cover a span across their border)."""
    merged: list[list[int]] = []
    for first, last in sorted(new):
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return all(any(a <= first and last <= b for a, b in merged) for first, last in old)


def _pools(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """Every pool that shrinks or moves (an address of its deployed blocks is no longer in it) while a Service keeps
    an address Cilium assigned from it (a VM's ``sshService`` or the Gateway without a fixed address; widening a pool
    reassigns nothing since cilium/cilium#41122, in the pinned Cilium), and the Gateway's address (fixed, or its
    pool)."""
    changes: list[DisruptiveChange] = []
    was = (old.get("loadBalancer") or {}).get("pools") or {}
    now = (new.get("loadBalancer") or {}).get("pools") or {}
    assigned: set[str] = set()
    for subject, address in (old.get("publicAddresses") or {}).items():
        if str(address).startswith("pool ") and (new.get("publicAddresses") or {}).get(subject) == address:
            assigned.add(str(address).removeprefix("pool "))
    gateway_was, gateway_now = (old.get("gateway") or {}).get("address"), (new.get("gateway") or {}).get("address")
    if gateway_was is not None and gateway_was == gateway_now and str(gateway_was).startswith("pool "):
        assigned.add(str(gateway_was).removeprefix("pool ").split(",")[0])
    for pool, blocks in sorted(was.items()):
        if pool in now and pool in assigned and not _covers(_addresses_of(now[pool]), _addresses_of(blocks)):
            changes.append(
                DisruptiveChange(
                    Change.LOAD_BALANCER_POOL,
                    region,
                    pool,
                    f"{base}.loadBalancer.pools.{pool}.blocks",
                    ", ".join(map(str, blocks)),
                    ", ".join(map(str, now[pool])),
                )
            )
    if gateway_was is not None and gateway_now is not None and gateway_was != gateway_now:
        changes.append(
            DisruptiveChange(
                Change.GATEWAY_ADDRESS, region, None, f"{base}.gateway.address", str(gateway_was), str(gateway_now)
            )
        )
    return changes


def _endpoint_autoscalers(
    old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str
) -> list[DisruptiveChange]:
    """Every model endpoint whose autoscaler moves from an HPA to KEDA, or from KEDA with ``minReplicas: 0`` (so
    possibly at zero) to an HPA."""
    was, now = old.get("modelEndpoints") or {}, new.get("modelEndpoints") or {}
    changes: list[DisruptiveChange] = []
    for subject, before in sorted(was.items()):
        after = now.get(subject)
        if after is None or before.get("autoscaler") == after.get("autoscaler"):
            continue
        if after.get("autoscaler") == "keda":
            kind = Change.ENDPOINT_HPA_TO_KEDA
        elif before.get("minReplicas") == 0:
            kind = Change.ENDPOINT_KEDA_TO_HPA
        else:
            continue
        old_text = f"{before.get('autoscaler')} (minReplicas {before.get('minReplicas')})"
        new_text = f"{after.get('autoscaler')} (minReplicas {after.get('minReplicas')})"
        changes.append(DisruptiveChange(kind, region, subject, f"{base}.{after.get('key')}", old_text, new_text))
    return changes


def _declared_workloads(fingerprint: Mapping[str, Any]) -> set[str]:
    """``<namespace>/<workload>`` of every notebook (the owner of a home volume) and endpoint a fingerprint holds."""
    declared = set(fingerprint.get("modelEndpoints") or {})
    for volume in ((fingerprint.get("storage") or {}).get("volumes") or {}).values():
        parts = str(volume.get("owner", "")).split(".")
        if len(parts) == 4 and parts[0] == "tenants" and parts[2] == "notebooks":
            declared.add(f"{namespace_of(parts[1])}/{parts[3]}")
    return declared


def _isolation(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """Every notebook and endpoint deployed and still declared whose isolation changed (``container`` <-> ``vm``):
    it is replaced by its other form (:data:`EFFECTS`)."""
    was, now = old.get("isolatedWorkloads") or {}, new.get("isolatedWorkloads") or {}
    deployed, declared = _declared_workloads(old), _declared_workloads(new)
    changes: list[DisruptiveChange] = []
    for subject in sorted(deployed & declared):
        if (subject in was) == (subject in now):
            continue
        key = (now.get(subject) or was[subject])["key"]
        before, after = ("vm", "container") if subject in was else ("container", "vm")
        changes.append(DisruptiveChange(Change.WORKLOAD_ISOLATION, region, subject, f"{base}.{key}", before, after))
    return changes


def _fabric_vlans(old: Mapping[str, Any], new: Mapping[str, Any], region: str, base: str) -> list[DisruptiveChange]:
    """Every tenant deployed with a ``fabricVlan`` that changes or goes (its running VMs' VFs keep the old VLAN,
    :data:`EFFECTS`); a tenant's first VLAN tags no running VF and is not disruptive. The subject is the tenant."""
    was, now = old.get("tenants") or {}, new.get("tenants") or {}
    return [
        DisruptiveChange(
            Change.FABRIC_VLAN,
            region,
            tenant,
            f"{base}.tenants.{tenant}.fabricVlan",
            _text(was[tenant]["fabricVlan"]),
            _text(now[tenant].get("fabricVlan")),
        )
        for tenant in sorted(set(was) & set(now))
        if was[tenant].get("fabricVlan") is not None and was[tenant]["fabricVlan"] != now[tenant].get("fabricVlan")
    ]
