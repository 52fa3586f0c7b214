"""The base every spec model shares: frozen, unknown keys rejected, camelCase keys in stack config, and the same
one-line :class:`~gpucell.errors.ConfigError` whether a spec comes from a stack file or from Python."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Self

import pydantic
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic.config import ExtraValues

from gpucell.errors import format_validation_error

__all__ = ["SpecModel"]

_DEPTH: ContextVar[int] = ContextVar("gpucell_spec_depth", default=0)
"""How many spec constructions are under way in this context. pydantic-core calls a model's own ``__init__`` for
nested models too (``custom_init``), so only the outermost one may turn pydantic's errors into a ConfigError:
the inner ones must raise ``ValidationError`` for pydantic to put their location under the outer one's."""


@contextlib.contextmanager
def _validating(model: type[BaseModel]) -> Iterator[None]:
    """Run a validation; at the outermost level, turn ``ValidationError`` into ``ConfigError`` lines of ``model``."""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    except pydantic.ValidationError as exc:
        if _DEPTH.get() > 1:
            raise
        raise format_validation_error(model, exc) from None
    finally:
        _DEPTH.reset(token)


class SpecModel(BaseModel):
    """Frozen pydantic model read from camelCase stack config (``gpuMode``) into snake_case fields (``gpu_mode``).

    Building one from Python (``CellSpec(...)``, ``CellSpec.model_validate({...})``, ``model_validate_json``)
    raises :class:`~gpucell.errors.ConfigError`, one ``key.path: message`` line per problem with paths relative to
    the model (``nodePools.h100-vm.gpuMode: ...``), exactly as ``pulumi up`` reports the same mistake in a stack
    file (there prefixed with ``regions.<region>``): paths start at the model the caller built.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )

    def __init__(self, /, **data: Any) -> None:
        with _validating(type(self)):
            super().__init__(**data)

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        extra: ExtraValues | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """Validate ``obj`` (camelCase or snake_case keys). Raises :class:`~gpucell.errors.ConfigError`."""
        with _validating(cls):
            return super().model_validate(
                obj,
                strict=strict,
                extra=extra,
                from_attributes=from_attributes,
                context=context,
                by_alias=by_alias,
                by_name=by_name,
            )

    @classmethod
    def model_validate_json(
        cls,
        json_data: str | bytes | bytearray,
        *,
        strict: bool | None = None,
        extra: ExtraValues | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """Validate a JSON document. Raises :class:`~gpucell.errors.ConfigError`."""
        with _validating(cls):
            return super().model_validate_json(
                json_data, strict=strict, extra=extra, context=context, by_alias=by_alias, by_name=by_name
            )
