"""Storage: the cell's one default StorageClass, where PVCs and so VM disks live.

Two backends (``storage.backend``):

- ``local-path``: k3s's bundled local-path-provisioner and its StorageClass ``local-path`` (node-local
  directories, ``WaitForFirstConsumer``; lab use). k3s itself marks the class default and re-applies its
  ``local-storage.yaml`` manifest on every server start (k3s-io/k3s#3441, #4083), so the default survives
  restarts and upgrades. We register a server-side-apply patch asserting the same annotation: it shares
  ownership of the field with k3s (same value, so no conflict), fails loudly if the class is missing, and
  gives consumers a resource to wait on.
- ``longhorn``: the Longhorn Helm chart (https://charts.longhorn.io) in ``longhorn-system``, whose class
  ``longhorn`` is default. k3s is started with ``disable: [local-storage]`` on a Longhorn cell (see
  :mod:`gpucell.k3s._scripts`); patching ``local-path`` to non-default instead would be undone by k3s on
  its next restart, leaving two defaults. Key paths checked against the chart's ``values.yaml``
  (longhorn/longhorn v1.12.1 ``chart/values.yaml``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release
from pulumi_kubernetes.storage.v1 import StorageClassPatch

from gpucell._component import CellComponent
from gpucell.components._chart import ChartSource, helm_release
from gpucell.components.platform_tolerations import longhorn_taint_toleration, worker_pool_tolerations
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.platform import StorageBackend, StorageSpec
from gpucell.spec.pools import NodePool
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "DEFAULT_CLASS_ANNOTATION",
    "LOCAL_PATH_CLASS",
    "LONGHORN_CHART",
    "LONGHORN_CLASS",
    "LONGHORN_NAMESPACE",
    "Storage",
    "StorageArgs",
    "longhorn_values",
]

LONGHORN_CHART = ChartSource("longhorn", "https://charts.longhorn.io")
"""Longhorn's Helm repository and chart name."""
LONGHORN_NAMESPACE = "longhorn-system"
"""Namespace of Longhorn (the chart's documented namespace)."""
LONGHORN_CLASS = "longhorn"
"""Name of the chart's default StorageClass."""
LOCAL_PATH_CLASS = "local-path"
"""Name of k3s's bundled local-path StorageClass."""
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
"""The annotation that makes a StorageClass the cluster default (Kubernetes "Change the default
StorageClass")."""


@dataclass(frozen=True)
class StorageArgs:
    """Inputs of :class:`Storage`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness). The ``local-path`` backend is k3s's own
    provisioner: on another cluster, use ``longhorn``."""
    spec: StorageSpec = field(default_factory=StorageSpec)
    """The ``storage`` section: backend, Longhorn replicas and chart ``values``. Defaults to ``local-path``."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: Longhorn tolerates the taints of every gpu and cpu pool (where volumes are used).
    Defaults to none."""
    version: str = Versions().longhorn
    """Longhorn chart version (``versions.longhorn``); defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the component may do to the Longhorn release (uninstalling it deletes every volume):
    ``protect`` (default), ``retain`` or ``delete``."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> StorageArgs:
        """The storage layer of ``cell`` on ``cluster``: ``storage``, ``nodePools``, ``versions.longhorn`` and the
        region's ``removalPolicy``."""
        return cls(cluster, cell.storage, cell.node_pools, cell.versions.longhorn, cell.removal_policy)


NODE_DRAIN_POLICY = "block-for-eviction-if-contains-last-replica"
"""Longhorn's ``node-drain-policy``: "block-for-eviction-if-contains-last-replica" evicts the last healthy replica
of a volume to another node when its node is drained, then lets the drain go on. The chart's default,
``block-if-contains-last-replica``, holds every drain of such a node on the instance-manager's PodDisruptionBudget
for good (longhorn/longhorn#2639, during a cluster upgrade); options from the chart's ``questions.yaml`` at 1.12.1."""
NODE_DOWN_POD_DELETION_POLICY = "delete-both-statefulset-and-deployment-pod"
"""Longhorn's ``node-down-pod-deletion-policy``: Kubernetes never force-deletes the pods of a dead node, so a
volume stays attached there and the replacement pod cannot start (longhorn/longhorn#1179); with this policy Longhorn
force-deletes the StatefulSet and Deployment pods of a node that is down, and the volume attaches elsewhere. The
chart's default is ``do-nothing``."""

ENGINE_UPGRADES_PER_NODE = 1
"""Longhorn's ``concurrent-automatic-engine-upgrade-per-node-limit``: after an upgrade, Longhorn moves up to this many
volume engines per node at a time to the new default engine image (live for attached volumes). The chart's default,
``0``, never upgrades them ("When the value is 0, Longhorn does not automatically upgrade volume engines",
``values.yaml``/``questions.yaml`` at 1.12.1), and Longhorn's pre-upgrade check then refuses a later upgrade while a
volume still runs an engine older than the new release supports (longhorn/longhorn#5842, #2152). One per node keeps
the live upgrades (each a short I/O pause) apart."""


