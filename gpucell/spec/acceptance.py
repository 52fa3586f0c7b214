"""A GPU pool's acceptance run (burn-in): what must pass on a node before tenants may use it (docs/decisions/0037).

Every GPU pool runs one by default; ``acceptance: {skip: true}`` takes a pool's nodes into service without it.
"""

from __future__ import annotations

from pydantic import Field, StrictBool, StrictInt

from gpucell.spec._base import SpecModel

__all__ = ["ACCEPTANCE_TAINT", "ACCEPTANCE_TOLERATION", "Acceptance"]

ACCEPTANCE_TAINT = "gpucell.io/acceptance"
"""Taint key (effect ``NoSchedule``, no value) of a GPU node whose acceptance run has not passed; no tenant workload
may tolerate it (:data:`gpucell.tenancy.tenant_admission.GPUCELL_TAINTS`)."""
ACCEPTANCE_TOLERATION = {"key": ACCEPTANCE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
"""What tolerates it: the acceptance Job, and the platform components a GPU node needs before its run (GPU Operator
operands, NFD, virt-handler, CDI, Longhorn, the DRA driver's plugin)."""


class Acceptance(SpecModel):
    """A GPU pool's acceptance run. A node that joins, or comes back from a GPU reconfiguration, a quarantine or a
    re-image, keeps the taint ``gpucell.io/acceptance`` (which no tenant may tolerate) until the run passes on it.

    On ``container`` and ``dra`` pools (GPUs on the ``nvidia`` driver) a Job on the node runs DCGM's diagnostics at
    ``dcgmLevel`` and, with ``allReduce`` on a node of more than one GPU without MIG, nccl-tests' ``all_reduce_perf``
    across its GPUs. On ``vm-passthrough`` and ``vm-vgpu`` pools it checks the GPUs from the host (each on the PCI
    bus with the driver its mode binds, its link at full width and speed, no PCIe AER error), so ``dcgmLevel``,
    ``allReduce`` and ``minBusBandwidthGbps`` do not apply there.
    """

    skip: StrictBool = False
    """Take the pool's nodes into service without an acceptance run (a lab, or hardware accepted elsewhere).
    Defaults to false: every GPU pool runs it."""
    dcgm_level: StrictInt = Field(default=2, ge=1, le=4)
    """``dcgmi diag -r <level>``: 1 (seconds), 2 (about two minutes), 3 (about 15 minutes) or 4 (extended; an hour
    budgeted), as the DCGM documentation gives them. Defaults to 2."""
    all_reduce: StrictBool = True
    """Run ``all_reduce_perf`` across the node's GPUs (NVLink/NVSwitch, or PCIe peer traffic) and require
    ``minBusBandwidthGbps``. Defaults to true; not run on one-GPU nodes nor on MIG nodes (NVLink is off in MIG
    mode)."""
    min_bus_bandwidth_gbps: float | None = Field(default=None, gt=0, le=10_000)
    """The least average bus bandwidth ``all_reduce_perf`` must report, GB/s. Defaults to the GPU model's figure
    (:func:`gpucell.catalog.acceptance_facts.min_bus_bandwidth`); required for an HGX model gpucell has none for."""
    timeout_minutes: StrictInt | None = Field(default=None, ge=1, le=1440)
    """How long the run may take before the node counts as failed, minutes. Defaults to twice its estimate
    (DCGM level, all-reduce, image pulls), at least 10."""
