"""Plan-time admission: every declared workload must fit the region's GPU inventory and its tenant's quota.

A workload that would sit Pending forever (no pool of its mode and model, more GPUs than one node holds, a MIG
profile no layout offers) or be refused by a ResourceQuota is a config error here, before anything is deployed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from components.errors import SpecError
from components.inventory import GpuOffer, capacity, gpu_offers
from components.placement import Placement, PlacementError, place_container, place_vm

if TYPE_CHECKING:
    from components.spec.cell import CellSpec
    from components.spec.tenancy import TenantSpec

__all__ = ["check_tenants", "placements"]


def placements(cell: CellSpec, tenant: TenantSpec) -> Iterator[tuple[tuple[str, str], Placement, int]]:
    """``((kind key, name), placement, units)`` of every workload of ``tenant``; units count every replica.

    Raises :class:`SpecError` (path relative to the tenant) when a workload fits nowhere.
    """
    offers = gpu_offers(cell.node_pools, cell.effective_mig_strategy.value)
    strategy = cell.effective_mig_strategy.value
    for name, vm in tenant.virtual_machines.items():
        placement = _placed(("virtualMachines", name), lambda vm=vm, name=name: place_vm(name, vm, cell.node_pools,
                                                                                           offers))
        yield ("virtualMachines", name), placement, placement.count
    for name, notebook in tenant.notebooks.items():
        placement = _placed(("notebooks", name), lambda nb=notebook: place_container(nb.gpu, offers, strategy,
                                                                                      "a GPU notebook"))
        yield ("notebooks", name), placement, placement.count
    for name, endpoint in tenant.model_endpoints.items():
        placement = _placed(("modelEndpoints", name), lambda ep=endpoint: place_container(
            ep.gpu, offers, strategy, "a GPU model endpoint"))
        yield ("modelEndpoints", name), placement, placement.count * endpoint.max_replicas


def _placed(where: tuple[str, str], place: object) -> Placement:
    try:
        return place()  # type: ignore[operator]
    except PlacementError as exc:
        raise SpecError((*where, *exc.rel_path), exc.message) from None


def _offered(offers: list[GpuOffer]) -> str:
    return ", ".join(sorted({o.resource for o in offers})) or "none"


_REMOTE_MODEL_SCHEMES = ("hf://", "s3://", "gs://", "https://", "oci://")


def _needs_egress(tenant: TenantSpec) -> tuple[tuple[str, ...], str] | None:
    """The first workload that downloads from outside the cell, as (path, what), or ``None``.

    CDI's importer pods (registry and http disk sources) and KServe's storage initializer run in the tenant's
    namespace, under the tenant's network policies.
    """
    for name, vm in tenant.virtual_machines.items():
        for index, disk in enumerate(vm.disks):
            source = disk.source.registry or disk.source.http
            if source:
                key = "rootDisk" if index == 0 else f"dataDisks[{index - 1}]"
                return ("virtualMachines", name, key, "source"), f"CDI imports {source}"
    for name, endpoint in tenant.model_endpoints.items():
        if endpoint.storage_uri.startswith(_REMOTE_MODEL_SCHEMES):
            return ("modelEndpoints", name, "storageUri"), f"KServe downloads {endpoint.storage_uri}"
    return None


def check_tenants(cell: CellSpec) -> None:
    """Raise :class:`SpecError` at the first workload or quota that does not fit (paths below the region)."""
    offers = gpu_offers(cell.node_pools, cell.effective_mig_strategy.value)
    totals = capacity(offers)
    reserved: dict[str, int] = {}
    for tenant_name, tenant in cell.tenants.items():
        base = ("tenants", tenant_name)
        for resource, count in tenant.quota.gpus.items():
            where = (*base, "quota", "gpus", resource)
            if resource not in totals:
                raise SpecError(where, f"is offered by no pool of the region; offered: {_offered(offers)}")
            reserved[resource] = reserved.get(resource, 0) + count
            if reserved[resource] > totals[resource] and not cell.allow_gpu_overcommit:
                raise SpecError(where, f"tenants reserve {reserved[resource]} {resource} in all, the region has "
                                f"{totals[resource]}; lower the quotas or set allowGpuOvercommit: true")
        load_balancers = [n for n, v in tenant.virtual_machines.items()
                          if v.ssh_service is not None and v.ssh_service.type == "LoadBalancer"]
        if len(load_balancers) > tenant.quota.load_balancers:
            raise SpecError(
                (*base, "virtualMachines", load_balancers[-1], "sshService", "type"),
                f"'LoadBalancer': the tenant would have {len(load_balancers)} LoadBalancer Services, "
                f"quota.loadBalancers allows {tenant.quota.load_balancers}",
            )
        used: dict[str, int] = {}
        try:
            for (kind, name), placement, units in placements(cell, tenant):
                if placement.resource is None:
                    continue
                used[placement.resource] = used.get(placement.resource, 0) + units
                allowed = tenant.quota.gpus.get(placement.resource, 0)
                if used[placement.resource] > allowed:
                    raise SpecError(
                        (kind, name),
                        f"needs {units} {placement.resource} ({used[placement.resource]} with the tenant's other "
                        f"workloads), tenant quota.gpus allows {allowed}",
                    )
        except SpecError as exc:
            raise SpecError((*base, *exc.rel_path), exc.message) from None
        download = _needs_egress(tenant)
        if download is not None and tenant.egress.value in ("none", "cluster"):
            path, what = download
            raise SpecError(
                (*base, *path),
                f"{what} from the tenant's namespace, but its egress is {tenant.egress.value!r}; use egress internet, "
                "or custom with those hosts in egressFqdns",
            )