def longhorn_values(spec: StorageSpec, node_pools: Mapping[str, NodePool]) -> dict[str, Any]:
    """The Longhorn chart values gpucell owns (``storage.values`` is merged over them later).

    - ``persistence.defaultClass: true``: the chart's class ``longhorn`` is the cluster default.
    - ``persistence.defaultClassReplicaCount``: ``storage.replicas`` (integer) for volumes of that class.
    - ``defaultSettings.defaultReplicaCount``: the same count for volumes made outside the class (UI, API).
      Since Longhorn 1.10 this setting holds one value per data engine, as a JSON object of strings (the
      ``values.yaml`` default is ``{"v1":"3","v2":"3"}``), and the chart fails unless it is a string.
    - ``defaultSettings.nodeDrainPolicy``: :data:`NODE_DRAIN_POLICY`, so that a node drained for maintenance while
      it holds a volume's last healthy replica has that replica rebuilt elsewhere first, instead of the drain
      waiting on Longhorn's instance-manager PodDisruptionBudget until its timeout.
    - ``defaultSettings.nodeDownPodDeletionPolicy``: :data:`NODE_DOWN_POD_DELETION_POLICY`, so that a host that
      died lets its StatefulSet and Deployment pods go and their volumes attach elsewhere.
    - ``defaultSettings.concurrentAutomaticEngineUpgradePerNodeLimit``: :data:`ENGINE_UPGRADES_PER_NODE`, so that
      volume engines follow each Longhorn upgrade and the next one is not refused.
    - With tainted gpu or cpu pools (:func:`gpucell.components.platform_tolerations.worker_pool_tolerations`):
      ``longhornManager.tolerations`` and ``longhornDriver.tolerations`` (the chart uses a component's list instead
      of ``global.tolerations``, ``chart/templates/daemonset-sa.yaml`` and ``deployment-driver.yaml``) and
      ``defaultSettings.taintToleration`` for the components Longhorn deploys itself (instance managers, CSI
      plugin, engine images), in ``kubectl taint`` syntax. Longhorn applies a *changed* ``taint-toleration`` only
      when every volume is detached ("the request will be rejected" otherwise, longhorn/longhorn
      ``docs/taint-toleration.md``): taint pools before they hold volumes, or detach them first.
    """
    replicas = spec.replicas
    per_engine = json.dumps({"v1": str(replicas), "v2": str(replicas)}, separators=(",", ":"))
    settings: dict[str, Any] = {
        "defaultReplicaCount": per_engine,
        "nodeDrainPolicy": NODE_DRAIN_POLICY,
        "nodeDownPodDeletionPolicy": NODE_DOWN_POD_DELETION_POLICY,
        "concurrentAutomaticEngineUpgradePerNodeLimit": ENGINE_UPGRADES_PER_NODE,
    }
    values: dict[str, Any] = {
        "persistence": {"defaultClass": True, "defaultClassReplicaCount": replicas},
        "defaultSettings": settings,
    }
    tolerations = worker_pool_tolerations(node_pools)
    if tolerations:
        values["longhornManager"] = {"tolerations": tolerations}
        values["longhornDriver"] = {"tolerations": [dict(t) for t in tolerations]}
        settings["taintToleration"] = longhorn_taint_toleration(tolerations)
    return values


class Storage(CellComponent):
    """The storage layer of one cluster and its single default StorageClass.

    Children, on the provider of ``args.cluster`` and after its ``ready``. ``local-path``: a
    ``kubernetes:storage.k8s.io/v1:StorageClassPatch`` named ``f"{name}-local-path-default"``. ``longhorn``: a
    ``kubernetes:helm.sh/v3:Release`` named ``f"{name}-longhorn"`` (Helm release ``longhorn``, chart version
    ``args.version``); Helm waits for the manager, driver deployer and UI workloads. The release takes
    ``args.removal_policy`` (``protect`` by default).

    Python attributes: ``ready`` (the resources consumers such as CDI depend on before using the class),
    ``access_modes`` and ``volume_mode`` (the PVC shape VM disks should use on this backend):

    - local-path: ``ReadWriteOnce`` + ``Filesystem``; the provisioner makes host directories, so only
      filesystem volumes on one node.
    - Longhorn: ``ReadWriteOnce`` + ``Block``. Longhorn serves raw block volumes (``volumeMode: Block``, its
      "Block Volume" example); a VM disk on a block PVC skips the filesystem and disk-image layers a
      ``Filesystem`` PVC adds, and CDI reserves no filesystem overhead for it. ``ReadWriteMany`` is only
      needed for live migration, which GPU passthrough and vGPU VMs cannot do.
    """

    storage_class_name: pulumi.Output[str]
    """The cell's default StorageClass: ``local-path`` or ``longhorn``; resolves once the storage is ready."""

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Storage", name, opts, args.cluster)
        spec = args.spec
        self.release: Release | None = None
        self.ready: list[pulumi.Resource]
        self.access_modes: list[str] = ["ReadWriteOnce"]
        self.volume_mode: str
        if spec.backend is StorageBackend.LONGHORN:
            class_name = LONGHORN_CLASS
            self.volume_mode = "Block"
            self.release = helm_release(
                f"{name}-longhorn",
                source=LONGHORN_CHART,
                version=args.version,
                namespace=LONGHORN_NAMESPACE,
                values=longhorn_values(spec, args.node_pools),
                overrides=spec.values,
                # Uninstalling Longhorn takes every volume (and so every VM disk) with it.
                opts=self.child(**removal_options(args.removal_policy)),
            )
            self.ready = [self.release]
        else:
            class_name = LOCAL_PATH_CLASS
            self.volume_mode = "Filesystem"
            default_class = StorageClassPatch(
                f"{name}-local-path-default",
                metadata={"name": LOCAL_PATH_CLASS, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
                opts=self.child(),
            )
            self.ready = [default_class]
        # Derived from the ready resources' URNs so that whatever uses the class name also waits for them.
        self.storage_class_name = pulumi.Output.all(*(r.urn for r in self.ready)).apply(lambda _: class_name)
        self.register_outputs({"storageClassName": self.storage_class_name})
