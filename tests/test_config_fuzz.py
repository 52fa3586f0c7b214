"""Mutated stack configs through the real ``gpucell plan``: every mutant plans (exit 0) or fails with exit 2 and
one ``key.path: message`` line per problem, each naming a key; never a traceback, never exit 1.

Mutants start from Pulumi.dev.yaml and Pulumi.prod.yaml: one to three edits at random key paths (a value replaced
by a hostile one, a key removed, an unknown key added, a string given a trailing newline, a list entry doubled),
written back as YAML (so dates, ``!!set`` and ``!!binary`` reach the YAML reader) and planned by the CLI. The
search is derandomized with a fixed example budget, so a CI run is bounded (seconds) and repeatable.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import io
import re
import tempfile
from pathlib import Path
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
]
"""Values a careless user or an attacker writes: wrong types, control characters, YAML-only types, addresses and
names that isolation rules exist for, numbers beyond physical limits."""
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


FUZZED = ("gpucell:regions", "gpucell:acknowledge")
"""The config keys whose values are mutated."""
BASES = {"dev": _base("dev"), "prod": _base("prod"), "dev-extended": _extended_dev()}
PATHS = {
    stack: [path for key in FUZZED if key in config["config"] for path in _paths({key: config["config"][key]})]
    for stack, config in BASES.items()
}


@st.composite
def mutations(draw: st.DrawFn, stack: str) -> list[tuple[str, Path_, Any]]:
    """One to three ``(operation, path under the config's gpucell:regions or gpucell:acknowledge, value)`` edits."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS[stack]))
        operation = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "newline", "double"]))
        value = draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12), st.integers(-(2**40), 2**40)))
        edits.append((operation, path, value))
    return edits


def _apply(config: dict[str, Any], edits: list[tuple[str, Path_, Any]]) -> None:
    for operation, path, value in edits:
        parent: Any = config
        try:
            for key in path[:-1]:
                parent = parent[key]
            current = parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this path
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


def _plan(stack: str, config: dict[str, Any]) -> tuple[int, str, str]:
    stack = stack.split("-", maxsplit=1)[0]  # dev-extended is planned as stack dev
    with tempfile.TemporaryDirectory(prefix="gpucell-fuzz-") as tmp:
        (Path(tmp) / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
        (Path(tmp) / f"Pulumi.{stack}.yaml").write_text(yaml.dump(config, Dumper=yaml.SafeDumper, allow_unicode=True))
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["plan", stack, "--project-dir", tmp])
    return code, out.getvalue(), err.getvalue()


def _check(stack: str, edits: list[tuple[str, Path_, Any]]) -> None:
    config = copy.deepcopy(BASES[stack])
    _apply(config["config"], edits)
    code, _, err = _plan(stack, config)
    assert code in (0, 2), f"exit {code} for {edits!r}:\n{err}"
    if code == 0:
        assert err == "", err
        return
    lines = err.splitlines()
    assert lines, f"exit 2 without a line for {edits!r}"
    assert len(lines) == len(set(lines)), err
    for line in lines:
        key, sep, message = line.partition(": ")
        assert sep, f"not a 'key.path: message' line: {line!r}"
        assert key.strip(), f"an empty key path: {line!r}"
        assert message.strip(), f"no message: {line!r}"
        assert KEYS_OK.fullmatch(key), f"no key named in {line!r}"
        assert not line.startswith(("error:", "Traceback")), line


FUZZ = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""A fixed, derandomized budget: the same 40 mutants per stack on every run."""


@FUZZ
@given(mutations("dev"))
def test_mutated_dev_configs_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("dev", edits)


@FUZZ
@given(mutations("prod"))
def test_mutated_prod_configs_plan_or_fail_with_one_line_per_problem(edits: list[tuple[str, Path_, Any]]) -> None:
    _check("prod", edits)


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
    prod = {path[:6] for path in PATHS["prod"]}
    for key in ("nodePorts", "deviceClasses"):
        assert ("gpucell:regions", "fra1", "tenants", "acme", "quota", key) in prod
