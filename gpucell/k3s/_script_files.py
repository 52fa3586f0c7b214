"""The node scripts' bash as real files: package data under ``gpucell/k3s/scripts/`` (issue 28, decision 0033).

Each ``.sh`` file is bash an editor, ``bash -n`` and ``shellcheck`` read as such. A file is one of two kinds:

- a whole script, starting with its shebang (``preamble.sh``, ``vgpu/reconciler.sh``): rendered whole;
- a fragment, starting with the line ``# shellcheck shell=bash``: its header (that line, any further
  ``# shellcheck`` directives and notes on why the fragment is as it is) runs up to the first blank line and is not
  rendered; the rest is.

Values go in through placeholders ``@@NAME@@`` (capitals, digits, ``_``), which cannot collide with bash's own
``${name}`` and leave the files parseable: inline, a placeholder is replaced by the value's text
(``readonly NODE=@@NODE@@``: the caller quotes it, with :func:`shlex.quote`); a line holding only a placeholder is a
block, replaced with its line end by the value, which is empty or ends with a newline (generated lines, another
fragment).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

__all__ = ["render", "text"]

_DIRECTIVE = "# shellcheck shell=bash\n"
_PLACEHOLDER = re.compile(r"^@@(?P<block>[A-Z][A-Z0-9_]*)@@\n|@@(?P<inline>[A-Z][A-Z0-9_]*)@@", re.MULTILINE)
"""A block (a line of its own, with its line end) or an inline placeholder; one pass, so that a value's own text
(a label, a config file) is never read as a placeholder."""


@functools.cache
def text(name: str) -> str:
    """The rendered part of ``scripts/<name>.sh`` (``name`` such as ``k3s/install``), placeholders left in; raises
    ``FileNotFoundError`` for a name without a file."""
    raw = resources.files("gpucell.k3s").joinpath("scripts", *f"{name}.sh".split("/")).read_text(encoding="utf-8")
    if not raw.startswith(_DIRECTIVE):
        return raw
    return raw.split("\n\n", 1)[1]


def render(name: str, **values: object) -> str:
    """``scripts/<name>.sh`` with each ``@@NAME@@`` replaced by ``values["name"]`` (``str()`` of it).

    Raises ``KeyError`` naming a placeholder without a value, and ``ValueError`` for a block value that is neither
    empty nor ends with a newline (it would join the next line).
    """

    def value(match: re.Match[str]) -> str:
        placeholder = match.group("block") or match.group("inline")
        if placeholder.lower() not in values:
            raise KeyError(f"scripts/{name}.sh: no value for @@{placeholder}@@")
        found = str(values[placeholder.lower()])
        if match.group("block") and found and not found.endswith("\n"):
            raise ValueError(f"scripts/{name}.sh: the block @@{placeholder}@@ must be empty or end with a newline")
        return found

    return _PLACEHOLDER.sub(value, text(name))
