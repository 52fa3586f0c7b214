"""CRDs' CEL validation rules (``x-kubernetes-validations``) evaluated against custom resources, as the API server
evaluates them on create (kubernetes ``staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/
validation.go``).

- A rule at a schema node applies to each value at that node: ``self`` is the value; rules under ``items`` and
  ``additionalProperties`` apply per element; a node whose (optional) field is absent evaluates nothing.
- ``self`` is typed by the schema: declared properties only (unknown fields of ``x-kubernetes-preserve-unknown-
  fields`` objects are not reachable), their names escaped as the API server escapes them (``namespace`` is
  ``__namespace__``, ``a-b`` is ``a__dash__b``: ``.../apiserver/pkg/cel/escaping.go``), ``number`` as a double,
  strings of format ``byte``/``duration``/``date``/``date-time`` as bytes, durations and timestamps, and at the root
  only ``metadata.name`` and ``metadata.generateName``.
- The value is the one the schema check sees: nulls dropped and the schema's defaults filled, as the API server
  defaults an object before it validates it. gpucell does not write those defaults into what it renders; they are
  applied here only to check.
- Transition rules (those reading ``oldSelf``) need an old object: on create there is none, so they do not apply
  and are counted apart; a rule with ``optionalOldSelf: true`` is evaluated with ``oldSelf`` an empty optional.
- A failed rule says what the API server says: its ``messageExpression`` (when it yields a non-empty single-line
  string), else ``message``, else ``failed rule: RULE``, under ``reason`` (``Invalid value`` by default) at the
  node's path plus ``fieldPath``. A rule that errors while evaluating refuses, as on the server.
- A rule the ``cel`` library cannot compile, or that calls a function it lacks (:mod:`.cel_library`), is not
  evaluated and is named in :attr:`CelTally.not_evaluated`: never counted as passed.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import cel

from gpucell.stacks.conformance.cel_library import FUNCTIONS, unsupported

__all__ = ["CelTally", "CrdRules", "Rule", "escape"]

_RESERVED = frozenset(
    (
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if"),
        *("import", "let", "loop", "package", "namespace", "return", "var", "void", "while"),
    )
)
"""CEL's reserved words: a property so named is spelled ``__NAME__`` in a rule."""
_ESCAPED = re.compile(r"__|[-./]|[^a-zA-Z0-9\-./_]")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_REASONS = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueRequired": "Required value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueDuplicate": "Duplicate value",
}
_GO_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_OLD_SELF = re.compile(r"\boldSelf\b")


def escape(name: str) -> str | None:
    """A property name as a CEL rule spells it, or ``None`` when no rule can reach it (a leading digit, a character
    outside ``[a-zA-Z0-9_.-/]``)."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if any(len(m) == 1 and m not in _ESCAPES for m in _ESCAPED.findall(name)):
        return None
    return _ESCAPED.sub(lambda m: _ESCAPES[m.group(0)], name)


@dataclass(frozen=True)
class Rule:
    """One ``x-kubernetes-validations`` entry of one CRD version, at a schema node."""

    crd: str
    """The CRD's name and version: ``httproutes.gateway.networking.k8s.io/v1``."""
    path: str
    """The schema node: ``spec.rules[*].matches[*].path`` (``[*]`` for each element), ``-`` for the root."""
    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str = ""
    field_path: str = ""
    optional_old_self: bool = False

    @property
    def transition(self) -> bool:
        """True when the rule reads ``oldSelf`` and so applies only to updates (unless ``optionalOldSelf``)."""
        return bool(_OLD_SELF.search(self.rule)) and not self.optional_old_self

    def __str__(self) -> str:
        text = " ".join(self.rule.split())
        return f"{self.crd} {self.path}: {text if len(text) <= 100 else text[:99] + '…'}"


@cache
def _compiled(expression: str) -> cel.Program | str:
    """The compiled program, or why it is not evaluated here (a compile error, functions the library lacks)."""
    try:
        program = cel.compile(expression)
    except Exception as exc:  # the library raises ValueError on syntax it does not parse
        error = str(exc).splitlines()[0].removeprefix(f"Failed to parse expression '{expression}': ")
        return f"the cel library cannot compile it: {error}"
    missing = unsupported(program.functions())
    return f"uses {', '.join(missing)}, which gpucell's CEL environment lacks" if missing else program


