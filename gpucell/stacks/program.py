"""The Pulumi program: config -> one RegionalCell per region -> stack outputs. Shared by ``pulumi up`` and the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.components.cluster_deny import other_cells
from gpucell.components.gateway import exposed_endpoints
from gpucell.day2.disruption import fingerprint
from gpucell.errors import ConfigError
from gpucell.spec import GpuAllocation, GpuVirtualMachineSpec, StackSpec
from gpucell.stacks.config import StackConfig, load_stack_config, shown_error
from gpucell.stacks.control_server import Probe, choose_control_server, ssh_banner_problem
from gpucell.stacks.guard import (
    check_against,
    deployed_fingerprints,
    deployed_gpu_nodes,
    fingerprint_output,
    gpu_nodes_output,
    read_last_deployment,
)
from gpucell.tenancy._common import vm_placement
from gpucell.tenancy.dra_ordering import DraClaimOrder
from gpucell.tenancy.tenant import Tenant, TenantArgs
from gpucell.workloads.model_endpoint import ModelEndpoint, ModelEndpointArgs
from gpucell.workloads.notebook import Notebook, NotebookArgs
from gpucell.workloads.serving_runtime import ServingRuntime, ServingRuntimeArgs
from gpucell.workloads.tenant_cluster import KUBECONFIGS_SUFFIX, TenantCluster, TenantClusterArgs
from gpucell.workloads.virtual_machine import GpuVirtualMachine, GpuVirtualMachineArgs

__all__ = ["build_cells", "main", "shared_failure_domain"]


def build_cells(config: pulumi.Config | None = None, *, probe: Probe | None = None) -> dict[str, RegionalCell]:
    """Validate the whole stack config, refuse unacknowledged disruptive changes, then build one independent cell
    per region and export its outputs.

    Raises :class:`ConfigError` before registering anything when the config is wrong or a disruptive change
    against the last deployment is not acknowledged (:func:`gpucell.stacks.guard.check_against`). Exports per
    region: ``<region>`` (``{apiServerUrl, storageClassName}``), ``<region>Kubeconfig`` (secret) and
    ``<region>Fingerprint`` (what the next run compares against, :func:`gpucell.day2.disruption.fingerprint`) and
    ``<region>GpuNodes`` (the hosts' GPU configurations, known once every node settled:
    :attr:`gpucell.cell.RegionalCell.gpu_nodes`; while it is unknown, because a node failed, the engine keeps every
    output of the last completed run).

    ``probe`` (``pulumi up`` passes :func:`gpucell.stacks.control_server.ssh_banner_problem`) picks each region's
    control server, the first answering over SSH, warning for each passed over; without it (the offline plan) the
    first server not forgotten.
    """
    stack = load_stack_config(config)
    shared = shared_failure_domain(pulumi.get_stack(), stack.spec)
    if shared is not None:
        pulumi.log.warn(shared)
    last = read_last_deployment()
    deployed = deployed_fingerprints(last)
    check_against(stack, deployed)
    cells: dict[str, RegionalCell] = {}
    for region, spec in stack.spec.regions.items():
        control = choose_control_server(spec, probe)
        for warning in control.warnings(region):
            pulumi.log.warn(warning)
        cell = RegionalCell(
            region,
            RegionalCellArgs(
                cell=spec,
                ssh_private_key=stack.ssh_private_keys[region],
                etcd_s3_credentials=stack.etcd_s3_credentials(region),
                registered_hosts=registered_hosts(deployed.get(region)),
                remote_write_credentials=stack.remote_write_credentials(region),
                backup_credentials=stack.backup_credentials(region),
                deployed_gpu_nodes=deployed_gpu_nodes(last, region, spec),
                control_server=control.host,
                image_credentials=stack.credentials,
                other_cells=other_cells(stack.spec.regions, region, stack.spec.other_cells),
            ),
        )
        pulumi.export(region, {"apiServerUrl": cell.api_server_url, "storageClassName": cell.storage_class_name})
        # Its own output, so that the secret does not hide the plain values above.
        pulumi.export(f"{region}Kubeconfig", pulumi.Output.secret(cell.kubeconfig))
        pulumi.export(fingerprint_output(region), fingerprint(spec))
        pulumi.export(gpu_nodes_output(region), cell.gpu_nodes)
        cells[region] = cell
        build_tenants(region, cell, stack)
    return cells


def shared_failure_domain(stack: str, spec: StackSpec) -> str | None:
    """The warning for a stack holding several regions (``None`` for one): they share one state, one run and one
    failure domain. A ``production: true`` stack never gets here (:class:`StackSpec` refuses it)."""
    if len(spec.regions) < 2:
        return None
    return (
        f"stack {stack} holds regions {', '.join(spec.regions)} in one state: they share one failure domain (a "
        "failed host in one stops the others' rollout, a lock or a bad checkpoint stops them all, a version bump "
        "reaches them all in one run); production stacks hold one region each (docs/operations.md, 'One stack per "
        "region')"
    )


def registered_hosts(deployed: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The hosts a region's last deployed fingerprint lists (``nodes``); none for a region never deployed (every
    agent is a first join, docs/decisions/0023-parallel-first-joins.md); ``None`` (every host registered, the safe
    order) when a deployed fingerprint does not list its nodes."""
    if deployed is None:
        return frozenset()
    nodes = deployed.get("nodes")
    return frozenset(nodes) if isinstance(nodes, Mapping) else None


