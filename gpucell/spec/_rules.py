"""Cross-field rules that report together with field errors.

pydantic runs a model's ``after`` validators only when every field validated, so one typo in a tenant would hide
an overlapping address plan until the next run. A model that lists its rules here (with the fields each reads)
gets them run in a ``wrap`` validator: on valid fields every rule runs and *all* their problems are reported;
when some fields fail, the rules that read none of them still run on the fields that did validate, and their
problems are reported in the same run as the field errors.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import pydantic
from pydantic import BaseModel, TypeAdapter
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from gpucell.errors import MAX_PROBLEMS, SpecError

__all__ = ["Rule", "validate_with_rules"]

_Model = TypeVar("_Model", bound=BaseModel)


@dataclass(frozen=True)
class Rule:
    """A cross-field rule of a model: ``check(model)`` yields one :class:`SpecError` per problem.

    ``fields`` are the field names the rule reads; ``after`` names rules that must have found nothing first (the
    rule relies on what they check, e.g. that the cell has a server). With ``partial_maps``, a rule also runs
    when entries of its map fields failed, on the entries that validated (rules across regions do).
    """

    name: str
    fields: tuple[str, ...]
    check: Callable[[Any], Iterable[SpecError]]
    after: tuple[str, ...] = ()
    partial_maps: bool = False


def _init_error(err: Any) -> InitErrorDetails:
    """An ``ErrorDetails`` of a caught ``ValidationError`` as the ``InitErrorDetails`` that recreates it.

    ``from_exception_data`` rebuilds most of pydantic's error types from their name and context; the few it
    cannot (``ip_v4_network``...) become a custom error of the same type name and message.
    """
    detail: dict[str, Any] = {"type": err["type"], "loc": err["loc"], "input": err["input"]}
    if "ctx" in err:
        detail["ctx"] = err["ctx"]
    try:
        ValidationError.from_exception_data("check", [detail])  # type: ignore[list-item]
    except (KeyError, TypeError, ValueError):
        detail = {
            "type": PydanticCustomError(err["type"], "{message}", {"message": err["msg"]}),
            "loc": err["loc"],
            "input": err["input"],
        }
    return detail  # type: ignore[return-value]


@functools.cache
def _adapter(model: type[BaseModel], name: str) -> TypeAdapter[Any]:
    field = model.model_fields[name]
    annotation: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    return TypeAdapter(annotation)


def _partial(model: type[_Model], data: dict[str, Any], errors: Sequence[Any]) -> tuple[_Model, set[str], set[str]]:
    """The fields of ``data`` that validated, as a model built without validation, and the names of the fields
    that failed outright and of the map fields only some of whose entries failed."""
    keys = {name: (name, field.alias or name) for name, field in model.model_fields.items()}
    failed_entries: dict[str, set[Any]] = {}
    failed: set[str] = set()
    for err in errors:
        name = next((n for n, spelled in keys.items() if err["loc"][0] in spelled), None)
        if name is None:
            continue  # an unknown key: no rule reads it
        if len(err["loc"]) >= 3 and typing.get_origin(model.model_fields[name].annotation) is dict:
            failed_entries.setdefault(name, set()).add(err["loc"][1])
        else:
            failed.add(name)
    values: dict[str, Any] = {}
    for name, spelled in keys.items():
        given = next((data[key] for key in spelled if key in data), None)
        if name in failed or given is None:
            continue
        if name in failed_entries:
            given = {k: v for k, v in given.items() if k not in failed_entries[name]}
        try:
            values[name] = _adapter(model, name).validate_python(given)
        except ValidationError:
            failed.add(name)
    partial = {name for name in failed_entries if name not in failed}
    return model.model_construct(**values), failed, partial


def validate_with_rules(
    model: type[_Model], data: Any, handler: pydantic.ValidatorFunctionWrapHandler, rules: Sequence[Rule]
) -> _Model:
    """Validate ``data`` with ``handler`` (a ``wrap`` model validator's), then run ``rules`` as described in the
    module docstring. Raises ``ValidationError`` with the field errors and every rule's problems."""
    field_errors: list[Any] = []
    try:
        built: _Model = handler(data)
        failed: set[str] = set()
        partial: set[str] = set()
    except ValidationError as exc:
        field_errors = exc.errors()
        if not isinstance(data, dict) or any(not err["loc"] for err in field_errors):
            raise
        built, failed, partial = _partial(model, data, field_errors)
    problems: list[SpecError] = []
    not_passed: set[str] = set()
    for rule in rules:
        blocked = set(rule.fields) & (failed if rule.partial_maps else failed | partial)
        if blocked or set(rule.after) & not_passed:
            not_passed.add(rule.name)
            continue
        found = list(rule.check(built))
        if found:
            not_passed.add(rule.name)
            problems += found
    if not problems and not field_errors:
        return built
    # past the number of problems a run reports, the rest are not rebuilt (each costs a pydantic error object)
    line_errors = [_init_error(err) for err in field_errors[: 2 * MAX_PROBLEMS + 1]]
    line_errors += [{"type": "value_error", "loc": (), "input": data, "ctx": {"error": p}} for p in problems]
    raise ValidationError.from_exception_data(model.__name__, line_errors)
