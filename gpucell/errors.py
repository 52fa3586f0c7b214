"""Configuration errors: one line each, naming the key path, the bad value and what is accepted.

Every mistake in a stack config ends as a :class:`ConfigError` before any resource is registered. ``gpucell plan``
prints its lines and exits 2; under ``pulumi up`` the program raises ``pulumi.RunError`` with the same text, which
the engine shows without a Python traceback.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from collections.abc import Iterable, Sequence

import pydantic
import pydantic_core

__all__ = ["ConfigError", "SpecError", "format_validation_error", "join_path", "shown"]

PathPart = str | int

SHOWN_LIMIT = 60
"""Characters of a bad value an error line shows before shortening it with ``...``."""
_PLAIN_KEY = re.compile(r"[^\s\[\]\"'\\]+")
"""A key shown as is in a key path; any other key (empty, with spaces, quotes or brackets) is shown quoted."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
MAX_PROBLEMS = 100
"""The most problem lines one :class:`ConfigError` shows; the rest are counted in one last line that names the
bound (a file of a million unknown keys is one screen, not a million lines)."""
TOO_MANY_PROBLEMS = (
    f"gpucell: more than {MAX_PROBLEMS} problems; the first {MAX_PROBLEMS} are shown (gpucell "
    f"reports at most {MAX_PROBLEMS} per run)"
)
"""The last line of a :class:`ConfigError` past :data:`MAX_PROBLEMS`. Problems past twice the bound are not even
formatted (each costs a walk of the models), so the line gives no count."""


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """A value as an error line shows it: strings quoted (``repr``, so a newline shows as ``\\n``), ``true``,
    ``false`` and ``null`` as the stack file (YAML) writes them, not Python's ``True``/``None``, anything else as
    ``str``, one line, shortened to ``limit`` characters with ``...``."""
    if isinstance(value, str):
        text = repr(value)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    else:
        text = str(value)
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    if len(text) > limit:
        text = text[: limit - 3] + ("...'" if isinstance(value, str) else "...")
    return text


def join_path(parts: Iterable[PathPart]) -> str:
    """Join key-path parts the way ``pulumi config set --path`` writes them: ``a.b[0].c``.

    A key that is empty or holds spaces, quotes or brackets is shown quoted (``nodePools[''].hosts``), shortened
    like a value (:func:`shown`), so a line never ends up with an empty or multi-line key path.
    """
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part) or len(part) > SHOWN_LIMIT:
            out += f"[{shown(part)}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class SpecError(ValueError):
    """A cross-field rule failed inside a spec model.

    ``rel_path`` is the key path *below* the model that raised it (``("nodePools", "h100-vm", "gpuMode")``);
    :func:`format_validation_error` prefixes the model's own location, so rules never need to know where their
    model sits in the stack config.
    """

    def __init__(self, rel_path: Sequence[PathPart], message: str) -> None:
        super().__init__(message)
        self.rel_path = tuple(rel_path)
        self.message = message


class ConfigError(Exception):
    """The stack config is wrong. ``lines`` holds one ``key.path: message`` line per problem.

    Each line is one line: a control character that slipped into a message (a value shown without
    :func:`shown`) is escaped, and duplicate lines are dropped. Past :data:`MAX_PROBLEMS` lines, one last line
    says how many more were found.
    """

    def __init__(self, lines: Sequence[str]) -> None:
        unique = list(dict.fromkeys(_CONTROL.sub(lambda m: repr(m.group())[1:-1], line) for line in lines))
        if len(unique) > MAX_PROBLEMS or (unique and unique[-1] == TOO_MANY_PROBLEMS):
            unique = [line for line in unique if line != TOO_MANY_PROBLEMS]
            unique = [*unique[:MAX_PROBLEMS], TOO_MANY_PROBLEMS]
        self.lines = unique
        super().__init__("\n".join(self.lines))

    @classmethod
    def at(cls, path: Sequence[PathPart], message: str) -> ConfigError:
        """One problem at ``path``: ``ConfigError.at(("regions", "fra1"), "...")``. ``path`` may not be empty."""
        if not path:
            raise ValueError("a config error needs a key path")
        return cls([f"{join_path(path)}: {message}"])