def build_tenants(region: str, cell: RegionalCell, stack: StackConfig) -> list[Tenant]:
    """The region's tenants (children of the cell) and their workloads (children of their tenant).

    Tenant clusters export their kubeconfigs as one secret output, ``<region>TenantClusterKubeconfigs``
    (``{"<tenant>/<cluster>": kubeconfig}``, read once each cluster's control plane is up).

    VMs with ``gpuAllocation: dra`` come last and wait for every notebook's StatefulSet and endpoint's
    InferenceService (all tenants) whose DRA GPUs share one of their ``dra`` pools: those are ready only once their
    claims are prepared, and the DRA driver withdraws a prepared GPU's VFIO twin from the ResourceSlice, so the VMs'
    claims cannot be allocated the same GPUs in the same ``pulumi up`` (docs/decisions/0017;
    :class:`gpucell.tenancy.dra_ordering.DraClaimOrder`, public for consumers building their own tenants).
    """
    tenants: list[Tenant] = []
    order = DraClaimOrder()
    dra_vms: list[tuple[str, str, GpuVirtualMachineSpec, Tenant]] = []
    routes = {(route.tenant, route.endpoint): route for route in exposed_endpoints(cell.spec)}
    kubeconfigs: dict[str, pulumi.Output[str]] = {}
    for tenant_name, spec in cell.spec.tenants.items():
        tenant = Tenant(
            f"{region}-{tenant_name}",
            TenantArgs.from_cell(tenant_name, spec, cell),
            opts=pulumi.ResourceOptions(parent=cell),
        )
        under = pulumi.ResourceOptions(parent=tenant)
        prefix = f"{region}-{tenant_name}"
        for name, vm in spec.virtual_machines.items():
            if vm.gpu_allocation is GpuAllocation.DRA:
                dra_vms.append((f"{prefix}-{name}", name, vm, tenant))
                continue
            GpuVirtualMachine(
                f"{prefix}-{name}", GpuVirtualMachineArgs(name, vm, tenant, secrets=vm_secrets(vm, stack)), opts=under
            )
        for name, notebook in spec.notebooks.items():
            book = Notebook(f"{prefix}-{name}", NotebookArgs(name, notebook, tenant), opts=under)
            order.record(book.placement, book.statefulset)
        runtimes = {
            name: ServingRuntime(f"{prefix}-{name}", ServingRuntimeArgs(name, runtime, tenant), opts=under)
            for name, runtime in spec.serving_runtimes.items()
        }
        for name, endpoint in spec.model_endpoints.items():
            key = endpoint.credentials_config_key
            credentials = stack.credentials[key] if key is not None else None
            route = routes.get((tenant_name, name))
            gateway = cell.gateway.gateways[route.gateway] if route is not None and cell.gateway else None
            env = {
                v.secret_config_key: stack.credentials[v.secret_config_key] for v in endpoint.env if v.secret_config_key
            }
            runtime = runtimes.get(endpoint.runtime or "")
            served = ModelEndpoint(
                f"{prefix}-{name}",
                ModelEndpointArgs(name, endpoint, tenant, credentials, route, gateway, env, runtime),
                opts=under,
            )
            order.record(served.placement, served.inference_service)
        for name, cluster_spec in spec.tenant_clusters.items():
            assert cell.cluster_api is not None  # the cell installs Cluster API when a tenant has a cluster
            built = TenantCluster(
                f"{prefix}-{name}",
                TenantClusterArgs.from_tenant(name, cluster_spec, tenant, cell.cluster_api),
                opts=under,
            )
            kubeconfigs[f"{tenant_name}/{name}"] = built.kubeconfig
        tenants.append(tenant)
    for component_name, name, vm, tenant in dra_vms:
        pools = vm_placement(name, vm, cell.facts).pools
        after = order.after(pools)
        GpuVirtualMachine(
            component_name,
            GpuVirtualMachineArgs(name, vm, tenant, after, secrets=vm_secrets(vm, stack)),
            opts=pulumi.ResourceOptions(parent=tenant),
        )
    if kubeconfigs:
        # Secret as a whole: each value is Cluster API's admin kubeconfig of a tenant cluster.
        pulumi.export(f"{region}{KUBECONFIGS_SUFFIX}", pulumi.Output.secret(pulumi.Output.all(**kubeconfigs)))
    return tenants


def vm_secrets(vm: GpuVirtualMachineSpec, stack: StackConfig) -> dict[str, pulumi.Output[str]]:
    """The secrets ``vm`` names (user data, disk import credentials), config key -> value."""
    keys = [vm.cloud_init.user_data_config_key if vm.cloud_init else None]
    keys += [disk.source.credentials_config_key for disk in vm.disks]
    return {key: stack.credentials[key] for key in keys if key is not None}


def main() -> None:
    """Entry point of ``__main__.py``: a config mistake becomes a ``pulumi.RunError`` (shown without traceback), no
    value of a ``secure:`` ``gpucell:regions`` in it (:func:`gpucell.stacks.config.shown_error`)."""
    try:
        build_cells(probe=ssh_banner_problem)
    except ConfigError as exc:
        raise pulumi.RunError(str(shown_error(exc))) from None
