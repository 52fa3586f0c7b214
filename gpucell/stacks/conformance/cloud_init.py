"""VMs' own cloud-init against cloud-init's JSON schemas: the cloud-config keys of user data, and network data.

The schemas are canonical/cloud-init's own (``cloudinit/config/schemas/schema-cloud-config-v1.json``,
``schema-network-config-v1.json``, ``schema-network-config-v2.json``), at the release :data:`CLOUD_INIT_RELEASE`,
which ``gpucell schemas fetch`` downloads into the schema directory (``cloud-init/``) and ``shared/upstream``
holds. A schema directory must hold them (``--check`` names them as missing otherwise); a store without them, built
by hand, gets a notice that user data was not checked against them rather than a failure, since the plan's own
rules (:mod:`gpucell.spec.cloud_init`) already refused user data that is not cloud-config or fights gpucell's parts.
What is checked is what the VM's Secret holds: the tenant's user data with gpucell's parts merged in. User data
from a secret (``userDataConfigKey``) is unknown offline and not checked here.

cloud-init's cloud-config schema refuses unknown top-level keys (``additionalProperties: false``), so a misspelt module
(``packges``) is a problem, as ``cloud-init schema --config-file`` reports it in the guest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema

from gpucell.spec import CellSpec
from gpucell.spec.cloud_init import GpucellUserData, merge_user_data, parse_cloud_config, parse_network_config
from gpucell.stacks.conformance.problems import Notice, Problem, Subject
from gpucell.stacks.conformance.schemas import CLOUD_INIT_RELEASE, SchemaStore
from gpucell.workloads.virtual_machine import cloud_init_secret_name

__all__ = ["CLOUD_CONFIG_SCHEMA", "CLOUD_INIT_RELEASE", "NETWORK_CONFIG_SCHEMAS", "cloud_init_report"]

CLOUD_CONFIG_SCHEMA = "cloud-init/schema-cloud-config-v1.json"
NETWORK_CONFIG_SCHEMAS = {
    1: "cloud-init/schema-network-config-v1.json",
    2: "cloud-init/schema-network-config-v2.json",
}


def _errors(schema: Any, document: Any) -> Iterator[tuple[str, str]]:
    validator = jsonschema.Draft4Validator(schema)
    for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        path = ".".join(str(p) for p in error.absolute_path) or "-"
        yield path, error.message


def cloud_init_report(region: str, cell: CellSpec, store: SchemaStore) -> tuple[list[Problem], list[Notice]]:
    """Problems of every VM's plain user data (merged as rendered) and network data in ``cell``, against the schemas
    of ``store``; a notice instead when the store lacks them and a VM has its own cloud-init."""
    own = [
        (tenant_name, name, vm)
        for tenant_name, tenant in cell.tenants.items()
        for name, vm in tenant.virtual_machines.items()
        if vm.cloud_init is not None and (vm.cloud_init.user_data or vm.cloud_init.network_data)
    ]
    if not own:
        return [], []
    missing = [rel for rel in (CLOUD_CONFIG_SCHEMA, *NETWORK_CONFIG_SCHEMAS.values()) if not store.has(rel)]
    if missing:
        return [], [
            Notice(
                f"VMs' own cloud-init not checked against cloud-init's schemas: {', '.join(missing)} not in "
                f"{store.root} (`gpucell schemas fetch` downloads cloud-init {CLOUD_INIT_RELEASE}'s)"
            )
        ]
    problems: list[Problem] = []
    for tenant_name, name, vm in own:
        assert vm.cloud_init is not None
        subject = Subject(region, "Secret", f"tenant-{tenant_name}", cloud_init_secret_name(name))
        if vm.cloud_init.user_data:
            merged = merge_user_data(
                parse_cloud_config(vm.cloud_init.user_data), GpucellUserData(vm.user, vm.ssh_keys), where=name
            )
            for path, message in _errors(store.load(CLOUD_CONFIG_SCHEMA), merged):
                problems.append(Problem(subject, f"userdata.{path}", message, "cloud-init"))
        if vm.cloud_init.network_data:
            network = parse_network_config(vm.cloud_init.network_data)
            inner = network.get("network", network) if isinstance(network.get("network"), dict) else network
            schema = store.load(NETWORK_CONFIG_SCHEMAS[int(inner["version"])])
            for path, message in _errors(schema, network):
                problems.append(Problem(subject, f"networkdata.{path}", message, "cloud-init"))
    return problems, []
