"""``gpucell diff``: two plans of a stack as a review, in Markdown fit for a pull-request comment and a job summary.

The review leads with the disruptive changes (the same rule ``pulumi up`` applies, :mod:`gpucell.stacks.guard`,
between the base plan's fingerprints, taken as deployed, and the head plan's), each with what it does to running
workloads and the ``gpucell:acknowledge`` entry it needs, then lists per region every resource to create, update,
replace or delete: input paths old → new (long values cut to the part that changed, lists as the entries added and
removed, secrets ``[secret]``), Helm values as value paths,
node files (``config.yaml``, ``install.sh``) as unified diffs, replacements and protected deletions marked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucell.day2.disruption import (
    UNACKNOWLEDGEABLE,
    DisruptiveChange,
    Judgement,
    StackAcknowledgements,
    compare,
    judge,
    refused_together,
    removed_regions,
    skipped_releases,
)
from gpucell.errors import ConfigError
from gpucell.stacks.estimate import human
from gpucell.stacks.guard import deployed_fingerprints
from gpucell.stacks.maintenance_review import Maintenance, maintenance
from gpucell.stacks.plan_diff import (
    MISSING,
    SECRET,
    SECRET_CHANGED,
    InputChange,
    PlanDiff,
    ResourceDiff,
    diff_plans,
    index_plan,
)
from gpucell.stacks.plan_file import held_regions, region_filter

__all__ = [
    "COMMENT_MARKER",
    "EXIT_CHANGES",
    "EXIT_DISRUPTIVE",
    "EXIT_NO_CHANGES",
    "Review",
    "exit_code",
    "render",
    "review",
]

EXIT_NO_CHANGES, EXIT_CHANGES, EXIT_DISRUPTIVE = 0, 3, 4
EXIT_REFUSED = 2
"""``gpucell diff``'s exit code when the head plans what ``pulumi up`` refuses whatever is acknowledged."""
COMMENT_MARKER = "<!-- gpucell-diff -->"
"""First line of the Markdown: the workflow finds its earlier comment by it and updates it in place."""
FOLD_AT = 80
"""Characters of a value shown before it is folded."""
_ORDER = {"delete": 0, "replace": 1, "update": 2, "create": 3}
_ICONS = {"create": "🟢 create", "update": "🟡 update", "replace": "🔴 replace", "delete": "🔴 delete"}


@dataclass
class Review:
    """One stack's review."""

    stack: str
    plan_diff: PlanDiff
    disruptive: list[DisruptiveChange]
    judgement: Judgement
    notes: list[str] = field(default_factory=list)
    """Lines shown under the heading (how the plans were made, fallbacks taken)."""
    carried: frozenset[int] = frozenset()
    """Indexes of the head's ``gpucell:acknowledge`` entries the base has too (carried over, maybe not deployed)."""
    acknowledge_changed: bool = False
    """The head's ``gpucell:acknowledge`` differs from the base's."""
    refused: list[str] = field(default_factory=list)
    """What ``pulumi up`` refuses whatever is acknowledged (:func:`gpucell.day2.disruption.refused_together`)."""
    maintenance: dict[str, Maintenance] = field(default_factory=dict)
    """Region -> the nodes taken out of service and the GPU VMs that stop (:mod:`gpucell.stacks.maintenance_review`)."""

    @property
    def changed(self) -> bool:
        """True when anything a reviewer must see changes: a resource, a disruptive change, an acknowledgement
        that matches nothing, or ``gpucell:acknowledge`` itself."""
        return self.plan_diff.changed or bool(self.disruptive) or bool(self.judgement.stale) or self.acknowledge_changed


def _fingerprints(plan: Mapping[str, Any], side: str) -> dict[str, dict[str, Any]]:
    """Region -> fingerprint of a plan; a :class:`ConfigError` when a region of the plan has none."""
    found = deployed_fingerprints(plan.get("outputs") or {})
    regions = {r.get("name") for r in plan.get("resources", []) if r.get("type") == "gpucell:index:RegionalCell"}
    missing = sorted(str(r) for r in regions if r not in found)
    if missing:
        raise ConfigError.at(
            (side,),
            f"has no fingerprint for region(s) {', '.join(missing)}: it was planned by a "
            "gpucell without `gpucell diff`; plan it again with this version",
        )
    return found


