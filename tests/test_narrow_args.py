"""Narrow args: no component's ``*Args`` but ``RegionalCellArgs`` takes a whole cell spec or a cell (decision 0019).

Checked on every public ``*Args`` by its type hints, every layer of them (``Sequence[X]``, ``X | None``...), so that a
field typed ``CellSpec`` (or ``RegionalCell``, or anything holding one) anywhere fails here by name.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any

import pulumi
import pytest

import gpucell
from gpucell.cell import RegionalCell
from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.components.gateway import EndpointRoute
from gpucell.components.storage import Storage
from gpucell.k3s.cluster import ProviderFactory
from gpucell.spec import CellSpec, NodePool
from gpucell.tenancy.tenant import TenantView

ARGS = sorted(name for name in gpucell.__all__ if name.endswith("Args"))
WHOLE_CELL = (CellSpec, RegionalCell)
"""What no narrow args may hold: the cell spec or the cell."""
NAMES: dict[str, Any] = {
    **{name: getattr(gpucell, name) for name in gpucell.__all__},
    "Cluster": Cluster,
    "ContainerRuntime": ContainerRuntime,
    "CellSpec": CellSpec,
    "EndpointRoute": EndpointRoute,
    "NodePool": NodePool,
    "ProviderFactory": ProviderFactory,
    "RegionalCell": RegionalCell,
    "Storage": Storage,
    "TenantView": TenantView,
    "Output": pulumi.Output,  # pulumi.Input's own forward reference, "Output[T]"
    "T": typing.TypeVar("T"),
}
"""What the ``*Args`` modules import for annotations only (under ``TYPE_CHECKING``)."""
NOT_INTO_A_CLUSTER = {"RegionalCellArgs", "K3sClusterArgs"}
"""The cell and k3s make their cluster; the workloads deploy into their tenant's (``tenant.cluster``)."""
WORKLOAD_ARGS = {"GpuVirtualMachineArgs", "NotebookArgs", "ModelEndpointArgs", "ServingRuntimeArgs"}
"""What sits on its tenant (a tenant's own ServingRuntime too), whose ``tenant.cluster`` it deploys into."""


def field_types(args: type) -> dict[str, Any]:
    """Field name -> resolved type of a dataclass ``*Args``."""
    hints = typing.get_type_hints(args, globalns=vars(sys.modules[args.__module__]), localns=NAMES)
    return {field.name: hints[field.name] for field in dataclasses.fields(args)}


def holds(annotation: Any, forbidden: tuple[type, ...]) -> bool:
    """Whether ``annotation`` is, or is built from, one of ``forbidden`` (or a subclass of one)."""
    if isinstance(annotation, type) and issubclass(annotation, forbidden):
        return True
    return any(holds(arg, forbidden) for arg in typing.get_args(annotation))


@pytest.mark.parametrize("name", sorted(WORKLOAD_ARGS))
def test_workloads_sit_on_their_tenant(name: str) -> None:
    assert field_types(getattr(gpucell, name))["tenant"] is TenantView


def test_every_public_args_is_found() -> None:
    assert len(ARGS) >= 16
    assert {"RegionalCellArgs", "K3sClusterArgs", "GpuOperatorArgs", "TenantArgs", "GpuVirtualMachineArgs"} <= set(ARGS)


@pytest.mark.parametrize("name", ARGS)
def test_no_args_but_the_regional_cells_takes_a_cell_spec_or_a_cell(name: str) -> None:
    args = getattr(gpucell, name)
    wide = sorted(field for field, kind in field_types(args).items() if holds(kind, WHOLE_CELL))
    assert wide == (["cell"] if name == "RegionalCellArgs" else [])


@pytest.mark.parametrize("name", [n for n in ARGS if n not in NOT_INTO_A_CLUSTER | WORKLOAD_ARGS])
def test_every_component_deployed_into_a_cluster_takes_its_handle(name: str) -> None:
    assert field_types(getattr(gpucell, name))["cluster"] is Cluster


@pytest.mark.parametrize(
    "name",
    [
        "BackupsArgs",
        "CdiArgs",
        "CertManagerArgs",
        "CiliumArgs",
        "ClusterApiArgs",
        "CsiSnapshotsArgs",
        "DraDriverArgs",
        "GpuOperatorArgs",
        "K3sClusterArgs",
        "KServeArgs",
        "KubeVirtArgs",
        "MetricsArgs",
        "PriorityClassesArgs",
        "StorageArgs",
        "TenantArgs",
    ],
)
def test_where_the_cell_spec_is_the_source_args_have_from_cell(name: str) -> None:
    assert callable(getattr(getattr(gpucell, name), "from_cell", None))


def test_the_check_finds_a_cell_spec_nested_in_a_field() -> None:
    @dataclasses.dataclass
    class Wide:
        pools: dict[str, NodePool]
        cells: typing.Sequence[CellSpec] | None = None
        output: pulumi.Input[str] | None = None

    assert [f for f, kind in field_types(Wide).items() if holds(kind, WHOLE_CELL)] == ["cells"]
