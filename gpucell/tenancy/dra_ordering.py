"""Cross-tenant ordering of DRA claims: VMs on ``dra`` pools wait for the containers that share their pools.

On a ``dra`` pool a GPU serves a container or a VM. The NVIDIA DRA driver withdraws a prepared GPU's VFIO twin from
the ResourceSlice only once the container's claim is prepared, so VMs' claims created in the same ``pulumi up``
could be allocated the same GPUs (docs/decisions/0017-dra-pools.md). Whoever builds workloads of several tenants on
one cell records each container workload that is ready once its claim is prepared, then creates the DRA VMs with
``depends_on`` :meth:`DraClaimOrder.after` their pools. ``gpucell.stacks.program`` does this for stack config.
"""

from __future__ import annotations

from collections.abc import Iterable

import pulumi

from gpucell.admission.placement import Placement

__all__ = ["DraClaimOrder"]


class DraClaimOrder:
    """Container workloads with DRA GPUs, by the ``dra`` pools they may land on, in the order recorded."""

    def __init__(self) -> None:
        self._on_pool: dict[str, list[pulumi.Resource]] = {}

    def record(self, placement: Placement, ready: pulumi.Resource) -> None:
        """Record ``ready`` (a notebook's StatefulSet, an endpoint's InferenceService: ready once its DRA claim is
        prepared) under each pool of ``placement``; a placement without a DRA device class is ignored."""
        if placement.device_class is not None:
            for pool in placement.pools:
                self._on_pool.setdefault(pool, []).append(ready)

    def after(self, pools: Iterable[str]) -> list[pulumi.Resource]:
        """What a DRA VM placed on ``pools`` must wait for: every recorded workload of those pools, once each, in
        recording order (pool by pool)."""
        return list(dict.fromkeys(r for pool in pools for r in self._on_pool.get(pool, [])))