def review(
    base: Mapping[str, Any],
    head: Mapping[str, Any],
    *,
    stack: str | None = None,
    base_fingerprints: Mapping[str, dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> Review:
    """Review the change from plan ``base`` to plan ``head`` (``gpucell plan --json`` documents).

    ``base_fingerprints`` replaces the base plan's own (for a base planned by an older gpucell). The head's
    ``acknowledge`` entries are matched as ``pulumi up`` would, with the base taken as the deployed state; one that
    matches nothing is listed (and counts as a change) but is not called stale, since the base may not be deployed.
    When either plan was made with ``--region`` (``regionFilter``), only the regions both hold are compared, with a
    note. Raises :class:`ConfigError` when a plan lacks fingerprints or the head's acknowledgements are malformed.
    """
    notes = list(notes or [])
    keep = _compared_regions(base, head, notes)
    if keep is not None:
        base, head = _only(base, keep), _only(head, keep)
    old = dict(base_fingerprints) if base_fingerprints is not None else _fingerprints(base, "BASE")
    new = _fingerprints(head, "HEAD")
    if keep is not None:
        old = {region: value for region, value in old.items() if region in keep}
    changes = [c for region, fingerprint in new.items() for c in compare(old.get(region), fingerprint, region)]
    changes += removed_regions(old, new)
    entries = list(head.get("acknowledge") or [])
    acknowledgements = StackAcknowledgements.model_validate({"acknowledge": entries})
    judgement = judge(changes, acknowledgements.acknowledge, judged_regions=old)
    before = list(base.get("acknowledge") or [])
    return Review(
        stack=stack or str(head.get("stack") or base.get("stack") or "?"),
        plan_diff=diff_plans(base, head),
        disruptive=changes,
        judgement=judgement,
        notes=notes,
        carried=frozenset(i for i, entry in enumerate(entries) if entry in before),
        acknowledge_changed=entries != before,
        refused=refused_together(changes)
        + [
            line
            for region, fingerprint in new.items()
            for line in skipped_releases(old.get(region), fingerprint, region)
        ],
        maintenance=maintenance(base, head),
    )


def _compared_regions(base: Mapping[str, Any], head: Mapping[str, Any], notes: list[str]) -> list[str] | None:
    """The regions to compare when either plan was made with ``--region`` (those both hold, with a note saying
    so), else ``None`` (every region: one missing from the head was removed)."""
    partial = [
        (side, region_filter(plan))
        for side, plan in (("BASE", base), ("HEAD", head))
        if region_filter(plan) is not None
    ]
    if not partial:
        return None
    held = held_regions(base)
    keep = [region for region in held_regions(head) if region in held]
    made = " and ".join(f"{side} with `--region {region}`" for side, region in partial)
    notes.append(
        f"{made}: only the region(s) both plans hold are compared ({', '.join(keep) or 'none'}); "
        "regions missing from one of them are not taken as removed"
    )
    return keep


def _only(plan: Mapping[str, Any], regions: list[str]) -> dict[str, Any]:
    """``plan`` with only the resources of ``regions``."""
    by_urn = index_plan(plan)
    return {**plan, "resources": [r for r in plan.get("resources", []) if by_urn[r["urn"]]["region"] in regions]}


def exit_code(reviews: list[Review]) -> int:
    """2 when ``pulumi up`` would refuse the head whatever is acknowledged (:attr:`Review.refused`), else 4 when
    any disruptive change, else 3 when anything changes (:attr:`Review.changed`: an acknowledgement that matches
    nothing counts), else 0."""
    if any(r.refused for r in reviews):
        return EXIT_REFUSED
    if any(r.disruptive for r in reviews):
        return EXIT_DISRUPTIVE
    return EXIT_CHANGES if any(r.changed for r in reviews) else EXIT_NO_CHANGES


# -- Markdown ----------------------------------------------------------------------------------------------------
def _cell(text: str) -> str:
    """Text made safe for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    ticks = "``" if "`" in text else "`"
    return f"{ticks}{_cell(text)}{ticks}"


def show(value: Any, fold_at: int = FOLD_AT) -> str:
    """A value as a reviewer reads it: code-formatted, secrets ``[secret]``, folded past ``fold_at`` chars."""
    if value is MISSING:
        return "*(absent)*"
    if value in (SECRET, SECRET_CHANGED):
        return f"`{value}`"
    text = _as_text(value)
    if len(text) > fold_at:
        text = f"{text[: fold_at - 20]}… ({len(text)} chars)"
    return _code(text)


ENTRY_FOLD_AT = 160
"""Characters of one entry of a list shown before it is folded (an entry is read whole: a permitted device)."""
CONTEXT = 24
"""Characters kept on each side of the part of a long text that changed."""
_TOKEN = re.compile(r"[A-Za-z0-9._+~-]")


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))


def focus(old: str, new: str) -> tuple[str, str]:
    """Two long texts cut down to the part that differs, widened to whole words (``v1.9.0``, not ``0``), with
    :data:`CONTEXT` characters around it and ``…`` where text was left out; each side folded past :data:`FOLD_AT`.
    Texts both within :data:`FOLD_AT` are returned whole.

    ``focus(".../download/v1.9.0/kubevirt-operator.yaml", ".../download/v1.9.1/kubevirt-operator.yaml")`` keeps
    ``v1.9.0`` and ``v1.9.1`` with the text around them."""
    if max(len(old), len(new)) <= FOLD_AT:
        return old, new
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0  # characters equal at the end, not overlapping the common start
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    while start > 0 and _TOKEN.match(old[start - 1]):
        start -= 1
    while end > 0 and _TOKEN.match(old[len(old) - end]):
        end -= 1
    return _cut(old, start, len(old) - end), _cut(new, start, len(new) - end)


def _cut(text: str, start: int, stop: int) -> str:
    """``text[start:stop]`` with up to :data:`CONTEXT` characters on each side, folded past :data:`FOLD_AT`."""
    left, right = max(0, start - CONTEXT), min(len(text), stop + CONTEXT)
    middle = text[start:stop]
    if len(middle) > FOLD_AT:
        middle = f"{middle[: FOLD_AT - 20]}… ({stop - start} chars)"
    return ("…" if left else "") + text[left:start] + middle + text[stop:right] + ("…" if right < len(text) else "")


def _list_change(old: list[Any], new: list[Any]) -> str:
    """A list that changed as a whole: the entries removed and added (each shown on its own), else reordered."""
    removed = [item for item in old if item not in new]
    added = [item for item in new if item not in old]
    if not removed and not added:
        return f"the same {len(new)} entries, in another order"
    entries = [f"removed {show(item, ENTRY_FOLD_AT)}" for item in removed]
    entries += [f"added {show(item, ENTRY_FOLD_AT)}" for item in added]
    return f"{len(removed)} entries removed, {len(added)} added: " + "; ".join(entries)


def _change_line(change: InputChange) -> str:
    old, new = change.old, change.new
    if isinstance(old, list) and isinstance(new, list):
        return f"{_code(change.path)}: {_list_change(old, new)}"
    secrets = (SECRET, SECRET_CHANGED)
    if MISSING not in (old, new) and old not in secrets and new not in secrets:
        before, after = focus(_as_text(old), _as_text(new))
        return f"{_code(change.path)}: {_code(before)} → {_code(after)}"
    return f"{_code(change.path)}: {show(old)} → {show(new)}"


def _counts(diffs: list[ResourceDiff]) -> str:
    return " · ".join(f"{sum(d.action == a for d in diffs)} to {a}" for a in ("create", "update", "replace", "delete"))


def _disruptive_section(item: Review) -> list[str]:
    if not item.disruptive:
        return []
    acknowledged = {id(c): a for c, a in item.judgement.acknowledged}
    lines = [f"### ⚠️ Disruptive changes ({len(item.disruptive)})", ""]
    for number, change in enumerate(item.disruptive, 1):
        lines.append(
            f"{number}. **`{change.change.value}`** in `{change.region}`: {_code(change.key)} "
            f"{_code(change.old)} → {_code(change.new)}"
            if change.new != "removed"
            else f"{number}. **`{change.change.value}`** in `{change.region}`: {_code(change.old)} removed "
            f"({_code(change.key)})"
        )
        lines.append(f"   - {change.effect[0].upper()}{change.effect[1:]}.")
        entry = acknowledged.get(id(change))
        if change.change in UNACKNOWLEDGEABLE:
            lines.append("   - ⛔ No acknowledgement allows it: `pulumi up` refuses it.")
        elif entry is not None:
            lines.append(f"   - ✅ Acknowledged: {_cell(entry.reason)}")
        else:
            lines.append(
                f"   - ❌ Not acknowledged: `pulumi up` refuses it until `gpucell:acknowledge` has "
                f"`{change.acknowledgement()}`."
            )
    lines.append("")
    return lines


def _nodes(names: list[str] | dict[str, str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _maintenance_section(item: Review) -> list[str]:
    if not item.maintenance:
        return []
    lines = ["### What running workloads go through", ""]
    for region, work in item.maintenance.items():
        lines += _serving_lines(region, work)
        if work.drained:
            lines.append(
                f"- `{region}`: {len(work.drained)} node(s) cordoned and drained one by one (pods evicted "
                f"through the Eviction API, GPU VMs stopped): {_nodes(work.drained)}"
            )
        if work.reconfigured:
            lines.append(
                f"- `{region}`: {len(work.reconfigured)} node(s) cordoned for a GPU reconfiguration (GPU "
                f"pods evicted, GPU VMs stopped): {_nodes(work.reconfigured)}"
            )
        for node, reason in work.quarantined.items():
            lines.append(
                f"- `{region}`: `{node}` quarantined (`{reason}`): cordoned and drained (pods evicted through the "
                "Eviction API, GPU VMs stopped and started again on other nodes); it stays out of service until its "
                "`quarantine` is removed"
            )
        if work.forgotten:
            lines.append(
                f"- `{region}`: `removalPolicy: forget` on {_nodes(work.forgotten)}: nothing runs on it over SSH any "
                "more (its steps do nothing); remove it from the config next to delete its Node"
            )
        if work.lifted:
            lines.append(
                f"- `{region}`: quarantine lifted on {_nodes(work.lifted)}: each is uncordoned once the GPU Operator "
                "reports its GPU state"
            )
        lines += _acceptance_lines(region, work)
        for namespace, vms in sorted(work.gpu_vms.items()):
            lines.append(
                f"  - GPU VMs of `{namespace}` stopped while their node is in maintenance, then started "
                f"again: {', '.join(f'`{v}`' for v in vms)}"
            )
        for namespace, pools in sorted(work.gpu_workers.items()):
            lines.append(
                f"  - tenant-cluster GPU workers of `{namespace}` on such a node replaced by Cluster API (each drained "
                f"in its tenant cluster first, then recreated on another node): {', '.join(f'`{p}`' for p in pools)}"
            )
        lines += _capacity_lines(region, work)
    lines.append("")
    return lines


def _acceptance_lines(region: str, work: Maintenance) -> list[str]:
    if not work.acceptance:
        return []
    low, high = min(work.acceptance.values()), max(work.acceptance.values())
    span = human(low) if low == high else f"{human(low)} to {human(high).removeprefix('about ')}"
    return [
        f"- `{region}`: {len(work.acceptance)} GPU node(s) run their acceptance run (DCGM diagnostics and an "
        f"all-reduce, or host-side checks on VM pools) before tenants may use them, {span} each, within their "
        f"rollout: {_nodes(list(work.acceptance))}"
    ]


def _serving_lines(region: str, work: Maintenance) -> list[str]:
    if not work.serving_both:
        return []
    return [
        f"- `{region}`: the GPU Operator and the `KubeVirt` CR (and the DRA driver, where there is one) serve both "
        f"the deployed and the new GPU configuration before these nodes are prepared: {_nodes(work.serving_both)}; "
        "the first `pulumi up` after they all settled narrows them to the new one"
    ]


def _capacity_lines(region: str, work: Maintenance) -> list[str]:
    lines: list[str] = []
    for resource, (before, after, reserved, used) in work.capacity.items():
        line = (
            f"- `{region}`, no longer in service: `{resource}` {before} → {after} units; tenants' quotas reserve "
            f"{reserved}, declared workloads use {used}"
        )
        if reserved > after:
            line += f"; the quotas exceed what is in service by {reserved - after} (`allowGpuOvercommit`)"
        if used > after:
            line += "; declared workloads need more than is in service: some stay Pending"
        lines.append(line)
    return lines


def _stale_section(item: Review) -> list[str]:
    if not item.judgement.stale:
        return []
    lines = ["### Acknowledgements that match no disruptive change", ""]
    for index, entry in item.judgement.stale:
        carried = (
            " It is in the base's `gpucell:acknowledge` too: remove it once the base is deployed."
            if index in item.carried
            else ""
        )
        lines.append(
            f"- `acknowledge[{index}]` {_code(entry.shown())}: matches no disruptive change between the two "
            "plans; `pulumi up` stops on it only if it also matches nothing against the deployed state." + carried
        )
    return [*lines, ""]


def _resource_row(diff: ResourceDiff) -> str:
    what: list[str] = []
    if diff.protected:
        what.append(
            "⛔ **protected**: `pulumi up` stops here until it is unprotected on purpose (`pulumi state unprotect`)"
        )
    what += [f"**replaced**: {reason}" for reason in diff.replaced_by]
    what += [f"⚠️ **immutable** {why}" for why in diff.immutable]
    what += [f"🔁 **restart required** {why}" for why in diff.restart]
    what += [_change_line(c) for c in diff.changes]
    what += [f"{_code(t.name)}: see the diff below" for t in diff.texts if diff.action != "create"]
    what += [_cell(n) for n in diff.notes]
    action = _ICONS[diff.action] + (" ⛔" if diff.protected else "")
    return f"| {action} | {_cell(diff.label)} | {'<br>'.join(what)} |"


def _region_section(region: str, diffs: list[ResourceDiff]) -> list[str]:
    title = f"`{region}`" if region else "outside any region"
    lines = [f"### Region {title}: {_counts(diffs)}", ""]
    if not diffs:
        return [*lines, "No changes.", ""]
    lines += ["| action | resource | what changes |", "|---|---|---|"]
    ordered = sorted(diffs, key=lambda d: (_ORDER[d.action], d.label))
    lines += [_resource_row(d) for d in ordered]
    lines.append("")
    for diff in ordered:
        for text in diff.texts:
            lines += [
                f"<details><summary>{text.name} ({diff.action} {diff.label})</summary>",
                "",
                "```diff",
                text.diff.rstrip("\n"),
                "```",
                "",
                "</details>",
                "",
            ]
    return lines


def _acknowledged(item: Review) -> str:
    """How the disruptive changes of ``item`` stand: how many lack an acknowledgement and how many no acknowledgement
    allows (:data:`gpucell.day2.disruption.UNACKNOWLEDGEABLE`), else "all acknowledged"."""
    missing = len(item.judgement.refused)
    never = sum(1 for change in item.disruptive if change.change in UNACKNOWLEDGEABLE)
    parts = [f"{missing} not acknowledged"] if missing else []
    parts += [f"{never} refused whatever is acknowledged"] if never else []
    return ", ".join(parts) or "all acknowledged"


def render(reviews: list[Review]) -> str:
    """The Markdown of one or more stack reviews, starting with :data:`COMMENT_MARKER`."""
    lines = [COMMENT_MARKER]
    for item in reviews:
        diffs = [d for ds in item.plan_diff.regions.values() for d in ds]
        if item.disruptive:
            status = f"**⚠️ {len(item.disruptive)} disruptive change(s)**, " + _acknowledged(item)
        elif item.changed:
            status = "no disruptive change"
        else:
            status = "no changes"
        if item.judgement.stale:
            status += f" · {len(item.judgement.stale)} acknowledgement(s) match no disruptive change"
        elif item.acknowledge_changed and not item.disruptive:
            status += " · `gpucell:acknowledge` changes"
        lines += [
            f"## gpucell diff: stack `{item.stack}`",
            "",
            f"{status} · {len(diffs)} resource(s) change: {_counts(diffs)}",
            "",
        ]
        lines += [f"> {note}" for note in item.notes] + ([""] if item.notes else [])
        lines += [f"> ⛔ Refused by `pulumi up` (no acknowledgement allows it): {_cell(line)}" for line in item.refused]
        lines += [""] if item.refused else []
        lines += _disruptive_section(item) + _maintenance_section(item) + _stale_section(item)
        for region, region_diffs in item.plan_diff.regions.items():
            if region_diffs:
                lines += _region_section(region, region_diffs)
    return "\n".join(lines).rstrip("\n") + "\n"
