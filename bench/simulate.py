"""Simulated ``pulumi up`` wall time of synthetic regions, from the plan's graph and gpucell's per-step estimates.

    python3 dev.py bench --simulate [--write-doc]

For a new region of 10, 50 and 200 nodes (:mod:`bench.synthetic`, 10 workloads) it walks the plan's dependency
graph with :func:`gpucell.stacks.estimate.estimate` and compares the result with the *limit*: the same graph with
the first-join window taken out (every new agent joins at once), i.e. servers in sequence, one join wave and the
charts' chain, and with the order before decision 0023 (every first join in its pool's rollout chain). For a k3s
upgrade of the 200-node region (a patch release, every node registered: the base plan's
outputs stand in for the last deployment) it estimates the change at ``rollout.maxUnavailable`` 1 and 10 on every
agent pool.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench.synthetic import Size, write_stack
from gpucell.engine.mock_engine import Registration
from gpucell.stacks.estimate import estimate
from gpucell.stacks.plan import make_plan, to_json

__all__ = ["NEW_REGION_NODES", "UPGRADE_WINDOWS", "simulated_table", "without_join_window"]

NEW_REGION_NODES = (10, 50, 200)
UPGRADE_WINDOWS = (1, 10)
UPGRADE_NODES = 200
TARGET_MINUTES = 30
"""Issue 23: a new 200-node region with the default settings comes up in at most this many minutes."""
_UPGRADE = {"versions": {"k3s": "v1.34.3+k3s1"}, "k3s": {"installerSha256": "0" * 64}}


def without_join_window(registrations: list[Registration]) -> list[Registration]:
    """The registrations with the first-join window's edges taken out: no agent's ``-prepare`` waits for another
    agent's ``-prepare``, nor its ``-settle`` for another agent's ``-settle`` (servers, ``-srv-`` in the synthetic
    stacks' host names, keep their chain). What is left is the limit: servers in sequence, one join wave, the charts'
    chain."""
    urns = {r.urn: r for r in registrations}

    def server(urn: str) -> bool:
        return "-srv-" in urns[urn].name if urn in urns else False

    out = []
    for r in registrations:
        step = next((s for s in ("-prepare", "-settle") if r.name.endswith(s)), None)
        if step is None or server(r.urn):
            out.append(r)
            continue
        kept = [u for u in r.dependencies if not (u in urns and urns[u].name.endswith(step) and not server(u))]
        out.append(dataclasses.replace(r, dependencies=kept))
    return out


def _region(project: Path, stack: str, **plan: Any) -> list[Registration]:
    return make_plan(project, stack, **plan).region_resources("r0")


def _upgrade(project: Path, window: int, base: dict[str, Any]) -> float:
    path = project / "Pulumi.up.yaml"
    config = yaml.safe_load((project / "Pulumi.bench.yaml").read_text())
    region = config["config"]["gpucell:regions"]["r0"]
    region.update(_UPGRADE)
    for pool in region["nodePools"].values():
        if pool["role"] != "server":
            pool["rollout"] = {"maxUnavailable": window}
    path.write_text(yaml.safe_dump(config, sort_keys=False, width=200))
    inputs = {r["urn"].replace("urn:pulumi:bench::", "urn:pulumi:up::", 1): r["inputs"] for r in base["resources"]}
    outputs = base["outputs"]
    return estimate(_region(project, "up", last_deployment=outputs), inputs).seconds


def simulated_table(progress: Callable[[str], None] = lambda _: None) -> str:
    """The simulated-time table as Markdown."""
    lines = [
        "| run | nodes | estimated wall time | limit | longest chain (timed steps) | each pool one by one |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    new_region: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="gpucell-simulate-") as tmp:
        for nodes in NEW_REGION_NODES:
            project = Path(tmp) / f"n{nodes}"
            write_stack(project, "bench", Size(1, nodes, 10))
            plan = make_plan(project, "bench")
            registrations = plan.region_resources("r0")
            found = estimate(registrations)
            limit = estimate(without_join_window(registrations))
            # as before decision 0023: every host taken as registered, so first joins follow the rollout chain
            deployed = {k: v for k, v in plan.result.outputs.items() if k.startswith("r0")}
            chained = estimate(_region(project, "bench", last_deployment=deployed))
            new_region[nodes] = found.seconds
            lines.append(
                f"| new region | {nodes} | {found.seconds / 60:.1f} min | {limit.seconds / 60:.1f} min | "
                f"{len(found.chain)} | {chained.seconds / 60:.1f} min |"
            )
            progress(f"simulated a new region of {nodes} nodes")
        project = Path(tmp) / f"n{UPGRADE_NODES}"
        plan = make_plan(project, "bench")
        base = to_json(plan, ["r0"])
        for window in UPGRADE_WINDOWS:
            seconds = _upgrade(project, window, base)
            lines.append(f"| k3s upgrade, maxUnavailable {window} | {UPGRADE_NODES} | {seconds / 3600:.1f} h | | | |")
            progress(f"simulated a k3s upgrade at maxUnavailable {window}")
    verdict = "met" if new_region[200] <= TARGET_MINUTES * 60 else "missed"
    lines += [
        "",
        f"Target: a new 200-node region in at most {TARGET_MINUTES} min with the defaults "
        f"(`ssh.joinConcurrency` 5): {new_region[200] / 60:.1f} min, {verdict}. Per-step estimates: "
        "`gpucell.stacks.estimate` (k3s install 150 s a server, 90 s an agent; Helm releases 30-240 s; a "
        "drain 240 s).",
    ]
    return "\n".join(lines) + "\n"
