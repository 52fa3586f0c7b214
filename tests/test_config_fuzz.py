"""Mutated stack configs through the real ``gpucell plan``: every mutant plans (exit 0) or fails with exit 2 and
one ``key.path: message`` line per problem, each naming a key; never a traceback, never exit 1, never a hang (each
plan is bounded to :data:`CASE_SECONDS`).

Mutants start from Pulumi.dev.yaml, Pulumi.prod-fra1.yaml and Pulumi.prod-iad1.yaml: one to three edits at random
key paths (a value replaced by a hostile one or by a value found elsewhere in the stack, a key removed, an unknown
key added, a string given a trailing newline, a list entry doubled), written back as YAML (so dates, ``!!set`` and
``!!binary`` reach the YAML reader) and planned by the CLI. The search is derandomized with a fixed example budget,
so a CI run is bounded (about a minute) and repeatable: ``GPUCELL_FUZZ_EXAMPLES`` sets the budget per stack (80 by
default), and ``bench/config_fuzz.py`` runs 10,000 mutants and counts what became of them.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import os
import re
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucell.stacks import cli
from tests.conftest import REPO

Path_ = tuple[str | int, ...]

HOSTILE: list[Any] = [
    "",
    " ",
    "\n",
    "a\nb",
    "x" * 300,
    "-",
    "..",
    "$(reboot)",
    "'; rm -rf / #",
    '"',
    "%s",
    "{}",
    "🙂",
    "\t",
    "0.0.0.0/0",
    "169.254.169.254",
    "255.255.255.255",
    "10.20.0.0",
    "10.20.0.255",
    "system:masters",
    "http://example.net/x",
    "docker://",
    "https://",
    "tenant-other",
    "kube-system",
    "v1.34.2+k3s1\n",
    "latest",
    -1,
    0,
    1,
    7,
    65536,
    2**31,
    2**63,
    1.5,
    float("nan"),
    True,
    False,
    None,
    [],
    {},
    ["a\nb"],
    {"x": 1},
    datetime.date(2025, 1, 1),
    datetime.datetime(2025, 1, 1, 12, 0),
    {"a", "b"},
    b"binary",
    "#cloud-config\nx: " + "[" * 400 + "]" * 400 + "\n",
    "version: 2\nx: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "169.254.169.254:9000",
    "https://169.254.169.254/latest/meta-data",
    "https://[fe80::1]/x",
    "localhost",
    "https://10.110.0.11:9000",
    "203.0.113.8/30",
    "10.120.3.240/29",
    "gpucell.example",
    "233A",
]
"""Values a careless user or an attacker writes: wrong types, control characters, YAML-only types, addresses and
names that isolation rules exist for (link-local, loopback, a node's, another cell's block, a parent domain), numbers
beyond physical limits, cloud-init nested past any bound, an upper-case PCI id."""
KEYS_OK = re.compile(r"(regions|acknowledge|Pulumi\.[a-z]+\.yaml)\b.*|[A-Za-z][A-Za-z0-9_-]*")
"""What an error line's key path starts with: a region key, the stack file, or a config key (a secret's name)."""


def _base(stack: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key path under ``node`` (maps and lists), leaves and inner nodes alike."""
    out: list[Path_] = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        out.append((*prefix, key))
        out += _paths(child, (*prefix, key))
    return out


