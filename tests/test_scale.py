"""Plans grow linearly with the fleet: the graph's depth follows the rollout, lookups stay indexed."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest
from pulumi.runtime.proto import source_pb2

from bench.synthetic import Size, stack_config, write_stack
from gpucell.engine import _sdk_private as sdk_private
from gpucell.engine.mock_engine import run_program
from gpucell.stacks.plan import GraphShape, graph_shape, make_plan, render_tree


def shape(tmp_path: Path, size: Size) -> tuple[GraphShape, int]:
    write_stack(tmp_path, "s", size)
    plan = make_plan(tmp_path, "s")
    return graph_shape(plan.region_resources("r0")), len(plan.result.resources)


def test_graph_depth_does_not_grow_with_workloads(tmp_path: Path) -> None:
    before, before_count = shape(tmp_path / "base", Size(1, 16, 10))
    after, after_count = shape(tmp_path / "grown", Size(1, 16, 40))
    assert after_count > before_count
    assert after.depth == before.depth


def test_a_new_regions_graph_depth_does_not_grow_with_its_agents(tmp_path: Path) -> None:
    """A new region's agents are first joins: they join ``ssh.joinConcurrency`` (5) at a time across pools, not
    one pool node after another (decision 0023), so 21 agents instead of 5 leave the longest chain (the charts')
    where it was. Registered nodes keep their rollout chain (tests/test_k3s.py)."""
    before, _ = shape(tmp_path / "base", Size(1, 8, 10))  # 5 agents: one window
    after, _ = shape(tmp_path / "grown", Size(1, 24, 10))  # 21 agents: five windows
    assert after.depth == before.depth
    assert after.width > before.width


def test_synthetic_stacks_pass_admission_with_every_kind_of_workload() -> None:
    regions = stack_config(Size(2, 8, 20))["gpucell:regions"]
    assert list(regions) == ["r0", "r1"]
    sections = {
        section
        for tenant in regions["r0"]["tenants"].values()
        for section in tenant
        if section in ("virtualMachines", "notebooks", "modelEndpoints")
    }
    assert sections == {"virtualMachines", "notebooks", "modelEndpoints"}


def test_a_size_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="7 nodes leave 4 workers; a synthetic region needs at least 8 nodes"):
        stack_config(Size(1, 7, 10))


def test_the_tree_states_the_graph_shape(tmp_path: Path) -> None:
    write_stack(tmp_path, "s", Size(1, 8, 10))
    plan = make_plan(tmp_path, "s")
    expected = graph_shape(plan.region_resources("r0"))
    assert (
        f"  graph: depth {expected.depth}, width {expected.width} (longest dependency chain; most resources "
        "the engine can create at once)"
    ) in render_tree(plan, ["r0"]).splitlines()


def test_the_engine_skips_the_sdks_stack_capture_only_while_a_program_runs() -> None:
    """The SDK walks the whole stack per registration for source positions this engine never reads."""
    original = sdk_private.stack_trace_hook.get()
    seen: list[object] = []

    def program() -> None:
        seen.append(sdk_private.stack_trace_hook.get()())  # type: ignore[misc]
        pulumi.CustomResource("test:index:Thing", "thing", {})

    result = run_program(program)
    assert [r.name for r in result.resources] == ["thing"]
    assert seen == [source_pb2.StackTrace()]
    assert sdk_private.stack_trace_hook.get() is original