def _program(expression: str) -> cel.Program | None:
    compiled = _compiled(expression)
    return compiled if isinstance(compiled, cel.Program) else None


@dataclass
class CelTally:
    """What the CEL rules of the CRD versions of the checked objects did, over every object of every region."""

    rules: set[Rule] = field(default_factory=set)
    """Every rule of every CRD version an object was checked against."""
    evaluated: set[Rule] = field(default_factory=set)
    """Rules evaluated on at least one value."""
    evaluations: int = 0
    """Rule evaluations (a rule under ``items`` counts once per element)."""
    not_evaluated: dict[Rule, str] = field(default_factory=dict)
    """Rule -> why the ``cel`` library could not evaluate it."""

    @property
    def transition(self) -> set[Rule]:
        """Transition rules: they need an old object, and a create has none."""
        return {r for r in self.rules if r.transition}

    def summary(self) -> str:
        """``CEL rules: 5 of 12 evaluated 31 times, 6 on unset fields, 1 transition rule skipped on create, 0 not
        evaluated``: rules on fields no object sets have nothing to evaluate; those not evaluated are named in
        :attr:`not_evaluated`."""
        transition = len(self.transition)
        unset = len(self.rules) - len(self.evaluated) - transition - len(self.not_evaluated)
        return (
            f"CEL rules: {len(self.evaluated)} of {len(self.rules)} evaluated {self.evaluations} times, {unset} on "
            f"unset fields, {transition} transition rule{'' if transition == 1 else 's'} skipped on create, "
            f"{len(self.not_evaluated)} not evaluated"
        )

    def notices(self) -> list[str]:
        """One line per rule not evaluated, by CRD, schema node and rule: ``CEL rule not evaluated:
        widgets.example.com/v1 spec.address: isIP(self): uses isIP, which gpucell's CEL environment lacks``."""
        return [
            f"CEL rule not evaluated: {rule}: {why}"
            for rule, why in sorted(self.not_evaluated.items(), key=lambda pair: str(pair[0]))
        ]


class CrdRules:
    """The CEL rules of one CRD version's ``openAPIV3Schema``."""

    def __init__(self, crd: str, schema: dict[str, Any]) -> None:
        self.crd = crd
        self.schema = schema
        self.rules: dict[tuple[str, ...], list[Rule]] = {}
        self._collect(schema, ())

    def _collect(self, node: dict[str, Any], at: tuple[str, ...]) -> None:
        rules = [
            Rule(
                self.crd,
                _schema_path(at),
                str(entry["rule"]),
                str(entry.get("message") or ""),
                str(entry.get("messageExpression") or ""),
                str(entry.get("reason") or ""),
                str(entry.get("fieldPath") or ""),
                bool(entry.get("optionalOldSelf")),
            )
            for entry in node.get("x-kubernetes-validations") or []
        ]
        if rules:
            self.rules[at] = rules
        for key, sub in (node.get("properties") or {}).items():
            self._collect(sub, (*at, key))
        if isinstance(node.get("additionalProperties"), dict):
            self._collect(node["additionalProperties"], (*at, "{*}"))
        if isinstance(node.get("items"), dict):
            self._collect(node["items"], (*at, "[*]"))

    def all_rules(self) -> list[Rule]:
        """Every rule of the schema, root first."""
        return [rule for rules in self.rules.values() for rule in rules]

    def check(self, instance: dict[str, Any], tally: CelTally) -> Iterator[tuple[str, str]]:
        """``(path, message)`` of each rule ``instance`` (defaulted, nulls dropped) fails; counts into ``tally``."""
        tally.rules.update(self.all_rules())
        for rule in self.all_rules():
            compiled = _compiled(rule.rule)
            if isinstance(compiled, str) and not rule.transition:
                tally.not_evaluated[rule] = compiled
        for at, path, value, node in _nodes(instance, self.schema, (), ""):
            for rule in self.rules.get(at, ()):
                program = _compiled(rule.rule)
                if rule.transition or not isinstance(program, cel.Program):
                    continue
                tally.evaluated.add(rule)
                tally.evaluations += 1
                failure = _failure(rule, program, _to_cel(value, node, root=not at))
                if failure is not None:
                    message, refused = failure
                    where = _join(path, rule.field_path) if refused and rule.field_path else path
                    yield where or "-", message


