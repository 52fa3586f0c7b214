"""The base every spec model shares: frozen, unknown keys rejected, camelCase keys in stack config."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["SpecModel"]


class SpecModel(BaseModel):
    """Frozen pydantic model read from camelCase stack config (``gpuMode``) into snake_case fields (``gpu_mode``)."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )
