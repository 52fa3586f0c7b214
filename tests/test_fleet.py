"""One stack per region (issue 29, docs/decisions/0034): project-level config applied as ``pulumi up`` applies it,
the migration of a region out of a stack holding several (planned the same), pinned versions, ``gpucell
pin-versions`` and ``gpucell fleet``."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Iterator
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.components.cluster_deny import other_cells
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.versions import Versions
from gpucell.stacks import cli
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.plan import Plan, make_plan, read_stack_files, to_json
from gpucell.stacks.program import shared_failure_domain
from gpucell.stacks.project_config import apply_project_config, project_keys
from tests.conftest import PROD_STACKS, REPO, minimal_cell_config, prod_plan_of, prod_regions, write_prod_lab


def project(folder: Path, edit: Callable[[dict[str, str]], None] | None = None) -> Path:
    """``folder`` holding the repository's Pulumi.yaml and stack files, their texts edited by ``edit(texts)``."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = {p.name: p.read_text() for p in REPO.glob("Pulumi*.yaml")}
    if edit is not None:
        edit(texts)
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


def cells(plan: Plan, region: str) -> list[tuple[str, str, str, Any]]:
    """``(type, name, parent, inputs)`` of a region's resources, URNs with the stack set aside: what a state move
    keeps (it changes the stack part of each URN and nothing else)."""

    def unstack(urn: str) -> str:
        return urn.split("::", 1)[1] if urn else urn

    return sorted((r.type, r.name, unstack(r.parent), r.masked_inputs()) for r in plan.region_resources(region))


# -- project-level config, as the Pulumi CLI applies it -----------------------------------------------------------
def test_a_project_value_is_every_stacks_unless_the_stack_sets_the_key_whole() -> None:
    keys = project_keys(
        "gpucell",
        {"production": False, "otherCells": {"value": {"fra1": ["10.110.0.0/22"]}}, "aws:region": "eu-central-1"},
    )
    # shorthand: a project key's plain value is its default, another namespace's a value
    assert [(k.key, k.value) for k in keys] == [
        ("gpucell:production", False),
        ("gpucell:otherCells", {"fra1": ["10.110.0.0/22"]}),
        ("aws:region", "eu-central-1"),
    ]
    assert apply_project_config("s", keys, {"gpucell:regions": {}}, []) == {
        "gpucell:regions": {},
        "gpucell:production": False,
        "gpucell:otherCells": {"fra1": ["10.110.0.0/22"]},
        "aws:region": "eu-central-1",
    }
    # the stack's object replaces the project's: no merge of their keys
    mine = {"gpucell:otherCells": {"iad1": ["10.120.0.0/22"]}}
    assert apply_project_config("s", keys, mine, [])["gpucell:otherCells"] == {"iad1": ["10.120.0.0/22"]}


def test_what_the_pulumi_cli_refuses_in_pulumi_yaml_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        project_keys(
            "gpucell",
            {
                "otherCells": {"fra1": ["10.110.0.0/22"]},
                "token": {"secure": "v1:abc"},
                "both": {"default": 1, "value": 2},
                "list": {"type": "array"},
                "flag": {"type": "boolean", "default": "yes"},
                "aws:region": {"type": "string", "value": "x"},
            },
        )
    assert info.value.lines == [
        "Pulumi.yaml.config.otherCells.fra1: not allowed; a declaration has type, items, description, secret, "
        "default, value (write an object value as {value: {...}} or {default: {...}})",
        "Pulumi.yaml.config.token: a secure: value cannot be project-level config (each stack encrypts its own "
        "secrets); set it in every stack with `pulumi config set --secret token`",
        "Pulumi.yaml.config.both: cannot have both a default and a value",
        "Pulumi.yaml.config.list: type array needs items (the type of its elements)",
        "Pulumi.yaml.config.flag.default: is not of the declared type boolean",
        "Pulumi.yaml.config.aws:region: is not in the gpucell namespace: give it a value, no type or default",
    ]