def _extended_dev() -> dict[str, Any]:
    """Pulumi.dev.yaml with every key added since the fuzz test was first written that prod does not already
    carry: sign-in (OIDC), the k3s profile, etcd snapshots to S3, a NodePort with allowFromCidrs, a second
    storage class, the servers' allowWorkloads, hugepage and ephemeral-storage quotas, and acknowledgements."""
    config = _base("dev")
    lab = config["config"]["gpucell:regions"]["lab1"]
    lab["oidc"] = {
        "issuerUrl": "https://login.lab.example/realms/lab",
        "clientId": "kubernetes",
        "usernameClaim": "email",
        "groupsClaim": "groups",
    }
    lab["k3s"] = {"profile": "cis", "secretsEncryption": True}
    lab["etcd"] = {
        "snapshots": {
            "schedule": "0 */6 * * *",
            "retention": 10,
            "s3": {
                "endpoint": "minio.lab.example:9000",
                "bucket": "lab-etcd",
                "region": "eu-central-1",
                "folder": "lab1",
                "credentialsConfigKey": "etcdS3CredentialsLab1",
            },
        }
    }
    lab["storage"]["otherClasses"] = ["nfs"]
    lab["nodePools"]["servers"]["allowWorkloads"] = True
    research = lab["tenants"]["research"]
    research["quota"].update({"nodePorts": 1, "hugepagesGib": 16, "ephemeralStorageGib": 200})
    research["virtualMachines"]["bastion"]["sshService"] = {"type": "NodePort", "allowFromCidrs": ["198.51.100.0/24"]}
    config["config"]["gpucell:etcdS3CredentialsLab1"] = {"secure": "v1:placeholder"}
    config["config"]["gpucell:acknowledge"] = [{"change": "podCidr", "region": "lab1", "reason": "CHG-1"}]
    return config


def _leaves(node: Any) -> Iterator[Any]:
    """Every scalar of ``node`` (maps and lists walked), in document order."""
    items = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
    if items is None:
        yield node
        return
    for child in items:
        yield from _leaves(child)


FUZZED = ("gpucell:regions", "gpucell:acknowledge")
"""The config keys whose values are mutated."""
BASES = {
    "dev": _base("dev"),
    "prod-fra1": _base("prod-fra1"),
    "prod-iad1": _base("prod-iad1"),
    "dev-extended": _extended_dev(),
}
PATHS = {
    stack: [path for key in FUZZED if key in config["config"] for path in _paths({key: config["config"][key]})]
    for stack, config in BASES.items()
}
BORROWED = sorted(
    {repr(leaf): leaf for config in BASES.values() for leaf in _leaves(config["config"]) if leaf is not None}.values(),
    key=repr,
)
"""Every scalar the base stacks hold (an address, a pool, a host name, a bucket): put at another key, they collide
with what that key must differ from (a node's address as an S3 endpoint, one region's block in the other)."""
CASE_SECONDS = 120
"""The longest one mutant may plan; past it the case is a hang (the prod stack plans in a few seconds)."""


