"""DraClaimOrder: what a DRA VM waits for, offered to consumers building their own tenants."""

from __future__ import annotations

from typing import Any

import pulumi

from gpucell.engine.mock_engine import run_program
from gpucell.tenancy.dra_ordering import DraClaimOrder


def _placement(pools: tuple[str, ...], device_class: str | None) -> Any:
    # Only the two fields DraClaimOrder reads; a real Placement comes from gpucell.admission.placement.
    return type("P", (), {"pools": pools, "device_class": device_class})()


def test_a_vm_waits_for_the_claims_on_its_pools_once_each_in_order() -> None:
    seen: dict[str, Any] = {}

    def program() -> None:
        a, b, c = (pulumi.CustomResource("test:index:Thing", n, {}) for n in ("a", "b", "c"))
        order = DraClaimOrder()
        order.record(_placement(("p1", "p2"), "gpu.nvidia.com"), a)
        order.record(_placement(("p2",), "gpu.nvidia.com"), b)
        order.record(_placement(("p1",), None), c)  # device plugin GPU: no DRA claim
        seen["p2,p1"] = order.after(["p2", "p1"])
        seen["p3"] = order.after(["p3"])
        seen["names"] = {id(a): "a", id(b): "b"}

    run_program(program)
    assert [seen["names"][id(r)] for r in seen["p2,p1"]] == ["a", "b"]
    assert seen["p3"] == []
