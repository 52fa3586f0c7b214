"""The Pulumi program: config -> one RegionalCell per region -> stack outputs. Shared by ``pulumi up`` and the plan."""

from __future__ import annotations

import pulumi

from components.cell import RegionalCell, RegionalCellArgs
from components.errors import ConfigError
from stacks.config import load_stack_config

__all__ = ["build_cells", "main"]


def build_cells(config: pulumi.Config | None = None) -> dict[str, RegionalCell]:
    """Validate the whole stack config, then build one independent cell per region and export its outputs.

    Raises :class:`ConfigError` before registering anything when the config is wrong. Exports per region:
    ``<region>`` (``{apiServerUrl, storageClassName}``) and ``<region>Kubeconfig`` (secret).
    """
    stack = load_stack_config(config)
    cells: dict[str, RegionalCell] = {}
    for region, spec in stack.spec.regions.items():
        cell = RegionalCell(region, RegionalCellArgs(cell=spec, ssh_private_key=stack.ssh_private_keys[region]))
        pulumi.export(region, {"apiServerUrl": cell.api_server_url, "storageClassName": cell.storage_class_name})
        # Its own output, so that the secret does not hide the plain values above.
        pulumi.export(f"{region}Kubeconfig", pulumi.Output.secret(cell.kubeconfig))
        cells[region] = cell
    return cells


def main() -> None:
    """Entry point of ``__main__.py``: a config mistake becomes a ``pulumi.RunError`` (shown without traceback)."""
    try:
        build_cells()
    except ConfigError as exc:
        raise pulumi.RunError(str(exc)) from None
