"""`gpucell plan --check` evaluates the CRDs' CEL rules (``x-kubernetes-validations``) as the API server does on
create: each failed rule is one problem line, transition rules are skipped, and a rule the CEL library cannot
evaluate is named, never counted as passed."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pulumi_kubernetes.apiextensions import CustomResource

from gpucell.engine.mock_engine import run_program
from gpucell.stacks import cli
from gpucell.stacks.conformance.cel_rules import CelTally, CrdRules, escape
from gpucell.stacks.conformance.run import Report, check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from tests.conftest import REPO, SCHEMA_CHECKERS, UPSTREAM, cell, minimal_cell_config


def check_objects(*objects: dict[str, Any]) -> Report:
    def program() -> None:
        for index, obj in enumerate(objects):
            CustomResource(f"obj-{index}", **obj)

    registrations = run_program(program).resources
    return check_region(
        "lab", registrations, cell(minimal_cell_config()), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS
    )


def lines(report: Report) -> list[str]:
    return [str(p) for p in report.problems]


def test_a_cilium_policy_without_spec_or_specs_fails_the_crds_root_rule() -> None:
    # cilium/ciliumnetworkpolicies.yaml: x-kubernetes-validations at the root, "has(self.spec) || has(self.specs)"
    policy = {"api_version": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": {"name": "p", "namespace": "a"}}
    report = check_objects(policy)
    assert lines(report) == ['lab/CiliumNetworkPolicy/a/p: -: Invalid value: "object": spec or specs must be provided']
    assert report.cel.summary() == (
        "CEL rules: 1 of 1 evaluated 1 times, 0 on unset fields, 0 transition rules skipped on create, 0 not evaluated"
    )


def http_route(path: str) -> dict[str, Any]:
    return {
        "api_version": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat", "namespace": "acme"},
        "spec": {
            "parentRefs": [{"name": "gw", "namespace": "gpucell-gateway"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "backendRefs": [{"name": "svc", "port": 80}],
                }
            ],
        },
    }


def test_an_http_route_path_fails_its_rules_per_element() -> None:
    # rules under items apply to each element; the path is the element's; parentRefs' rules read __namespace__
    report = check_objects(http_route("v1//chat"))
    where = "lab/HTTPRoute/acme/chat: spec.rules[0].matches[0].path"
    assert lines(report) == [
        f"{where}: Invalid value: \"object\": value must be an absolute path and start with '/' when type one of "
        "['Exact', 'PathPrefix']",
        f"{where}: Invalid value: \"object\": must not contain '//' when type one of ['Exact', 'PathPrefix']",
    ]
    assert lines(check_objects(http_route("/v1/chat"))) == []


def test_transition_rules_are_skipped_on_create_and_counted() -> None:
    # gateway-api's GatewayClass: spec.controllerName "self == oldSelf" (immutable); a create has no old object
    gateway_class = {
        "api_version": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "gpucell"},
        "spec": {"controllerName": "io.cilium/gateway-controller"},
    }
    report = check_objects(gateway_class)
    assert lines(report) == []
    assert [str(r) for r in report.cel.transition] == [
        "gatewayclasses.gateway.networking.k8s.io/v1 spec.controllerName: self == oldSelf"
    ]
    assert report.cel.summary() == (
        "CEL rules: 0 of 1 evaluated 0 times, 0 on unset fields, 1 transition rule skipped on create, 0 not evaluated"
    )


WIDGET = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "isIP(self.address)", "message": "address must be an IP"},
                {"rule": "self.?replicas.orValue(1) > 0"},
                {
                    "rule": "self.replicas <= self.__namespace__.size()",
                    "messageExpression": "'replicas ' + string(self.replicas) + ' exceed ' + self.__namespace__",
                    "reason": "FieldValueForbidden",
                    "fieldPath": ".replicas",
                },
                {"rule": "self.address != oldSelf.address"},
                {"rule": "self.replicas > 0 || !has(self.limits)", "optionalOldSelf": True},
            ],
            "properties": {
                "address": {"type": "string"},
                "replicas": {"type": "integer"},
                "namespace": {"type": "string"},
                "max-burst": {"type": "number", "x-kubernetes-validations": [{"rule": "type(self) == double"}]},
                "limits": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "integer",
                        "x-kubernetes-validations": [{"rule": "self % 2 == 0", "message": "must be even"}],
                    },
                },
            },
            "x-kubernetes-preserve-unknown-fields": True,
        }
    },
}


def widget_problems(spec: dict[str, Any], tally: CelTally) -> list[tuple[str, str]]:
    return list(CrdRules("widgets.example.com/v1", WIDGET).check({"spec": spec}, tally))


def test_message_expression_reason_field_path_and_map_values() -> None:
    tally = CelTally()
    spec = {"address": "10.0.0.1", "replicas": 3, "namespace": "ab", "max-burst": 1, "limits": {"gpu": 2, "cpu": 3}}
    assert widget_problems(spec, tally) == [
        ("spec.replicas", "Forbidden: replicas 3 exceed ab"),
        ("spec.limits[cpu]", 'Invalid value: "integer": must be even'),
    ]
    # max-burst is a number: 1 reaches the rule as 1.0 (a double), the escaped name hides nothing
    assert tally.evaluations == 1 + 1 + 1 + 2  # the spec's two evaluable rules, max-burst, two limits
    assert widget_problems({"replicas": 0, "limits": {"gpu": 2}}, tally) == [
        (
            "spec",
            'Invalid value: "object": no such key: __namespace__ evaluating rule: self.replicas <= '
            "self.__namespace__.size()",
        ),
        ("spec", 'Invalid value: "object": failed rule: self.replicas > 0 || !has(self.limits)'),
    ]


def test_rules_the_library_cannot_evaluate_are_named_not_passed() -> None:
    tally = CelTally()
    assert widget_problems({"address": "not an ip", "replicas": 1, "namespace": "a"}, tally) == []
    assert tally.notices() == [
        "CEL rule not evaluated: widgets.example.com/v1 spec: isIP(self.address): uses isIP, which gpucell's CEL "
        "environment lacks",
        "CEL rule not evaluated: widgets.example.com/v1 spec: self.?replicas.orValue(1) > 0: the cel library cannot "
        "compile it: ERROR: <input>:1:5: unsupported syntax '.?'",
    ]
    assert tally.summary() == (
        "CEL rules: 2 of 7 evaluated 2 times, 2 on unset fields, 1 transition rule skipped on create, 2 not evaluated"
    )


@pytest.mark.parametrize(
    ("name", "spelled"),
    [
        ("namespace", "__namespace__"),
        ("max-burst", "max__dash__burst"),
        ("a.b/c", "a__dot__b__slash__c"),
        ("x__y", "x__underscores__y"),
        ("1st", None),
        ("a b", None),
    ],
)
def test_property_names_are_escaped_as_the_api_server_escapes_them(name: str, spelled: str | None) -> None:
    assert escape(name) == spelled


def test_without_the_cel_library_check_names_its_package(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the import is `cel`; the package of the check extra is common-expression-language
    for name in [m for m in sys.modules if m.startswith(("gpucell.stacks.conformance.", "cel"))]:
        if name not in ("gpucell.stacks.conformance.problems", "gpucell.stacks.conformance.schemas"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cel", None)
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", "/nonexistent"])
    assert code == 1
    assert capsys.readouterr() == (
        "",
        "error: gpucell plan --check needs the Python package common-expression-language: pip install "
        "'gpucell[check]'\n",
    )