def test_a_declared_key_is_required_typed_and_secret_as_declared() -> None:
    keys = project_keys(
        "gpucell",
        {"key": {"type": "string", "secret": True}, "count": {"type": "integer"}, "production": {"type": "boolean"}},
    )
    with pytest.raises(ConfigError) as info:
        apply_project_config("prod-fra1", keys, {"gpucell:key": "plain", "gpucell:count": "eight"}, [])
    assert info.value.lines == [
        "key: is stored in plain text in Pulumi.prod-fra1.yaml; Pulumi.yaml declares it secret, so `pulumi up` "
        "refuses it: set it with `pulumi config set --secret key`",
        "count: 'eight' is not of the type integer that Pulumi.yaml declares (config.count.type), so `pulumi up` "
        "refuses it",
        "production: is missing from Pulumi.prod-fra1.yaml; Pulumi.yaml declares it for every stack "
        "(config.production), so `pulumi up` refuses the stack without it",
    ]
    # a stack's scalars are text to the CLI: "8" is an integer, true a boolean
    config = {"gpucell:key": "PLACEHOLDER", "gpucell:count": 8, "gpucell:production": True}
    assert apply_project_config("s", keys, config, ["gpucell:key"]) == config


def test_the_repositorys_stacks_get_the_fleets_networks_from_pulumi_yaml() -> None:
    for stack in ("dev", *PROD_STACKS.values()):
        files = read_stack_files(REPO, stack)
        assert files.config["gpucell:otherCells"] == {
            "fra1": ["10.110.0.0/22", "10.111.0.0/16", "10.112.0.0/16"],
            "iad1": ["10.120.0.0/22", "10.121.0.0/16", "10.122.0.0/16"],
        }
        assert files.config["gpucell:production"] is (stack != "dev")


# -- the migration: a region planned in its own stack is the region planned in the stack that held it -------------
def test_each_region_plans_in_its_own_stack_as_in_the_stack_holding_both(tmp_path: Path) -> None:
    """What makes the state move of docs/operations.md ("One stack per region") replace nothing: every resource
    of the region keeps its type, name, parent and inputs, and its URN differs in the stack part only."""
    lab = make_plan(write_prod_lab(tmp_path), "prod")
    for region, stack in PROD_STACKS.items():
        own = prod_plan_of(region)
        assert cells(own, region) == cells(lab, region)
        assert {r.urn.replace(f"urn:pulumi:{stack}::", "urn:pulumi:prod::") for r in own.region_resources(region)} == {
            r.urn for r in lab.region_resources(region)
        }
        outputs = {k: v for k, v in to_json(lab, list(lab.cells))["outputs"].items() if k.startswith(region)}
        assert to_json(own, [region])["outputs"] == outputs


def test_the_cluster_deny_of_a_region_alone_denies_what_it_denied_beside_the_other() -> None:
    both = StackSpec.model_validate({"regions": prod_regions()})
    for region, stack in PROD_STACKS.items():
        alone = StackSpec.model_validate(stack_spec_input(read_stack_files(REPO, stack).config))
        assert other_cells(alone.regions, region, alone.other_cells) == other_cells(both.regions, region)
    assert other_cells(both.regions, "fra1") == [
        IPv4Network(n) for n in ("10.120.0.0/22", "10.121.0.0/16", "10.122.0.0/16")
    ]


def test_other_cells_overlapping_the_stacks_own_networks_are_refused() -> None:
    """Review of round 1: an otherCells entry over the stack's own node CIDR, or 0.0.0.0/0, was planned, and the
    cluster-wide deny kept the region's tenants from their own cell (or from everything)."""
    config = stack_spec_input(read_stack_files(REPO, "prod-fra1").config)
    for listed, own in (("10.110.0.0/23", "nodeCidr 10.110.0.0/22"), ("0.0.0.0/0", "nodeCidr 10.110.0.0/22")):
        with pytest.raises(ConfigError) as raised:
            StackSpec.model_validate({**config, "otherCells": {"iad1": ["10.120.0.0/22", listed]}})
        assert str(raised.value) == (
            f"otherCells.iad1[1]: {listed} overlaps region fra1's {own}: its tenants would be denied their own cell; "
            "list only the networks of region iad1's cell"
        )
    spec = StackSpec.model_validate({**config, "otherCells": {"fra1": ["10.110.0.0/22"]}})  # its own: skipped
    assert spec.other_cells == {"fra1": [IPv4Network("10.110.0.0/22")]}


