"""Project-level config (``config:`` in ``Pulumi.yaml``) applied to a stack's config as the Pulumi CLI applies it.

Every stack of the project shares what ``Pulumi.yaml`` declares there (Pulumi CLI >= 3.44; docs: "Project file
reference", ``config`` options). The rules below are the CLI's, so that ``gpucell plan`` hands the program what
``pulumi up`` hands it (pulumi/pulumi ``sdk/go/common/workspace/project.go``: ``RewriteShorthandConfigValues``,
``Project.Validate``, the ``configTypeDeclaration`` of ``project.json``; ``config.go``: ``mergeConfig``,
``validateStackConfigValue``, ``ValidateConfigValue``):

- a key without a namespace, or in the project's, is a *declaration*; a plain string, integer, boolean or list
  written directly is its ``default``. Any other key (``aws:region``) is a *value*: written directly, or as
  ``{value: ...}``, never with a ``type`` or ``default``.
- an object (a mapping) can only be written as ``{value: {...}}`` or ``{default: {...}}``: a mapping written
  directly is read as a declaration, whose only attributes are ``type``, ``items``, ``description``, ``secret``,
  ``default`` and ``value`` (not both of the last two). ``type`` is one of ``string``, ``integer``, ``boolean``,
  ``array`` (``array`` needs ``items``).
- a stack that sets the key keeps its own value, whole: a project object is never merged into the stack's (JSON
  merge patch applies only to Pulumi ESC environments). A stack that does not set it gets the project's
  ``value``/``default``, as plain (not secret) config. A project-namespaced declaration with neither is required:
  a stack without it is refused ("Stack 'S' is missing configuration value 'k'").
- a typed declaration checks the stack's value: ``secret: true`` requires a ``secure:`` value, and the value must
  be of the type (a stack's scalar is text: ``"true"`` passes as a boolean, ``"8"`` as an integer).

There is no encryption at project level (each stack has its own secrets provider): a ``secure:`` value in
``Pulumi.yaml`` is refused here with the way out, where the CLI would hand the program the ``{secure: ...}``
mapping as plain text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucell.errors import ConfigError, join_path, shown

__all__ = ["ProjectKey", "apply_project_config", "project_keys"]

_ATTRIBUTES = ("type", "items", "description", "secret", "default", "value")
"""The attributes of a config declaration (``configTypeDeclaration`` in the CLI's ``project.json``)."""
_TYPES = ("string", "integer", "boolean", "array")
"""The declared types the CLI's schema accepts (``simpleConfigType``)."""


@dataclass(frozen=True)
class ProjectKey:
    """One key of ``Pulumi.yaml``'s ``config:``, after the CLI's shorthand rewrite."""

    key: str
    """The full key (``gpucell:gpuModels``)."""
    type: str | None = None
    """Declared type, or ``None`` (untyped: nothing is checked)."""
    items: Any = None
    """``items`` of an ``array`` type (``{type: string}``, nested for lists of lists)."""
    secret: bool = False
    """Stacks must set it as a ``secure:`` value."""
    value: Any = None
    """The ``value``/``default`` a stack without the key gets; ``None`` when there is none."""

    @property
    def required(self) -> bool:
        """A project-namespaced key without a value: every stack must set it."""
        return self.value is None


def _is_shorthand(value: object) -> bool:
    """``isPrimitiveValue || isArray`` of the CLI: a string, integer, boolean or list written directly."""
    return isinstance(value, str | int | bool | list) and not isinstance(value, float)


def _items_problem(items: object, where: tuple[str, ...]) -> str | None:
    """Why ``items`` is not a ``configItemsType`` (``{type, items?}``, ``items`` required for ``array``)."""
    if not isinstance(items, dict) or "type" not in items:
        return f"{join_path(where)}: must be a mapping with a type ({', '.join(_TYPES)})"
    if items["type"] not in _TYPES:
        return f"{join_path((*where, 'type'))}: {items['type']!r} is not one of {', '.join(_TYPES)}"
    if items["type"] == "array":
        if "items" not in items:
            return f"{join_path(where)}: type array needs items"
        return _items_problem(items["items"], (*where, "items"))
    return None


def matches(type_name: str, items: Any, value: Any) -> bool:
    """``ValidateConfigValue`` of the CLI: does ``value`` (a stack's scalar as text, or a parsed object) fit?"""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return True
        return isinstance(value, str) and value.strip().lstrip("+-").isdigit()
    if type_name == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if not isinstance(value, list) or not isinstance(items, dict):
        return False
    return all(matches(items["type"], items.get("items"), item) for item in value)


def _as_stack_value(value: Any) -> Any:
    """A stack file's value as the CLI types it: scalars are text (``true`` -> ``"true"``), objects parsed."""
    if isinstance(value, dict | list):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _as_project_value(value: Any) -> Any:
    """A project default as the CLI turns it into config (``createConfigValue``): strings, integers and booleans
    become text, objects and lists stay objects. Kept as the value itself: the mock engine JSON-encodes it as the
    CLI does (``True`` -> ``"true"``)."""
    return value


def _type_problems(raw: dict[str, Any], where: tuple[str, ...]) -> list[str]:
    """A declaration's ``default``/``value`` pair, ``type`` and ``items`` as ``Project.Validate`` and the schema
    check them."""
    problems: list[str] = []
    if "default" in raw and "value" in raw:
        problems.append(f"{join_path(where)}: cannot have both a default and a value")
    type_name = raw.get("type")
    if type_name is not None and type_name not in _TYPES:
        problems.append(f"{join_path((*where, 'type'))}: {type_name!r} is not one of {', '.join(_TYPES)}")
    if type_name == "array":
        problem = (
            _items_problem(raw["items"], (*where, "items"))
            if "items" in raw
            else f"{join_path(where)}: type array needs items (the type of its elements)"
        )
        problems += [problem] if problem else []
    return problems


def _namespace_problems(project: str, own: bool, raw: dict[str, Any], where: tuple[str, ...]) -> list[str]:
    """A key of another namespace (``aws:region``) is a value: no ``type``, no ``default``, a ``value``."""
    if own:
        return []
    if raw.get("type") is not None or "default" in raw:
        return [f"{join_path(where)}: is not in the {project} namespace: give it a value, no type or default"]
    if "value" not in raw:
        return [f"{join_path(where)}: is not in the {project} namespace and must have a value"]
    return []


def _declaration(project: str, key: str, raw: Any) -> tuple[ProjectKey | None, list[str]]:
    """One ``config:`` entry as the CLI reads it: the shorthand rewritten, then the schema and
    ``Project.Validate`` applied; the problems as lines naming ``Pulumi.yaml``'s key path."""
    where = ("Pulumi.yaml", "config", key)
    own = ":" not in key or key.startswith(f"{project}:")
    full = key if ":" in key else f"{project}:{key}"
    if _is_shorthand(raw):
        raw = {"default": raw} if own else {"value": raw}
    if not isinstance(raw, dict):
        return None, [
            f"{join_path(where)}: must be a string, integer, boolean, list, or a declaration ({{value: ...}}, "
            "{default: ...}, {type: ...})"
        ]
    if set(raw) == {"secure"}:
        return None, [
            f"{join_path(where)}: a secure: value cannot be project-level config (each stack encrypts its own "
            f"secrets); set it in every stack with `pulumi config set --secret {key.rsplit(':', maxsplit=1)[-1]}`"
        ]
    unknown = [name for name in raw if name not in _ATTRIBUTES]
    if unknown:
        return None, [
            f"{join_path((*where, name))}: not allowed; a declaration has {', '.join(_ATTRIBUTES)} (write an object "
            "value as {value: {...}} or {default: {...}})"
            for name in unknown
        ]
    problems = _type_problems(raw, where) + _namespace_problems(project, own, raw, where)
    value = raw.get("default", raw.get("value"))
    type_name = raw.get("type")
    if type_name in _TYPES and "default" in raw and not matches(type_name, raw.get("items"), value):
        problems.append(f"{join_path((*where, 'default'))}: is not of the declared type {type_name}")
    if isinstance(value, dict) and set(value) == {"secure"}:
        problems.append(
            f"{join_path(where)}: a secure: value cannot be project-level config (each stack encrypts its own "
            "secrets); set it in every stack with `pulumi config set --secret`"
        )
    if problems:
        return None, problems
    return ProjectKey(full, type_name, raw.get("items"), bool(raw.get("secret")), _as_project_value(value)), []


def project_keys(project: str, raw: object) -> list[ProjectKey]:
    """``Pulumi.yaml``'s ``config:`` (``raw``, ``None`` when absent) read as the Pulumi CLI reads it.

    Raises :class:`ConfigError` with one line per problem (an object written directly, an unknown attribute, both
    ``default`` and ``value``, an unknown ``type``, ``array`` without ``items``, a default not of its type, a
    ``secure:`` value)."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise ConfigError.at(
            ("Pulumi.yaml", "config"),
            "must be a mapping of config keys (a string here is the old stack config directory, which gpucell does "
            "not read: keep the stack files beside Pulumi.yaml)",
        )
    keys: list[ProjectKey] = []
    problems: list[str] = []
    for key, value in raw.items():
        declared, lines = _declaration(project, str(key), value)
        problems += lines
        if declared is not None:
            keys.append(declared)
    if problems:
        raise ConfigError(problems)
    return keys


def apply_project_config(
    stack: str, keys: list[ProjectKey], config: Mapping[str, Any], secret_keys: list[str]
) -> dict[str, Any]:
    """``config`` (a stack's, full key -> value; ``secret_keys`` were ``secure:``) with the project's ``keys``
    applied, as ``pulumi up`` applies them (``mergeConfig`` with validation): a key the stack sets keeps the
    stack's value whole; one it does not gets the project's value; a required key it lacks, a plain value where a
    secret is declared and a value not of its declared type are refused, one line each."""
    merged = dict(config)
    problems: list[str] = []
    for key in keys:
        short = key.key.split(":", 1)[1]
        if key.key not in config:
            if key.required:
                problems.append(
                    f"{short}: is missing from Pulumi.{stack}.yaml; Pulumi.yaml declares it for every stack "
                    f"(config.{short}), so `pulumi up` refuses the stack without it"
                    + (f"; set it with `pulumi config set --secret {short}`" if key.secret else "")
                )
            elif key.secret and key.type is not None:  # the CLI validates the merged value: a default is plain
                problems.append(
                    f"{short}: Pulumi.yaml declares it secret with a default, which is plain text, so `pulumi up` "
                    f"refuses every stack without its own: set it with `pulumi config set --secret {short}`"
                )
            else:
                merged[key.key] = key.value
            continue
        if key.type is None:
            continue
        if key.key in secret_keys:
            continue  # its type is checked on the decrypted value, which the offline plan does not have
        if key.secret:
            problems.append(
                f"{short}: is stored in plain text in Pulumi.{stack}.yaml; Pulumi.yaml declares it secret, so "
                f"`pulumi up` refuses it: set it with `pulumi config set --secret {short}`"
            )
        elif not matches(key.type, key.items, _as_stack_value(config[key.key])):
            problems.append(
                f"{short}: {shown(_as_stack_value(config[key.key]))} is not of the type {key.type} that Pulumi.yaml "
                f"declares (config.{short}.type), so `pulumi up` refuses it"
            )
    if problems:
        raise ConfigError(problems)
    return merged
