"""Release numbers of pinned versions: the one helper every layer compares versions with.

It depends on nothing else in gpucell, so the catalogs (:mod:`gpucell.catalog.kserve_runtimes`) and the specs
(:mod:`gpucell.spec.versions`) both read it without importing each other.
"""

from __future__ import annotations

__all__ = ["release"]


def release(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a pinned version: ``release("v0.20.0") == (0, 20)``.

    Accepts an optional leading ``v`` and anything after the minor (``"1.34.5+k3s1"`` gives ``(1, 34)``). Raises
    ``ValueError`` when the version has no numeric major and minor.
    """
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)
