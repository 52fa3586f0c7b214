"""Input that is hostile or broken ends at once with one line naming the bound or the key, exit 2, never a hang,
never a traceback, never a secret's text (issue 17: alias bombs, huge or deep files, non-UTF-8, malformed secrets,
unwritable outputs)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from gpucell import errors
from gpucell.engine.mock_engine import run_program
from gpucell.stacks import cli, plan, program
from gpucell.stacks.plan import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES
from gpucell.stacks.plan_file import MAX_PLAN_BYTES, MAX_PLAN_DEPTH
from gpucell.stacks.program import main as program_main
from gpucell.testing import provider_outputs
from tests.conftest import REPO, prod_lab_config

PROD: dict[str, Any] = prod_lab_config()
"""Both production regions and their secrets as one lab stack's config."""


@pytest.fixture(autouse=True)
def no_server_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pulumi up``'s program probes each server's SSH port before it builds the cells (up to 5 s each when nothing
    answers: half a minute for prod's six servers): here none answers, at once, as on a machine with no route to
    them (each region's first server stays its control server: ``control_server.choose_control_server``)."""
    monkeypatch.setattr(program, "ssh_banner_problem", lambda address, port: "no answer within 5 s")


def _project(tmp_path: Path, stack_text: str | bytes, stack: str = "dev") -> Path:
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    target = tmp_path / f"Pulumi.{stack}.yaml"
    if isinstance(stack_text, bytes):
        target.write_bytes(stack_text)
    else:
        target.write_text(stack_text)
    return tmp_path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _never_for_the_stack_file(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """Make the YAML loader's ``step`` (``__init__``: reading the file at all; ``construct_document``: building the
    values from the composed nodes) fail the test when it runs on ``Pulumi.dev.yaml``: the bound under test must stop
    the read before that step. The project file ``Pulumi.yaml`` is read as usual."""
    original = getattr(plan._UniqueKeyLoader, step)

    def guarded(self: yaml.Loader, source: Any) -> Any:
        name = source.name if step == "__init__" else source.start_mark.name
        if str(name).endswith("Pulumi.dev.yaml"):
            raise AssertionError(f"{step} ran on Pulumi.dev.yaml: the bound did not stop the read before it")
        return original(self, source)

    monkeypatch.setattr(plan._UniqueKeyLoader, step, guarded)


def _bomb(levels: int = 9, width: int = 9) -> str:
    lines = ["config:", "  gpucell:regions:", f"    a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("command", [["plan", "dev"], ["schemas", "fetch", "dev"]])
def test_an_alias_bomb_stops_at_once_with_one_line(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path, _bomb())
    # refused from the composed nodes, each measured once: the expansion (9^10 values) is never constructed
    _never_for_the_stack_file(monkeypatch, "construct_document")
    assert _run(*command, "--project-dir", str(project)) == (
        2,
        "",
        (
            f"Pulumi.dev.yaml: holds more than {MAX_VALUES} values once its YAML aliases are expanded (an alias counts "
            f"each time it is used); gpucell reads at most {MAX_VALUES}\n"
        ),
    )


def test_a_recursive_alias_is_one_line(tmp_path: Path) -> None:
    project = _project(tmp_path, "config:\n  gpucell:regions: &r {lab1: *r}\n")
    assert _run("plan", "dev", "--project-dir", str(project))[:3] == (
        2,
        "",
        (
            "Pulumi.dev.yaml: holds a YAML alias to a value that contains the alias (a recursive value), which JSON "
            "config cannot carry; write the value out\n"
        ),
    )


def test_nesting_past_the_bound_is_one_line(tmp_path: Path) -> None:
    project = _project(tmp_path, "config:\n  gpucell:regions: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n")
    assert _run("plan", "dev", "--project-dir", str(project))[:3] == (
        2,
        "",
        (
            f"Pulumi.dev.yaml: nests mappings and lists more than {MAX_DEPTH} levels deep; gpucell reads at most "
            f"{MAX_DEPTH}\n"
        ),
    )


def test_a_file_past_the_size_bound_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (REPO / "Pulumi.dev.yaml").read_text() + "#" * MAX_FILE_BYTES + "\n"
    project = _project(tmp_path, text)
    _never_for_the_stack_file(monkeypatch, "__init__")
    assert _run("plan", "dev", "--project-dir", str(project)) == (
        2,
        "",
        (
            f"Pulumi.dev.yaml: is {len(text)} bytes; gpucell reads stack and project files of at most {MAX_FILE_BYTES} "
            "bytes (4 MiB)\n"
        ),
    )


@pytest.mark.parametrize("command", [["plan", "dev"], ["schemas", "fetch", "dev"]])
def test_a_stack_file_that_is_not_utf8_is_one_line(tmp_path: Path, command: list[str]) -> None:
    text = (REPO / "Pulumi.dev.yaml").read_bytes().replace(b"lab-admins", b"lab-\xff\xfe")
    line = text[: text.index(b"\xff")].count(b"\n") + 1
    project = _project(tmp_path, text)
    assert _run(*command, "--project-dir", str(project))[:3] == (
        2,
        "",
        (
            f"Pulumi.dev.yaml: is not UTF-8 text (byte 0xff on line {line}); save it as UTF-8, the only encoding the "
            "Pulumi CLI reads\n"
        ),
    )


def test_problems_past_the_bound_end_in_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    tenant = config["config"]["gpucell:regions"]["lab1"]["tenants"]["research"]
    tenant.update({f"typo{i:05d}": i for i in range(20000)})  # problems past the bound are not even formatted
    project = _project(tmp_path, yaml.safe_dump(config))
    formatted = []
    line = errors._line
    monkeypatch.setattr(errors, "_line", lambda *args: formatted.append(1) or line(*args))
    code, out, err = _run("plan", "dev", "--project-dir", str(project))
    lines = err.splitlines()
    assert (code, out, len(lines)) == (2, "", 101)
    assert lines[0].startswith("regions.lab1.tenants.research.typo00000: unknown key; accepted keys are ")
    assert lines[-1] == (
        "gpucell: more than 100 problems; the first 100 are shown (gpucell reports at most 100 per run)"
    )
    # of 20,000 problems, twice the bound are formatted (duplicates are dropped after formatting), in each of the
    # plan's two validations of the stack (its placeholder outputs, then the program's own)
    assert len(formatted) == 2 * (2 * errors.MAX_PROBLEMS)


def test_every_unknown_top_level_key_is_reported_in_one_run(tmp_path: Path) -> None:
    config = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    config["config"].update({"gpucell:sshPrivatekey": "x", "gpucell:aknowledge": []})
    project = _project(tmp_path, yaml.safe_dump(config))
    accepted = "acknowledge, gpuModels, hfTokenResearch, otherCells, production, regions, sshPrivateKey"
    assert _run("plan", "dev", "--project-dir", str(project))[:3] == (
        2,
        "",
        (
            f"aknowledge: unknown key in the gpucell namespace; accepted keys are {accepted}\n"
            f"sshPrivatekey: unknown key in the gpucell namespace; accepted keys are {accepted}\n"
        ),
    )


def test_plan_out_to_an_unwritable_path_is_one_line_before_planning(tmp_path: Path) -> None:
    code, out, err = _run("plan", "dev", "--project-dir", str(REPO), "--out", "/proc/gpucell-plan")
    assert (code, out) == (2, "")
    assert err == "--out: '/proc/gpucell-plan' cannot be written (No such file or directory); give a writable path\n"


# -- secrets never reach an error, a warning or a log line ----------------------------------------------------

SENTINEL = "SENTINEL-d0-not-print"
"""Planted in every secret-bearing config path; no line the program writes may hold it."""


def _secrets(**overrides: str) -> dict[str, str]:
    values = {
        "gpucell:sshPrivateKey": f"-----BEGIN OPENSSH PRIVATE KEY-----{SENTINEL}-ssh",
        "gpucell:hfTokenAcme": f"hf_{SENTINEL}-hf",
        "gpucell:s3CredentialsGlobex": f"AKIA{SENTINEL}:{SENTINEL}-s3",
        "gpucell:etcdS3CredentialsFra1": f"AKIA{SENTINEL}:{SENTINEL}-etcd-fra1",
        "gpucell:etcdS3CredentialsIad1": f"AKIA{SENTINEL}:{SENTINEL}-etcd-iad1",
        "gpucell:remoteWriteFra1": f"fra1-{SENTINEL}:{SENTINEL}-remote-write",
        "gpucell:remoteWriteIad1": f"iad1-{SENTINEL}:{SENTINEL}-remote-write",
        "gpucell:backupS3Fra1": f"AKIA{SENTINEL}:{SENTINEL}-backup-fra1",
        "gpucell:backupS3Iad1": f"AKIA{SENTINEL}:{SENTINEL}-backup-iad1",
        "gpucell:backupRepoFra1": f"{SENTINEL}-repository-fra1",
        "gpucell:backupRepoIad1": f"{SENTINEL}-repository-iad1",
        "gpucell:vllmApiKeyAcme": f"{SENTINEL}-vllm",
    }
    values.update(overrides)
    return values


def _program(config: dict[str, Any], caplog: pytest.LogCaptureFixture) -> tuple[str, list[str]]:
    """The error text (``""`` when the program ran) and every warning and log line of one run; every key but a
    plain (not text) ``gpucell:regions`` is secret."""
    secret = [key for key in config if key != "gpucell:regions" or isinstance(config[key], str)]
    return _run_program(config, secret, caplog)


def _run_program(config: dict[str, Any], secret: list[str], caplog: pytest.LogCaptureFixture) -> tuple[str, list[str]]:
    error = ""
    warnings: list[str] = []
    with caplog.at_level("DEBUG"):
        try:
            warnings = run_program(
                program_main, config=config, secret_keys=secret, computed=provider_outputs()
            ).warnings
        except pulumi.RunError as exc:
            error = str(exc)
    return error, warnings + [record.getMessage() for record in caplog.records]


def test_sentinels_in_every_secret_reach_no_warning_or_log(caplog: pytest.LogCaptureFixture) -> None:
    error, lines = _program({"gpucell:regions": PROD["gpucell:regions"], **_secrets()}, caplog)
    assert error == ""
    assert [line for line in lines if SENTINEL in line] == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"gpucell:s3CredentialsGlobex": f"{SENTINEL}-no-colon"},
            "s3CredentialsGlobex: s3 credentials must be '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>' "
            "(regions.fra1.tenants.globex.modelEndpoints.fraud-detector reads it for s3:// storage); set it with "
            "`pulumi config set --secret s3CredentialsGlobex -- '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>'`",
        ),
        (
            {"gpucell:etcdS3CredentialsFra1": f"{SENTINEL}-no-colon"},
            "etcdS3CredentialsFra1: is not '<access key id>:<secret access key>' (regions.fra1.etcd.snapshots.s3."
            "credentialsConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            "etcdS3CredentialsFra1 -- '<access key id>:<secret access key>'`",
        ),
        (
            {"gpucell:etcdS3CredentialsIad1": f":{SENTINEL}"},
            "etcdS3CredentialsIad1: is not '<access key id>:<secret access key>' (regions.iad1.etcd.snapshots.s3."
            "credentialsConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            "etcdS3CredentialsIad1 -- '<access key id>:<secret access key>'`",
        ),
        (
            {"gpucell:hfTokenAcme": "   "},
            "hfTokenAcme: the Hugging Face token is empty (regions.fra1.tenants.acme.modelEndpoints.llama-8b reads it "
            "for hf:// storage); set it with `pulumi config set --secret hfTokenAcme -- <token>`",
        ),
        (
            {"gpucell:backupS3Fra1": f"{SENTINEL}-no-colon"},
            "backupS3Fra1: is not '<access key id>:<secret access key>' (regions.fra1.backups.storage."
            "credentialsConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            "backupS3Fra1 -- '<access key id>:<secret access key>'`",
        ),
        (
            {"gpucell:backupRepoIad1": SENTINEL[:15]},
            "backupRepoIad1: is not a password of at least 16 characters (regions.iad1.backups."
            "repositoryPasswordConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            'backupRepoIad1 -- "$(openssl rand -base64 32)"`',
        ),
        (
            {"gpucell:remoteWriteFra1": f"{SENTINEL}-no-colon"},
            "remoteWriteFra1: is not '<user>:<password>' (regions.fra1.metrics.remoteWrite.credentialsConfigKey "
            "names it; the value is not shown); set it with `pulumi config set --secret remoteWriteFra1 -- "
            "'<user>:<password>'`",
        ),
        (
            {"gpucell:remoteWriteIad1": f":{SENTINEL}"},
            "remoteWriteIad1: is not '<user>:<password>' (regions.iad1.metrics.remoteWrite.credentialsConfigKey "
            "names it; the value is not shown); set it with `pulumi config set --secret remoteWriteIad1 -- "
            "'<user>:<password>'`",
        ),
        (
            {"gpucell:regions": f"{{not json {SENTINEL}"},
            "regions: is a secure: value that does not decrypt to a YAML/JSON object (its text is not shown); store it "
            "as plain YAML in the stack file, or encrypt JSON text",
        ),
        (
            {"gpucell:acknowledge": f"[{SENTINEL}"},
            "acknowledge: is a secure: value that does not decrypt to a YAML/JSON list (its text is not shown); store "
            "it as plain YAML in the stack file, or encrypt JSON text",
        ),
    ],
    ids=[
        "s3",
        "etcd-no-colon",
        "etcd-no-id",
        "hf-empty",
        "backup-no-colon",
        "backup-password-short",
        "remote-write-no-colon",
        "remote-write-no-user",
        "regions",
        "acknowledge",
    ],
)
def test_a_malformed_secret_is_one_line_without_its_text(
    overrides: dict[str, str], expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    config: dict[str, Any] = {"gpucell:regions": PROD["gpucell:regions"], **_secrets(**overrides)}
    error, lines = _program(config, caplog)
    assert error == expected
    assert SENTINEL not in error
    assert [line for line in lines if SENTINEL in line] == []


@pytest.mark.parametrize(
    ("user_data", "problem"),
    [
        (f"export TOKEN={SENTINEL}\n", "is not cloud-config: its first line must be #cloud-config"),
        (f"#cloud-config\n{SENTINEL}: [\n", "is not valid YAML (line 3)"),
        (f"#cloud-config\nwhen: 2024-13-45\ntoken: {SENTINEL}\n", "is not valid YAML: a value reads as a date"),
        (f"#cloud-config\n{SENTINEL}: 1\n{SENTINEL}: 2\n", "holds a key twice in one mapping (lines 2 and 3)"),
    ],
    ids=["first-line", "yaml", "date", "twice"],
)
def test_secret_user_data_that_is_refused_is_one_line_without_its_text(
    user_data: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    regions = copy.deepcopy(PROD["gpucell:regions"])
    regions["fra1"]["tenants"]["acme"]["virtualMachines"]["train-01"]["cloudInit"] = {"userDataConfigKey": "acmeUd"}
    error, lines = _program({"gpucell:regions": regions, **_secrets(**{"gpucell:acmeUd": user_data})}, caplog)
    assert error.startswith(
        "regions.fra1.tenants.acme.virtualMachines.train-01.cloudInit.userDataConfigKey: the user data in secret "
        f"'acmeUd' {problem}"
    )
    assert error.endswith("(the value is not shown)")
    assert [line for line in [error, *lines] if SENTINEL in line] == []


def test_plain_regions_that_are_not_json_name_the_key_only(caplog: pytest.LogCaptureFixture) -> None:
    secrets = _secrets()
    error, _ = _run_program({"gpucell:regions": "{oops", **secrets}, list(secrets), caplog)
    assert error == (
        "regions: is not a YAML/JSON object; write it as a YAML mapping or list under gpucell:regions in the stack file"
    )


def test_secure_regions_that_decrypt_to_json_show_key_paths_and_no_value(caplog: pytest.LogCaptureFixture) -> None:
    """A ``secure:`` ``gpucell:regions`` is handed over decrypted and read like the plain value: a refusal keeps
    the key path of each problem and never the value (a rule's message quotes it, shortened or not)."""
    regions = copy.deepcopy(PROD["gpucell:regions"])
    regions["fra1"]["network"]["podCidr"] = f"{SENTINEL}/16"
    regions["iad1"]["ssh"]["user"] = f"{SENTINEL}-{'x' * 80}"
    error, lines = _program({"gpucell:regions": json.dumps(regions), **_secrets()}, caplog)
    why = (
        "is refused (gpucell:regions is a secure: value, so the reason, which may quote it, is not shown; plan the "
        "decrypted value as plain YAML in a scratch stack to see it)"
    )
    assert error.splitlines() == [f"regions.fra1.network.podCidr: {why}", f"regions.iad1.ssh.user: {why}"]
    assert [line for line in [error, *lines] if SENTINEL[:10] in line] == []  # not even a shortened value


def test_plain_regions_still_show_the_bad_value(caplog: pytest.LogCaptureFixture) -> None:
    regions = copy.deepcopy(PROD["gpucell:regions"])
    regions["fra1"]["network"]["podCidr"] = "10.0.0.0/33"
    error, _ = _program({"gpucell:regions": regions, **_secrets()}, caplog)
    assert error.startswith("regions.fra1.network.podCidr: '10.0.0.0/33' is invalid")


@pytest.mark.parametrize("key", ["", "  "])
def test_an_empty_etcd_credentials_config_key_is_one_line(tmp_path: Path, key: str) -> None:
    config = copy.deepcopy(PROD)
    config["gpucell:regions"]["fra1"]["etcd"]["snapshots"]["s3"]["credentialsConfigKey"] = key
    project = _project(tmp_path, yaml.safe_dump({"config": config}))
    assert _run("plan", "dev", "--project-dir", str(project)) == (
        2,
        "",
        f"regions.fra1.etcd.snapshots.s3.credentialsConfigKey: {key!r} is not a config key name; use letters, "
        "digits, '_' and '-', starting with a letter (e.g. hfTokenAcme)\n",
    )


# -- command-line paths ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out", "problem"),
    [
        ("{tmp}", "'{tmp}' is a directory; --out takes the path of a file to write"),
        ("{tmp}/file/schema.json", "'{tmp}/file/schema.json' cannot be created: '{tmp}/file' is a file"),
        (
            "/proc/gpucell/schema.json",
            "'/proc/gpucell/schema.json' cannot be written (No such file or directory); give a writable path",
        ),
    ],
    ids=["directory", "under-a-file", "unwritable"],
)
def test_schema_out_to_a_path_that_cannot_be_written_is_one_line(tmp_path: Path, out: str, problem: str) -> None:
    (tmp_path / "file").write_text("")
    path = out.format(tmp=tmp_path)
    assert _run("schema", "--out", path) == (2, "", f"--out: {problem.format(tmp=tmp_path)}\n")
    assert (tmp_path / "file").read_text() == ""


def test_schema_out_creates_a_missing_parent_as_plan_json_does(tmp_path: Path) -> None:
    target = tmp_path / "new" / "schema.json"
    assert _run("schema", "--out", str(target)) == (0, f"wrote {target}\n", "")
    assert json.loads(target.read_text())["type"] == "object"


def _plan_file(path: Path, resources: list[Any]) -> Path:
    path.write_text(json.dumps({"stack": "dev", "resources": resources, "outputs": {}}))
    return path


@pytest.mark.parametrize("levels", [MAX_PLAN_DEPTH + 1, 100_000])
def test_a_plan_file_nested_past_the_bound_is_one_line(tmp_path: Path, levels: int) -> None:
    """Past the bound (and past Python's recursion limit, where json itself gives up): one line, the diff's exit
    for a file that is not a plan."""
    head = _plan_file(tmp_path / "head.json", [])
    deep = tmp_path / "deep.json"
    deep.write_text("[" * levels + "]" * levels)
    assert _run("diff", str(deep), str(head)) == (
        1,
        "",
        f"{deep}: nests objects and lists more than {MAX_PLAN_DEPTH} levels deep; gpucell diff reads at most "
        f"{MAX_PLAN_DEPTH} (not a `gpucell plan --json` file)\n",
    )


def test_a_plan_file_at_the_depth_bound_is_read(tmp_path: Path) -> None:
    inputs: Any = 1
    for _ in range(MAX_PLAN_DEPTH - 3):  # the document, resources and a resource hold the inputs
        inputs = {"a": inputs}
    resource = {"urn": "urn:pulumi:dev::gpucell::t::n", "type": "t", "name": "n", "inputs": inputs}
    base = _plan_file(tmp_path / "base.json", [resource])
    assert _run("diff", str(base), str(base))[0] == 0


def test_a_plan_file_past_the_size_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    head = _plan_file(tmp_path / "head.json", [])
    big = tmp_path / "big.json"
    with big.open("wb") as sparse:
        sparse.truncate(MAX_PLAN_BYTES + 1)
    assert _run("diff", str(big), str(head)) == (
        1,
        "",
        f"{big}: is {MAX_PLAN_BYTES + 1} bytes; gpucell diff reads plan files of at most {MAX_PLAN_BYTES} bytes "
        "(256 MiB)\n",
    )