def _describe(value: object) -> str:
    return shown(value)


def _model_at(root: type[pydantic.BaseModel], loc: Sequence[PathPart]) -> type[pydantic.BaseModel] | None:
    """The model class a location points into, following fields, dict values and list items."""
    current: object = root
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
            field = next(
                (f for n, f in current.model_fields.items() if part in (n, f.alias)),
                None,
            )
            if field is None:
                return None
            current = field.annotation
        elif typing.get_origin(current) in (dict, typing.Mapping) or typing.get_origin(current) is list:
            current = typing.get_args(current)[-1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, pydantic.BaseModel) else None


def _unwrap(annotation: object) -> object:
    """Strip ``Optional``/``Annotated`` so the model or container type underneath is visible."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _enum_at(root: type[pydantic.BaseModel], loc: Sequence[PathPart]) -> type[enum.Enum] | None:
    parent = _model_at(root, loc[:-1])
    if parent is None:
        return None
    field = next((f for n, f in parent.model_fields.items() if loc[-1] in (n, f.alias)), None)
    annotation = _unwrap(field.annotation) if field else None
    if typing.get_origin(annotation) is list:
        annotation = _unwrap(typing.get_args(annotation)[0])
    return annotation if isinstance(annotation, type) and issubclass(annotation, enum.Enum) else None


_TYPE_ERRORS = {
    "model_type": "is not a mapping of keys",
    "dict_type": "is not a mapping of keys",
    "model_attributes_type": "is not a mapping of keys",
    "list_type": "is not a list",
    "string_type": "is not a string; quote it if it is text",
    "int_type": "is not a whole number",
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "bool_type": "is not true or false",
    "bool_parsing": "is not true or false",
}
"""pydantic's type errors, in words that name no Python class (``instance of CellSpec``)."""


def _where(root: type[pydantic.BaseModel], parts: Sequence[PathPart]) -> str:
    """The key path of a problem; the model's own name when the problem is the model built from Python itself."""
    return join_path(parts) if parts else root.__name__


def _line(root: type[pydantic.BaseModel], prefix: Sequence[PathPart], err: pydantic_core.ErrorDetails) -> str:
    loc: tuple[PathPart, ...] = tuple(err["loc"])
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, SpecError):
        return f"{_where(root, (*prefix, *loc, *cause.rel_path))}: {cause.message}"
    if loc and loc[-1] == "[key]":
        # pydantic's marker for a map key that failed validation (a number or date where a name belongs)
        return f"{_where(root, (*prefix, *loc[:-1]))}: key {_describe(value)} is not a string; quote it"
    where = _where(root, (*prefix, *loc))
    if kind == "enum":
        enum_type = _enum_at(root, loc)
        accepted = ", ".join(str(m.value) for m in enum_type) if enum_type else ctx.get("expected", "")
        return f"{where}: {_describe(value)} is not one of {accepted}"
    if kind == "extra_forbidden":
        parent = _model_at(root, loc[:-1])
        accepted = ", ".join(f.alias or n for n, f in parent.model_fields.items()) if parent else ""
        return f"{where}: unknown key; accepted keys are {accepted}"
    if kind == "missing":
        return f"{where}: required key is missing"
    if isinstance(cause, ValueError):
        return f"{where}: {_describe(value)} {cause}"
    if kind in _TYPE_ERRORS:
        return f"{where}: {_describe(value)} {_TYPE_ERRORS[kind]}"
    return f"{where}: {_describe(value)} is invalid: {err['msg']}"


def format_validation_error(
    root: type[pydantic.BaseModel], exc: pydantic.ValidationError, prefix: Sequence[PathPart] = ()
) -> ConfigError:
    """Turn pydantic's errors into a :class:`ConfigError` with one camelCase key-path line per problem.

    ``root`` is the model that was validated and ``prefix`` the key path of its input in the stack config
    (``("regions", "fra1")``).
    """
    errors = exc.errors(include_url=False)
    lines = [_line(root, prefix, err) for err in errors[: 2 * MAX_PROBLEMS]]  # duplicates are dropped later
    return ConfigError(lines + ([TOO_MANY_PROBLEMS] * (len(errors) > 2 * MAX_PROBLEMS)))
