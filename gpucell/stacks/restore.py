"""``gpucell restore``: the Velero ``Restore`` that brings a tenant's namespace (or one workload) back from a backup.

It reads the stack file only (nothing is planned, decrypted or contacted), checks the region, the tenant, its backup
and the workload, and prints the object (:func:`gpucell.components.backups.restore_manifest`) for a cluster admin to
apply (``kubectl apply -f -``). Tenants have no role in Velero's namespace: restores are the platform's, and a Restore
never leaves the tenant's own namespace. docs/operations.md, "Restore a tenant's VM".
"""

from __future__ import annotations

from pathlib import Path

import yaml

from gpucell.components.backups import restore_manifest, schedule_name
from gpucell.errors import ConfigError, shown
from gpucell.spec import StackSpec
from gpucell.spec.network import DNS_SUBDOMAIN
from gpucell.spec.workloads import RunStrategy
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.plan import read_stack_files

__all__ = ["restore_document"]


def restore_document(
    project_dir: Path,
    stack: str,
    *,
    region: str,
    tenant: str,
    backup: str,
    workload: str | None = None,
    run_strategy: str | None = None,
    name: str | None = None,
) -> tuple[str, list[str]]:
    """The Restore as YAML, and notes for stderr. Raises :class:`ConfigError` (one line each) when the stack has no
    such region or tenant, the tenant has no ``backup``, the workload is not the tenant's, the run strategy is not
    KubeVirt's, or a name is not a Kubernetes object name."""
    files = read_stack_files(project_dir, stack)
    # gpucell:gpuModels too: a region whose pools name the stack's own models is not valid without them (issue 30).
    spec = StackSpec.model_validate({"regions": {}, **stack_spec_input(files.config, files.project)})
    cell = spec.regions.get(region)
    if cell is None:
        raise ConfigError.at(
            ("--region",), f"{shown(region)} is not a region of stack {stack}: {', '.join(spec.regions)}"
        )
    found = cell.tenants.get(tenant)
    if found is None:
        raise ConfigError.at(("--tenant",), f"{shown(tenant)} is not a tenant of {region}: {', '.join(cell.tenants)}")
    if found.backup is None or cell.backups is None:
        raise ConfigError.at(("--tenant",), f"{tenant} has no backup in {region} (tenants.{tenant}.backup)")
    for option, value in (("--backup", backup), ("--name", name)):
        if value is not None and (len(value) > 63 or not DNS_SUBDOMAIN.fullmatch(value)):
            raise ConfigError.at((option,), f"{shown(value)} is not an object name (a DNS-1123 name, at most 63)")
    workloads = [*found.virtual_machines, *found.notebooks, *found.model_endpoints]
    if workload is not None and workload not in workloads:
        raise ConfigError.at(
            ("--workload",), f"{shown(workload)} is not a workload of tenant {tenant}: {', '.join(workloads)}"
        )
    strategies = [s.value for s in RunStrategy]
    if run_strategy is not None and run_strategy not in strategies:
        raise ConfigError.at(("--run-strategy",), f"{shown(run_strategy)} is not one of {', '.join(strategies)}")
    notes = []
    if not backup.startswith(f"{schedule_name(tenant)}-"):
        notes.append(
            f"note: {backup} is not named as a backup of {tenant}'s schedule ({schedule_name(tenant)}-<timestamp>); "
            f"only what it holds of namespace {schedule_name(tenant)} is restored"
        )
    manifest = restore_manifest(
        tenant,
        backup,
        name=name,
        workload=workload,
        run_strategy=run_strategy,
        volume_timeout_hours=cell.backups.volume_timeout_hours,
    )
    return yaml.safe_dump(manifest, sort_keys=False), notes