def _schema_path(at: tuple[str, ...]) -> str:
    out = ""
    for part in at:
        out += part if part in ("[*]", "{*}") else (f".{part}" if out else part)
    return out.replace("{*}", "[*]") or "-"


def _join(path: str, field_path: str) -> str:
    relative = field_path if field_path.startswith("[") else "." + field_path.lstrip(".")
    return (path + relative).lstrip(".")


def _nodes(
    value: Any, node: dict[str, Any], at: tuple[str, ...], path: str
) -> Iterator[tuple[tuple[str, ...], str, Any, dict[str, Any]]]:
    """``(schema key, value path, value, schema node)`` of every value present in ``value``, parents first."""
    yield at, path, value, node
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                yield from _nodes(item, properties[key], (*at, key), f"{path}.{key}" if path else key)
            elif isinstance(extra, dict):
                yield from _nodes(item, extra, (*at, "{*}"), f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            yield from _nodes(item, node["items"], (*at, "[*]"), f"{path}[{index}]")


def _failure(rule: Rule, program: cel.Program, value: Any) -> tuple[str, bool] | None:
    """The API server's message when ``rule`` refuses ``value`` and whether it refused (``fieldPath`` applies) rather
    than errored (the error is at the rule's node); ``None`` when it holds."""
    bound: dict[str, Any] = {"self": value}
    if rule.optional_old_self:
        bound["oldSelf"] = cel.OptionalValue.none()
    try:
        result = program.execute(cel.Context(bound, FUNCTIONS))
    except Exception as exc:  # the server refuses a rule that errors: "<error> evaluating rule: <rule>"
        error = f"no such key: {exc.args[0]}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        return f'Invalid value: "{_type_name(value)}": {error} evaluating rule: {rule.rule.strip()}', False
    if result is True:
        return None
    message = _message(rule, bound)
    reason = _REASONS.get(rule.reason or "FieldValueInvalid", "Invalid value")
    return (
        f'{reason}: "{_type_name(value)}": {message}' if reason == "Invalid value" else f"{reason}: {message}"
    ), True


def _message(rule: Rule, bound: dict[str, Any]) -> str:
    if rule.message_expression:
        program = _program(rule.message_expression)
        try:
            text = program.execute(cel.Context(bound, FUNCTIONS)) if program is not None else None
        except Exception:  # the server falls back to message when messageExpression fails
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text.strip()
    return rule.message.strip() or f"failed rule: {rule.rule.strip()}"


def _type_name(value: Any) -> str:
    """The type the API server names in ``Invalid value: "object": ...`` (the schema node's type)."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "number" if isinstance(value, float) else "string"


def _to_cel(value: Any, node: dict[str, Any], *, root: bool = False) -> Any:
    """``value`` as a rule at ``node`` sees it (see the module docstring)."""
    if node.get("x-kubernetes-int-or-string"):
        return value
    if isinstance(value, dict):
        return _object_to_cel(value, node, root=root)
    if isinstance(value, list):
        items = node.get("items")
        return [_to_cel(item, items if isinstance(items, dict) else {}) for item in value]
    if node.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return _formatted(value, str(node.get("format") or ""))
    return value


def _object_to_cel(value: dict[str, Any], node: dict[str, Any], *, root: bool) -> dict[str, Any]:
    properties = node.get("properties") or {}
    extra = node.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in properties:
            name = escape(key)
            if name is not None:
                out[name] = _to_cel(item, properties[key])
        elif isinstance(extra, dict):
            out[key] = _to_cel(item, extra)
    if root and isinstance(out.get("metadata"), dict):  # only these two are declared to rules at the root
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k in ("name", "generateName")}
    return out


def _formatted(text: str, fmt: str) -> Any:
    """A string of format ``byte``, ``duration``, ``date`` or ``date-time`` as CEL types it; the string itself when it
    does not parse (the schema check reports a bad format)."""
    try:
        if fmt == "byte":
            return base64.b64decode(text, validate=True)
        if fmt == "duration":
            return _go_duration(text)
        if fmt in ("date", "date-time"):
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    return text


def _go_duration(text: str) -> timedelta:
    sign, body = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
    if body == "0":
        return timedelta()
    parts = _GO_DURATION.findall(body)
    if not parts or "".join(n + u for n, u in parts) != body:
        raise ValueError(f"not a duration: {text}")
    return timedelta(seconds=sign * sum(float(n) * _DURATION_UNITS[u] for n, u in parts))
