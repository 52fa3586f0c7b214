"""The guard in ``pulumi up``: disruptive changes against the last deployment are refused unless acknowledged.

Each cell exports its fingerprint (:func:`gpucell.day2.disruption.fingerprint`) as the stack output
``<region>Fingerprint``. Before registering anything, the program reads the outputs of this very stack's last
deployment with the engine's builtin invoke ``pulumi:pulumi:readStackOutputs`` for ``<organization>/<project>/
<stack>``, through the SDK's public, synchronous ``pulumi.runtime.invoke`` (the builtin is what every
``StackReference`` reads through; the Node.js SDK's synchronous ``StackReference`` outputs call this very invoke,
``sdk/nodejs/stackReference.ts``; it returns ``{name, outputs, secretOutputNames}``, the outputs an empty map when
the stack was never deployed: pulumi/pulumi ``pkg/resource/deploy/builtins.go`` and ``pkg/backend/backend.go``
``GetStackOutputs``). It compares each
region's deployed fingerprint with the planned one (:func:`gpucell.day2.disruption.compare`) and stops with one line per
change that no ``gpucell:acknowledge`` entry matches, and one per entry that matches nothing in a region whose
deployed state it read. A region without a deployed fingerprint (first deploy, or a deployment by a gpucell
without this guard) is not judged.

The read blocks the program until the engine answers (``invoke`` is synchronous), so a refusal happens before a
single resource is registered, in ``pulumi preview`` as in ``pulumi up``; it registers no resource. The offline
plan's mock engine answers the invoke with no outputs: ``gpucell plan`` plans as a first deploy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from gpucell.day2.disruption import (
    Judgement,
    compare,
    fingerprint,
    judge,
    refused_together,
    removed_regions,
    skipped_releases,
)
from gpucell.day2.gpu_serving import RECORD_SUFFIX, records_from_fingerprint
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.stacks.config import StackConfig

__all__ = [
    "FINGERPRINT_SUFFIX",
    "READ_STACK_OUTPUTS",
    "check_against",
    "deployed_fingerprints",
    "deployed_gpu_nodes",
    "fingerprint_output",
    "gpu_nodes_output",
    "integral_numbers",
    "read_last_deployment",
    "stack_reference_name",
]

FINGERPRINT_SUFFIX = "Fingerprint"
"""Stack output ``<region>Fingerprint`` holds the region's fingerprint."""
READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
"""The engine's builtin invoke that reads a stack's outputs (``{name}`` -> ``{name, outputs, secretOutputNames}``)."""


def fingerprint_output(region: str) -> str:
    """The stack output that holds ``region``'s fingerprint (region names are lower case, so it never collides)."""
    return f"{region}{FINGERPRINT_SUFFIX}"


def gpu_nodes_output(region: str) -> str:
    """The stack output that records ``region``'s hosts' GPU configurations at the last completed deployment
    (:func:`gpucell.day2.gpu_serving.node_records`)."""
    return f"{region}{RECORD_SUFFIX}"


def deployed_gpu_nodes(outputs: Mapping[str, Any], region: str, cell: CellSpec) -> dict[str, dict[str, Any]] | None:
    """``region``'s record of its last completed deployment from stack ``outputs``: ``<region>GpuNodes``, else (a
    deployment by a gpucell without it) what its ``<region>Fingerprint`` tells
    (:func:`gpucell.day2.gpu_serving.records_from_fingerprint`), else ``None`` (never deployed)."""
    recorded = outputs.get(gpu_nodes_output(region))
    if isinstance(recorded, Mapping):
        return {str(host): dict(value) for host, value in recorded.items() if isinstance(value, Mapping)}
    deployed = outputs.get(fingerprint_output(region))
    return records_from_fingerprint(deployed, cell) if isinstance(deployed, Mapping) else None


def stack_reference_name() -> str:
    """``<organization>/<project>/<stack>`` of the running program (organization ``organization`` on a DIY
    backend)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def integral_numbers(value: Any) -> Any:
    """``value`` with every float that is a whole number turned back into the ``int`` it was exported as, in maps
    and lists at any depth (other values unchanged).

    Stack outputs cross the engine as protobuf ``Struct`` values, whose only number is a double: the Python SDK
    reads ``200`` back as ``200.0`` (pulumi/pulumi#8459). The fingerprint's numbers are ints
    (``network.podCidrMaskSize``, ``metrics.storageGib``, ``metrics.retentionDays``, ``version``), and the rule
    compares them as ints: ``metrics.storageGib`` read back as ``200.0`` would never count as a shrink."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: integral_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [integral_numbers(item) for item in value]
    return value


def read_last_deployment() -> dict[str, Any]:
    """The stack outputs of this stack's last deployment, ``{}`` when there is none (or when the engine's answer
    holds no outputs map), whole numbers as ints (:func:`integral_numbers`). Invokes :data:`READ_STACK_OUTPUTS` for
    :func:`stack_reference_name`; registers nothing. An engine error (e.g. a backend that cannot be read) propagates
    as the SDK raises it."""
    answer = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": stack_reference_name()}).value
    outputs = answer.get("outputs") if isinstance(answer, Mapping) else None
    return integral_numbers(dict(outputs)) if isinstance(outputs, Mapping) else {}


def deployed_fingerprints(outputs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Region -> deployed fingerprint, from stack outputs (outputs other than ``<region>Fingerprint`` ignored)."""
    return {
        key.removesuffix(FINGERPRINT_SUFFIX): dict(value)
        for key, value in outputs.items()
        if key.endswith(FINGERPRINT_SUFFIX) and isinstance(value, Mapping)
    }


def check_against(stack: StackConfig, deployed: Mapping[str, Mapping[str, Any]]) -> Judgement:
    """Judge the planned cells of ``stack`` against the ``deployed`` fingerprints.

    Raises :class:`ConfigError` with what no acknowledgement allows (:func:`gpucell.day2.disruption.refused_together`:
    more than one server removed from a region; :func:`gpucell.day2.disruption.skipped_releases`: an upgrade that skips
    a minor release of Cilium, Longhorn or KubeVirt), then, for each unacknowledged disruptive change, its
    :meth:`~gpucell.day2.disruption.DisruptiveChange.refusal` line, and for each stale acknowledgement
    ``acknowledge[<i>]: {change: ..., region: ...} matches no disruptive change against the last deployment of
    <region>; remove it``. Returns the judgement when nothing is refused.
    """
    planned = {region: fingerprint(spec) for region, spec in stack.spec.regions.items()}
    changes = [change for region, new in planned.items() for change in compare(deployed.get(region), new, region)]
    changes += removed_regions(deployed, planned)
    judgement = judge(changes, stack.acknowledgements, judged_regions=deployed)
    lines = refused_together(changes)
    lines += [line for region, new in planned.items() for line in skipped_releases(deployed.get(region), new, region)]
    lines += [change.refusal() for change in judgement.refused]
    lines += [
        f"acknowledge[{index}]: {entry.shown()} matches no disruptive change against the last deployment of "
        f"{entry.region}; remove it (it was applied, or the change it names is no longer planned)"
        for index, entry in judgement.stale
    ]
    if lines:
        raise ConfigError(lines)
    return judgement
