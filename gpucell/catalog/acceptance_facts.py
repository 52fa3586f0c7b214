"""Facts behind a GPU node's acceptance run (burn-in): how long each part takes, what it must reach, which images.

Sources:

- DCGM diagnostic levels, ``dcgmi diag -r <level>`` (DCGM documentation, "dcgmi diag" command-line reference and
  "DCGM Diagnostics" user guide): level 1 "quick deployment checks, normally lasting seconds"; level 2 "medium
  validation, normally lasting approximately two minutes"; level 3 "long hardware diagnostics, normally lasting
  approximately 15 minutes"; level 4 "extended, longer-running hardware diagnostics" (no figure given; gpucell
  budgets an hour). Non-data-center GPUs support level 1 only; NVLink is not used in MIG mode (DCGM 2.0.15 release
  notes), so a MIG node's diagnostics skip its NVLink checks and it runs no all-reduce.
- ``all_reduce_perf`` of NVIDIA/nccl-tests (``-b 1G -e 8G -f 2 -g <gpus>``: four message sizes, 5 warm-up and 20
  timed iterations each by default): each iteration moves ``2 (n - 1) / n`` of the message per GPU; at 8 GiB over
  PCIe (about 25 GB/s) that is about 0.6 s, so the sweep with NCCL's start-up stays within a minute; gpucell budgets
  2 minutes. Its "bus bandwidth" is comparable with the hardware's link bandwidth (nccl-tests
  ``doc/PERFORMANCE.md``), which is what :data:`MIN_BUS_BANDWIDTH_GBPS` is set against.
- the DCGM image is the standalone hostengine image the GPU Operator v26.7.0 chart pins (``values.yaml``
  ``dcgm.repository``/``image``/``version``: ``nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04``), so the
  diagnostics are the DCGM release the operator ships with its driver; nccl-tests has no NVIDIA-published image, and
  CoreWeave's (``ghcr.io/coreweave/nccl-tests``, tags ``<cuda>-devel-<os>-nccl<version>-<build>-<commit>``) is the
  one the community's Kubernetes examples use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ALL_REDUCE_SECONDS",
    "DCGM_IMAGE",
    "DCGM_LEVEL_SECONDS",
    "MIN_BUS_BANDWIDTH_GBPS",
    "NCCL_TESTS_IMAGE",
    "PCIE_MIN_BUS_BANDWIDTH_GBPS",
    "START_SECONDS",
    "acceptance_seconds",
    "min_bus_bandwidth",
]

DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm"
"""DCGM's standalone image (``dcgmi``, ``nv-hostengine``), tagged ``<dcgm>-<build>-<os>``; the tag is
``versions.dcgm``."""
NCCL_TESTS_IMAGE = "ghcr.io/coreweave/nccl-tests"
"""nccl-tests built against CUDA and NCCL (``all_reduce_perf`` on ``PATH``); the tag is ``versions.ncclTests``."""
DCGM_LEVEL_SECONDS: Mapping[int, int] = MappingProxyType({1: 60, 2: 120, 3: 900, 4: 3600})
"""``dcgmi diag -r <level>`` -> its duration as the DCGM docs give it, seconds: level 1 "seconds" (counted as a
minute), level 2 about two minutes, level 3 about 15 minutes, level 4 not given (an hour budgeted)."""
ALL_REDUCE_SECONDS = 120
"""``all_reduce_perf -b 1G -e 8G`` across one node's GPUs, seconds (a bound: see the module docstring)."""
START_SECONDS = 120
"""Pulling the two images and starting the pod on a node that never ran them, seconds (a budget: the DCGM image is
about 1 GB, nccl-tests about 5 GB, at a few hundred MB/s)."""
MIN_BUS_BANDWIDTH_GBPS: Mapping[str, float] = MappingProxyType(
    {
        "A100-SXM4-40GB": 150.0,
        "A100-SXM4-80GB": 150.0,
        "H100-SXM5-80GB": 225.0,
        "H200-SXM-141GB": 225.0,
    }
)
"""Catalog model on an HGX board -> the least ``all_reduce_perf`` average bus bandwidth, GB/s, an acceptance run
takes: half the model's NVLink bandwidth per direction from NVIDIA's data sheets (A100 SXM4: 600 GB/s total, 300 per
direction; H100 SXM5 and H200 SXM: 900 GB/s, 450 per direction). A board whose NVSwitches or Fabric Manager fail
falls back to PCIe (at most about 25-50 GB/s) and fails it plainly; a healthy board reaches well above it."""
PCIE_MIN_BUS_BANDWIDTH_GBPS = 5.0
"""The floor for a model without NVLink between its GPUs (PCIe boards), GB/s: a sixth of a PCIe Gen4 x16 link's 32 GB/s
per direction, low enough for any CPU topology between the GPUs, high enough to catch a link trained down (x1, Gen1)
or peer traffic through a failing switch."""


def min_bus_bandwidth(model: str, hgx: bool) -> float | None:
    """The all-reduce floor of GPU model ``model`` (GB/s): :data:`MIN_BUS_BANDWIDTH_GBPS` for catalogued HGX models,
    :data:`PCIE_MIN_BUS_BANDWIDTH_GBPS` for boards without an HGX baseboard (``hgx`` false), ``None`` for an HGX
    model gpucell has no figure for (the pool must give ``acceptance.minBusBandwidthGBps``)."""
    if model in MIN_BUS_BANDWIDTH_GBPS:
        return MIN_BUS_BANDWIDTH_GBPS[model]
    return None if hgx else PCIE_MIN_BUS_BANDWIDTH_GBPS


def acceptance_seconds(dcgm_level: int | None, *, all_reduce: bool) -> int:
    """Estimated seconds of one node's acceptance run: :data:`START_SECONDS` (image pulls, start-up), plus
    :data:`DCGM_LEVEL_SECONDS` of ``dcgm_level`` (``None``: a VM pool's host checks, no DCGM), plus
    :data:`ALL_REDUCE_SECONDS` with ``all_reduce``."""
    dcgm = DCGM_LEVEL_SECONDS[dcgm_level] if dcgm_level is not None else 0
    return START_SECONDS + dcgm + (ALL_REDUCE_SECONDS if all_reduce else 0)
