"""The mock engine the offline plan and the tests run programs under (gpucell.engine.mock_engine)."""

from __future__ import annotations

import pulumi

from gpucell.engine.mock_engine import run_program


def test_a_resource_built_after_a_run_never_joins_the_plan_it_returned() -> None:
    """A test built a Kubernetes provider outside any run (``program_cluster``): it registered with the last mocks'
    monitor, whose list was the returned plan's own, so the shared prod plan grew a ``lab-k8s`` provider and
    tests/test_metrics.py failed the shared-plan check in some orders."""
    plan = run_program(lambda: pulumi.CustomResource("test:index:Thing", "inside"))
    pulumi.CustomResource("test:index:Thing", "outside")
    run_program(lambda: None)  # runs the event loop, which sends the stray registration
    assert [r.name for r in plan.resources] == ["inside"]
