"""What happens to live objects over a cell's life: when config removes them, and how nodes are taken out of service.

- :class:`RemovalPolicy`: the one per-object key (``removalPolicy``) that says what ``pulumi up`` may do to a
  stateful object once the config no longer has it. Stateful objects default to ``protect``; see
  ``docs/decisions/0009-lifecycle-protection-and-node-identity.md``.
- :class:`Rollout`: how a pool's nodes go through maintenance (a k3s upgrade or restart, a GPU reconfiguration):
  how many at a time and how long each wait may take; see ``docs/decisions/0010-node-maintenance-over-ssh.md``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, StrictInt

from gpucell.spec._base import SpecModel

__all__ = ["HostRemovalPolicy", "RemovalPolicy", "Rollout", "removal_options"]


class RemovalPolicy(StrEnum):
    """What ``pulumi up`` may do to an object (and the data behind it) when the config no longer declares it.

    - ``protect``: Pulumi's ``protect`` option. ``pulumi up`` (and ``pulumi destroy``) refuses to delete the object
      and stops: "unable to delete resource ... as it is currently marked for protection". The default for
      stateful objects.
    - ``retain``: Pulumi's ``retainOnDelete``. Removing the object from the config only drops it from the stack's
      state; it stays in the cluster (or on the machine) with its data, unmanaged.
    - ``delete``: no option. Removing it deletes it, and Kubernetes garbage-collects what it owns (a VM's disks, a
      namespace's PVCs).

    Pulumi stores the option in the stack's state, so changing it is an update of its own: set ``delete`` (or
    ``retain``), run ``pulumi up`` (which changes nothing in the cluster), then remove the object from the config.
    """

    PROTECT = "protect"
    RETAIN = "retain"
    DELETE = "delete"


class HostRemovalPolicy(StrEnum):
    """:class:`RemovalPolicy` of one host, plus ``forget`` for a host whose machine is gone.

    - ``protect``, ``retain``, ``delete``: as :class:`RemovalPolicy` (``delete``: drained, its Node deleted, k3s
      uninstalled over SSH; a server leaves etcd first).
    - ``forget``: nothing is run on the host over SSH any more (its install command is ``retainOnDelete``); removing
      it deletes its Node from a healthy server, and for a server k3s then removes its etcd member (the Node's
      ``etcd.k3s.cattle.io`` finalizer, k3s docs "Removing a server"; a dead member left in etcd blocks every new
      server, k3s-io/k3s#2732), so that a replacement can join. While set, the host is never the control server.
      Set it, ``pulumi up``, then remove the host (docs/operations.md, "A host died").
    """

    PROTECT = "protect"
    RETAIN = "retain"
    DELETE = "delete"
    FORGET = "forget"


def removal_options(policy: RemovalPolicy | HostRemovalPolicy) -> dict[str, Any]:
    """``pulumi.ResourceOptions`` keyword arguments for ``policy``.

    ``protect`` -> ``{"protect": True}``; ``retain`` -> ``{"protect": False, "retain_on_delete": True}``;
    ``delete`` and ``forget`` -> ``{"protect": False}`` (a forgotten host's install command adds
    ``retain_on_delete`` itself, :class:`gpucell.k3s.cluster.K3sCluster`). ``protect`` is always explicit because Pulumi
    children inherit it from their parent when it is unset.
    """
    if policy.value == RemovalPolicy.PROTECT.value:
        return {"protect": True}
    if policy.value == RemovalPolicy.RETAIN.value:
        return {"protect": False, "retain_on_delete": True}
    return {"protect": False}


class Rollout(SpecModel):
    """How a pool's nodes are taken out of service for maintenance: a k3s upgrade or restart, a GPU reconfiguration.

    Each node in turn is cordoned, its workloads evicted (the Eviction API, so PodDisruptionBudgets hold; GPU VMs
    stopped), changed, waited for and uncordoned. Pools go in parallel, servers one at a time before any agent.
    """

    max_unavailable: StrictInt = Field(default=1, ge=1, le=100)
    """Nodes of the pool in maintenance at the same time (count), as in a DaemonSet's rolling update. Defaults to
    1. Server pools accept only 1: etcd members restart one at a time."""
    drain_timeout_minutes: StrictInt = Field(default=15, ge=1, le=1440)
    """How long evicting a node's workloads may take before the run fails with the pods still there, minutes.
    Defaults to 15."""
    gpu_state_timeout_minutes: StrictInt = Field(default=30, ge=1, le=1440)
    """How long a GPU node may take after a change to report its new GPU state (MIG or vGPU state ``success``, the
    new resources advertised, the GPU Operator's pods ready), minutes. Defaults to 30."""
    bake_minutes: StrictInt = Field(default=0, ge=0, le=120)
    """How long each node, back in service after its maintenance, must stay Ready on the pinned k3s version before
    the next node of its window begins, minutes (0 to 120). Its ``-settle`` watches it: a node that is not Ready on
    that version fails the run (the rollout stops there, and the next ``pulumi up`` bakes it again before going on).
    Defaults to 0: no bake, the next node begins at once."""
