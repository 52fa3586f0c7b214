"""What a conformance check reports: problems (which fail the check) and notices (which only inform)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MissingToolError", "Notice", "Problem", "Subject"]


@dataclass(frozen=True)
class Subject:
    """What a problem is about: a Kubernetes object, a Helm release, a node file."""

    region: str
    kind: str
    """Kubernetes kind (``KubeVirt``), ``HelmValues``, ``NodeScript`` or ``NodeConfig``."""
    namespace: str
    """Namespace, or ``-`` for cluster-scoped objects and non-objects."""
    name: str

    def __str__(self) -> str:
        return f"{self.region}/{self.kind}/{self.namespace or '-'}/{self.name}"


@dataclass(frozen=True)
class Problem:
    """One failed check: ``region/kind/namespace/name: path: message``."""

    subject: Subject
    path: str
    """Where in the subject: a dotted key path (``spec.configuration.foo``), a line (``line 12``) or ``-``."""
    message: str
    checker: str
    """Which checker found it: ``kubernetes``, ``custom-resource``, ``helm-values``, ``script``, ``node-config``,
    ``security``."""

    def __str__(self) -> str:
        return f"{self.subject}: {self.path or '-'}: {self.message}"


@dataclass(frozen=True)
class Notice:
    """Something a reader should know that is not a failure, e.g. a schema of another version than pinned."""

    message: str

    def __str__(self) -> str:
        return f"note: {self.message}"


class MissingToolError(FileNotFoundError):
    """A program or library ``--check`` needs is not installed; the message says how to get it (one line)."""