# -- several regions in one stack ---------------------------------------------------------------------------------
def test_a_lab_stack_of_two_regions_plans_with_a_warning_naming_their_shared_failure_domain(tmp_path: Path) -> None:
    plan = make_plan(write_prod_lab(tmp_path), "prod")
    assert plan.result.warnings == [
        "stack prod holds regions fra1, iad1 in one state: they share one failure domain (a failed host in one stops "
        "the others' rollout, a lock or a bad checkpoint stops them all, a version bump reaches them all in one run); "
        "production stacks hold one region each (docs/operations.md, 'One stack per region')"
    ]
    assert shared_failure_domain("dev", StackSpec.model_validate({"regions": {"fra1": prod_regions()["fra1"]}})) is None


def test_a_production_stack_of_two_regions_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_prod_lab(tmp_path)
    stack = yaml.safe_load((folder / "Pulumi.prod.yaml").read_text())
    stack["config"]["gpucell:production"] = True
    (folder / "Pulumi.prod.yaml").write_text(yaml.safe_dump(stack))
    assert cli.main(["plan", "prod", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "regions: holds fra1, iad1, but production: true stacks hold one region: one state, one run and one failure "
        "domain for all of them (a failed host in one stops the others' rollout); give each region a stack of its "
        "own (docs/operations.md, 'One stack per region')"
    ]


# -- versions pinned per stack ------------------------------------------------------------------------------------
@pytest.fixture
def newer_k3s_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The gpucell package as a release whose default k3s is v1.34.3+k3s1 (Versions' default, and so the default
    ``versions`` of a cell), the models rebuilt around it and rebuilt back after the test."""
    field = copy.copy(Versions.model_fields["k3s"])
    field.default = "v1.34.3+k3s1"
    monkeypatch.setitem(Versions.model_fields, "k3s", field)
    _rebuild()
    versions = copy.copy(CellSpec.model_fields["versions"])
    versions.default = Versions()
    monkeypatch.setitem(CellSpec.model_fields, "versions", versions)
    _rebuild()
    yield "v1.34.3+k3s1"
    monkeypatch.undo()
    _rebuild()


def _rebuild() -> None:
    for model in (Versions, CellSpec, StackSpec):
        model.model_rebuild(force=True)


def test_new_package_defaults_plan_no_version_change_for_a_pinned_stack(newer_k3s_default: str) -> None:
    # a region that pins nothing moves (with the new installer's checksum, as a release would review it)
    lab = minimal_cell_config() | {"k3s": {"installerSha256": "0" * 64}}
    assert StackSpec.model_validate({"regions": {"lab1": lab}}).regions["lab1"].versions.k3s == newer_k3s_default
    for region, stack in PROD_STACKS.items():
        upgraded = make_plan(REPO, stack)
        assert upgraded.cells[region].spec.versions.k3s == "v1.34.2+k3s1"
        assert cells(upgraded, region) == cells(prod_plan_of(region), region)


def test_a_production_stack_that_pins_not_every_version_is_refused_naming_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def unpin(texts: dict[str, str]) -> None:
        texts["Pulumi.prod-iad1.yaml"] = texts["Pulumi.prod-iad1.yaml"].replace("        cilium: 1.20.0\n", "", 1)

    folder = project(tmp_path, unpin)
    assert cli.main(["plan", "prod-iad1", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "regions.iad1.versions: does not pin cilium; a production: true stack pins every component version, so that "
        "a new gpucell release never moves a deployed region: run `gpucell pin-versions STACK` to write today's "
        "defaults into the stack file"
    ]
    assert cli.main(["pin-versions", "prod-iad1", "--project-dir", str(folder)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "regions.iad1.versions: pinned cilium 1.20.0"
    assert (folder / "Pulumi.prod-iad1.yaml").read_text() == (REPO / "Pulumi.prod-iad1.yaml").read_text().replace(
        "        cilium: 1.20.0\n", ""
    ).replace("        networkOperator: 26.4.1\n", "        networkOperator: 26.4.1\n        cilium: 1.20.0\n")
    assert cli.main(["plan", "prod-iad1", "--project-dir", str(folder)]) == 0


def test_pin_versions_writes_todays_defaults_and_keeps_the_files_comments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = project(tmp_path)
    before = (folder / "Pulumi.dev.yaml").read_text()
    assert cli.main(["pin-versions", "dev", "--project-dir", str(folder)]) == 0
    after = (folder / "Pulumi.dev.yaml").read_text()
    pins = [f"        {name}: {value}\n" for name, value in Versions().model_dump(by_alias=True).items()]
    assert after == before.replace("    lab1:\n", "    lab1:\n      versions:\n" + "".join(pins), 1)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"wrote {folder / 'Pulumi.dev.yaml'}; review it with: gpucell diff --base HEAD dev"
    )
    assert cells(make_plan(folder, "dev"), "lab1") == cells(make_plan(REPO, "dev"), "lab1")
    assert cli.main(["pin-versions", "dev", "--project-dir", str(folder)]) == 0
    assert capsys.readouterr().out == "Pulumi.dev.yaml: every version is pinned already\n"


def test_pin_versions_turns_a_one_line_versions_into_a_block_and_refuses_what_it_cannot_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def inline(texts: dict[str, str]) -> None:
        texts["Pulumi.dev.yaml"] = texts["Pulumi.dev.yaml"].replace(
            "    lab1:\n", "    lab1:\n      versions: {k3s: 'v1.34.2+k3s1', cilium: 1.20.0}  # reviewed CHG-7\n", 1
        )

    folder = project(tmp_path, inline)
    assert cli.main(["pin-versions", "dev", "--project-dir", str(folder)]) == 0
    text = (folder / "Pulumi.dev.yaml").read_text()
    rest = [
        f"        {k}: {v}\n" for k, v in Versions().model_dump(by_alias=True).items() if k not in ("k3s", "cilium")
    ]
    written = "      versions:\n        k3s: 'v1.34.2+k3s1'\n        cilium: 1.20.0\n" + "".join(rest)
    assert text == (REPO / "Pulumi.dev.yaml").read_text().replace("    lab1:\n", "    lab1:\n" + written, 1)
    capsys.readouterr()

    def over_two_lines(texts: dict[str, str]) -> None:
        texts["Pulumi.dev.yaml"] = texts["Pulumi.dev.yaml"].replace(
            "    lab1:\n", "    lab1:\n      versions: {k3s: v1.34.2+k3s1,\n        cilium: 1.20.0}\n", 1
        )

    folder = project(tmp_path / "two-lines", over_two_lines)
    before = (folder / "Pulumi.dev.yaml").read_text()
    assert cli.main(["pin-versions", "dev", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err == (
        "regions.lab1.versions: is a flow mapping ({...}) over several lines; write it one key a line to pin versions\n"
    )
    assert (folder / "Pulumi.dev.yaml").read_text() == before


def test_a_k3s_bump_in_prod_fra1s_file_changes_nothing_in_prod_iad1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def bump(texts: dict[str, str]) -> None:
        fra1 = texts["Pulumi.prod-fra1.yaml"]
        assert fra1.count("        k3s: v1.34.2+k3s1\n") == 1
        fra1 = fra1.replace("        k3s: v1.34.2+k3s1\n", "        k3s: v1.34.3+k3s1\n")
        texts["Pulumi.prod-fra1.yaml"] = fra1.replace(
            "    fra1:\n", "    fra1:\n      k3s: {installerSha256: '" + "0" * 64 + "'}\n", 1
        )

    folder = project(tmp_path, bump)
    iad1 = make_plan(folder, "prod-iad1")
    assert to_json(iad1, ["iad1"]) == to_json(prod_plan_of("iad1"), ["iad1"])
    fra1 = make_plan(folder, "prod-fra1")
    assert fra1.cells["fra1"].spec.versions.k3s == "v1.34.3+k3s1"
    assert cells(fra1, "fra1") != cells(prod_plan_of("fra1"), "fra1")
    # gpucell fleet shows the skew, exit 3
    assert cli.main(["fleet", "--project-dir", str(folder)]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["dev/lab1", "prod-fra1/fra1", "prod-iad1/iad1"]
    assert out[3].split() == ["k3s", "v1.34.2+k3s1*", "v1.34.3+k3s1", "v1.34.2+k3s1"]
    assert out[-1] == "skew: k3s: v1.34.2+k3s1 (dev/lab1, prod-iad1/iad1); v1.34.3+k3s1 (prod-fra1/fra1)"


# -- gpucell fleet --------------------------------------------------------------------------------------------------
def test_fleet_shows_each_stacks_regions_and_versions(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fleet", "--project-dir", str(REPO)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split() for line in out[:4]] == [
        ["dev/lab1", "prod-fra1/fra1", "prod-iad1/iad1"],
        ["production", "no", "yes", "yes"],
        [
            "pinned",
            f"0/{len(Versions.model_fields)}",
            *[f"{len(Versions.model_fields)}/{len(Versions.model_fields)}"] * 2,
        ],
        ["k3s", "v1.34.2+k3s1*", "v1.34.2+k3s1", "v1.34.2+k3s1"],
    ]
    assert out[-2:] == [
        "* the gpucell package's default: not pinned in the stack file (gpucell pin-versions STACK pins it)",
        "skew: none (every region installs the same versions)",
    ]


def test_fleet_checks_across_the_production_stacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def clash(texts: dict[str, str]) -> None:
        # iad1's model Gateway under fra1's names: its issuer would sign them, which iad1's stack alone cannot see
        texts["Pulumi.prod-iad1.yaml"] = texts["Pulumi.prod-iad1.yaml"].replace(
            "domain: models.iad1.gpucell.example", "domain: fra1.gpucell.example"
        )

    folder = project(tmp_path, clash)
    assert cli.main(["fleet", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "Pulumi.prod-iad1.yaml: regions.iad1.gateway.domain: 'fra1.gpucell.example' covers api.fra1.gpucell.example "
        "(regions.fra1.network.tlsSans[0]): an endpoint's expose.host under it could take that name, and the "
        "Gateway's issuer would sign a certificate for it; give the Gateway a domain of its own (e.g. "
        "models.<region>.example.net) (across the fleet)"
    ]


def test_fleet_names_a_network_pulumi_yaml_does_not_deny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def narrower(texts: dict[str, str]) -> None:
        texts["Pulumi.yaml"] = texts["Pulumi.yaml"].replace(", 10.122.0.0/16]", "]")

    folder = project(tmp_path, narrower)
    assert cli.main(["fleet", "prod-fra1", "prod-iad1", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "Pulumi.prod-fra1.yaml: otherCells.iad1: does not cover 10.122.0.0/16 of region iad1 (stack prod-iad1); the "
        "tenants of prod-fra1 would reach it: list it in Pulumi.yaml"
    ]


def test_fleet_bad_input_is_one_line_per_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def wrong(texts: dict[str, str]) -> None:
        texts["Pulumi.prod-fra1.yaml"] = texts["Pulumi.prod-fra1.yaml"].replace("gpuMode: dra", "gpuMode: draa")

    folder = project(tmp_path, wrong)
    assert cli.main(["fleet", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "Pulumi.prod-fra1.yaml: regions.fra1.nodePools.l4-dra.gpuMode: 'draa' is not one of container, "
        "vm-passthrough, vm-vgpu, dra"
    ]
    assert cli.main(["fleet", "nope", "--project-dir", str(folder)]) == 2
    assert (
        capsys.readouterr().err == f"Pulumi.nope.yaml: not found in {folder}; run gpucell from the project directory\n"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", empty)
    assert cli.main(["fleet", "--project-dir", str(empty)]) == 2
    assert capsys.readouterr().err == f"Pulumi.<stack>.yaml: none found in {empty}; run gpucell fleet there\n"


def test_the_deploy_waves_name_every_production_stack_once_with_its_region() -> None:
    """.github/deploy-waves.json (decision 0035) deploys what `gpucell fleet` lists as production, stack by stack."""
    waves = json.loads((REPO / ".github" / "deploy-waves.json").read_text())
    entries = [(entry["stack"], entry["region"]) for wave in ("canary", "rest") for entry in waves[wave]]
    assert sorted(entries) == sorted((stack, region) for region, stack in PROD_STACKS.items())
    for stack, region in entries:
        spec = StackSpec.model_validate(stack_spec_input(read_stack_files(REPO, stack).config))
        assert (spec.production, list(spec.regions)) == (True, [region])
