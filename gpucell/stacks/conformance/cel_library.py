"""The CEL environment of CRD validation rules, as far as the ``cel`` library (``common-expression-language``, the
Rust ``cel`` crate) carries it: which functions a rule may call here, and the Kubernetes extension functions
gpucell adds in Python.

The API server compiles ``x-kubernetes-validations`` rules with cel-go's standard library plus Kubernetes' extension
libraries (kubernetes ``staging/src/k8s.io/apiserver/pkg/cel/environment/base.go``; the libraries in
``.../pkg/cel/library/``). Here:

- native to the Rust crate: the operators, the macros (``has``, ``all``, ``exists``, ``exists_one``, ``map``,
  ``filter``), ``size``, ``contains``/``startsWith``/``endsWith``/``matches``, the conversions (``int``, ``uint``,
  ``double``, ``string``, ``bytes``, ``timestamp``, ``duration``, ``dyn``, ``type``), timestamp and duration
  accessors (``getHours``...) and ``optional.of``/``optional.none`` with ``value``/``hasValue``/``orValue``/``or``;
- added from the package's ``cel.stdlib``: ``bool()``, cel-go's strings extension (``charAt``, ``indexOf``,
  ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``,
  ``reverse``, ``strings.quote``) and sets extension (``sets.contains``, ``sets.equivalent``, ``sets.intersects``);
- written here: Kubernetes' lists library (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf`` on
  lists; ``library/lists.go``) and regex library (``find``, ``findAll``; ``library/regex.go``).

Not here, so a rule calling them is reported as not evaluated (:func:`unsupported`): the URL, quantity, IP, CIDR,
format and semver libraries (``url()``, ``quantity()``, ``isIP``, ``ip()``, ``cidr()``, ``format.*``...), which
return typed objects with methods of their own, ``cel.bind``, two-variable comprehensions, and the ``self.?field``
optional-field syntax, which the Rust crate does not parse (such a rule fails to compile and is reported so).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from cel.stdlib import EXTENSIONS

__all__ = ["FUNCTIONS", "unsupported"]

_NATIVE = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "timestamp",
        "duration",
        "dyn",
        "type",
        "getFullYear",
        "getMonth",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        "optional.of",
        "optional.none",
        "optional.ofNonZeroValue",
        "value",
        "hasValue",
        "orValue",
        "or",
    }
)
"""Functions the Rust crate evaluates itself (checked against ``common-expression-language`` 0.10.0)."""
_OPERATOR = re.compile(r"^[^A-Za-z]")
"""Operator overloads as ``Program.functions()`` names them: ``_==_``, ``_[_]``, ``@in``, ``!_``, ``-_``."""


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in itertools.pairwise(items))


def _least(items: list[Any]) -> Any:
    if not items:
        raise ValueError("min called on an empty list")
    return min(items)


def _greatest(items: list[Any]) -> Any:
    if not items:
        raise ValueError("max called on an empty list")
    return max(items)


def _index_of(container: Any, item: Any, *offset: int) -> int:
    """``indexOf`` of cel-go's strings extension on strings, of Kubernetes' lists library on lists."""
    if isinstance(container, list):
        return next((i for i, x in enumerate(container) if x == item), -1)
    return int(EXTENSIONS["strings"]["indexOf"](container, item, *offset))


def _last_index_of(container: Any, item: Any, *offset: int) -> int:
    if isinstance(container, list):
        return next((i for i in range(len(container) - 1, -1, -1) if container[i] == item), -1)
    return int(EXTENSIONS["strings"]["lastIndexOf"](container, item, *offset))


def _find(text: str, pattern: str) -> str:
    """``find`` of Kubernetes' regex library: the first match, ``""`` when none (Python's ``re`` for RE2)."""
    match = re.search(pattern, text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, text)]
    return found if limit < 0 else found[:limit]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    **EXTENSIONS["strings"],
    **EXTENSIONS["sets"],
    "bool": EXTENSIONS["core"]["bool"],
    "isSorted": _is_sorted,
    "sum": EXTENSIONS["core"]["sum"],
    "min": _least,
    "max": _greatest,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "find": _find,
    "findAll": _find_all,
}
"""CEL function name -> implementation, registered on every evaluation's context."""


def unsupported(functions: list[str]) -> list[str]:
    """The names among a compiled rule's ``Program.functions()`` that neither the Rust crate nor :data:`FUNCTIONS`
    provides (sorted): a rule calling any of them is not evaluated."""
    return sorted(
        name for name in functions if not _OPERATOR.match(name) and name not in _NATIVE and name not in FUNCTIONS
    )
