"""Rules an admission webhook enforces that no schema expresses, so a schema check alone would pass them.

- CDI's DataVolume webhook rejects a DataVolume whose size it cannot know: ``spec.storage`` or ``spec.pvc``
  needs ``resources.requests.storage`` unless the source is a PVC or snapshot clone, where CDI may take the
  source's size (only with ``spec.storage``). Source: kubevirt/containerized-data-importer
  ``pkg/apiserver/webhooks/datavolume-validate.go``. The same applies to a VirtualMachine's
  ``spec.dataVolumeTemplates``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucell.stacks.conformance.objects import Violation

__all__ = ["admission_violations"]

_CLONE_SOURCES = ("pvc", "snapshot")


def _data_volume_spec(spec: dict[str, Any], path: str) -> Iterator[Violation]:
    storage_key = "storage" if "storage" in spec else "pvc" if "pvc" in spec else None
    if storage_key is None:
        yield Violation(path, "a DataVolume needs spec.storage or spec.pvc")
        return
    size = ((spec[storage_key] or {}).get("resources") or {}).get("requests", {}).get("storage")
    source = spec.get("source") or {}
    clone = storage_key == "storage" and any(k in source for k in _CLONE_SOURCES)
    if size is None and not clone:
        yield Violation(
            f"{path}.{storage_key}.resources.requests.storage",
            "is required: CDI cannot size this DataVolume (only PVC or snapshot clones may omit it)",
        )


def admission_violations(obj: dict[str, Any]) -> Iterator[Violation]:
    """Webhook-only rules that ``obj`` breaks."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    spec = obj.get("spec") or {}
    if api_version.startswith("cdi.kubevirt.io/") and kind == "DataVolume":
        yield from _data_volume_spec(spec, "spec")
    if api_version.startswith("kubevirt.io/") and kind == "VirtualMachine":
        for index, template in enumerate(spec.get("dataVolumeTemplates") or []):
            yield from _data_volume_spec(template.get("spec") or {}, f"spec.dataVolumeTemplates[{index}].spec")