@st.composite
def mutations(draw: st.DrawFn, stack: str) -> list[tuple[str, Path_, Any]]:
    """One to three ``(operation, path under the config's gpucell:regions or gpucell:acknowledge, value)`` edits."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS[stack]))
        operation = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "newline", "double"]))
        value = draw(
            st.one_of(
                st.sampled_from(HOSTILE),
                st.sampled_from(BORROWED),
                st.text(max_size=12),
                st.integers(-(2**40), 2**40),
            )
        )
        edits.append((operation, path, value))
    return edits


def _apply(config: dict[str, Any], edits: list[tuple[str, Path_, Any]]) -> None:
    for operation, path, value in edits:
        parent: Any = config
        try:
            for key in path[:-1]:
                parent = parent[key] if isinstance(parent, dict | list) else {}[key]
            current = parent[path[-1]] if isinstance(parent, dict | list) else {}[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this path (a string is no container, though indexable)
        last = path[-1]
        if operation == "replace":
            parent[last] = value
        elif operation == "delete":
            del parent[last]
        elif operation == "add" and isinstance(current, dict):
            current[value if isinstance(value, str | int) else "unknownKey"] = copy.deepcopy(value)
        elif operation == "newline" and isinstance(current, str):
            parent[last] = current + "\n"
        elif operation == "double" and isinstance(current, list) and current:
            current.append(copy.deepcopy(current[0]))


class HangError(Exception):
    """A mutant planned past :data:`CASE_SECONDS`."""


@contextlib.contextmanager
def _bounded(seconds: int) -> Iterator[None]:
    """Raise :class:`HangError` in the body after ``seconds`` (SIGALRM: the main thread of a POSIX process)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise HangError(f"planned for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _plan(stack: str, config: dict[str, Any]) -> tuple[int, str, str]:
    stack = stack.split("-", maxsplit=1)[0]  # dev-extended is planned as stack dev, prod-fra1 as prod
    with tempfile.TemporaryDirectory(prefix="gpucell-fuzz-") as tmp:
        (Path(tmp) / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
        (Path(tmp) / f"Pulumi.{stack}.yaml").write_text(yaml.dump(config, Dumper=yaml.SafeDumper, allow_unicode=True))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _bounded(CASE_SECONDS):
            code = cli.main(["plan", stack, "--project-dir", tmp])
    return code, out.getvalue(), err.getvalue()


def outcome(stack: str, edits: list[tuple[str, Path_, Any]]) -> tuple[str, str]:
    """What became of a mutant: ``("planned", "")``, ``("refused", <its lines>)`` with one well-formed
    ``key.path: message`` line per problem, or ``(<"exit 1", "exit 2 malformed", "hang" or "exception">, detail)``.
    An exception escaping the CLI (it never should: it prints ``error: ...`` and exits 1) is caught here too."""
    config = copy.deepcopy(BASES[stack])
    _apply(config["config"], edits)
    try:
        code, _, err = _plan(stack, config)
    except HangError as exc:
        return "hang", str(exc)
    except Exception as exc:  # counted and shown, never hidden
        return "exception", f"{type(exc).__name__}: {exc}"
    if code == 0:
        return ("planned", "") if err == "" else ("exit 0 with output", err)
    if code != 2:
        return f"exit {code}", err
    lines = err.splitlines()
    problem = "exit 2 without a line" if not lines else "a line twice" if len(lines) != len(set(lines)) else None
    for line in lines:
        key, sep, message = line.partition(": ")
        if not (sep and key.strip() and message.strip() and KEYS_OK.fullmatch(key)) or line.startswith("Traceback"):
            problem = f"not a 'key.path: message' line naming a key: {line!r}"
    return ("exit 2 malformed", f"{problem}\n{err}") if problem else ("refused", err)


def _check(stack: str, edits: list[tuple[str, Path_, Any]]) -> None:
    kind, detail = outcome(stack, edits)
    assert kind in ("planned", "refused"), f"{kind} for {edits!r}:\n{detail}"


FUZZ = settings(
    max_examples=int(os.environ.get("GPUCELL_FUZZ_EXAMPLES", "80")),
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""A fixed, derandomized budget: the same mutants per stack on every run (80, or ``GPUCELL_FUZZ_EXAMPLES``)."""


@FUZZ
@given(mutations("dev"))
def test_mutated_dev_configs_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("dev", edits)


@FUZZ
@given(mutations("prod-fra1"))
def test_mutated_prod_fra1_configs_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("prod-fra1", edits)


@FUZZ
@given(mutations("prod-iad1"))
def test_mutated_prod_iad1_configs_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("prod-iad1", edits)


@FUZZ
@given(mutations("dev-extended"))
def test_mutated_keys_added_since_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("dev-extended", edits)


def test_the_extended_base_plans_and_covers_the_keys_added_since() -> None:
    assert _plan("dev-extended", copy.deepcopy(BASES["dev-extended"]))[0] == 0
    covered = {path[:5] for path in PATHS["dev-extended"]} | {path[:3] for path in PATHS["dev-extended"]}
    lab = ("gpucell:regions", "lab1")
    for path in [
        (*lab, "oidc"),
        (*lab, "k3s"),
        (*lab, "etcd"),
        (*lab, "storage"),
        ("gpucell:acknowledge", 0),
        (*lab, "tenants", "research", "virtualMachines"),
        (*lab, "nodePools", "servers"),
    ]:
        assert any(c[: len(path)] == path for c in covered), path
    prod = {path[:6] for path in PATHS["prod-fra1"]}
    for key in ("nodePorts", "deviceClasses"):
        assert ("gpucell:regions", "fra1", "tenants", "acme", "quota", key) in prod
