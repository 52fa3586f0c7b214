"""Rules an admission webhook enforces that no schema expresses, so a schema check alone would pass them.

- CDI's DataVolume webhook rejects a DataVolume whose size it cannot know: ``spec.storage`` or ``spec.pvc``
  needs ``resources.requests.storage`` unless the source is a PVC or snapshot clone, where CDI may take the
  source's size (only with ``spec.storage``). Source: kubevirt/containerized-data-importer
  ``pkg/apiserver/webhooks/datavolume-validate.go``. The same applies to a VirtualMachine's
  ``spec.dataVolumeTemplates``.
- KubeVirt's DRA admitter (kubevirt/kubevirt v1.9.0 ``pkg/dra/admitter/dra_admitter.go``) checks a VM's GPUs from
  claims: a DRA GPU (no ``deviceName``, a ``claimName``/``requestName``) needs both names, ``gpus`` may not mix DRA
  and device-plugin GPUs, every ``claimName`` must be a ``resourceClaims[].name`` of the template, each
  claim/request pair is used once, and each ``resourceClaims`` entry names exactly one of ``resourceClaimName`` and
  ``resourceClaimTemplateName``.
- A VM that names an instancetype sets none of the ``domain`` fields the instancetype owns (CPU topology, memory,
  CPU and memory requests and limits), and EFI Secure Boot comes with SMM (KubeVirt v1.9.0 ``pkg/instancetype/apply``
  and ``vmi-create-admitter.go``).
- Across objects (:func:`claim_template_violations`): a VM's claim template must be rendered in its namespace, every
  ``gpus[].requestName`` must be a request of it, and each such request must ask for exactly one device (KubeVirt
  v1.9.0 ``pkg/dra/utils.go`` ``resolveDevice``: "KubeVirt only supports exactly one device per request").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpucell.stacks.conformance.objects import Violation

__all__ = ["admission_violations", "claim_template_violations"]

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


def _dra_gpus(vmi: dict[str, Any], path: str) -> Iterator[Violation]:
    """KubeVirt v1.9.0's DRA rules for ``gpus`` and ``resourceClaims`` of a VMI spec at ``path``."""
    claims = vmi.get("resourceClaims") or []
    for index, claim in enumerate(claims):
        given = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
        if len(given) != 1:
            yield Violation(
                f"{path}.resourceClaims[{index}]", "must specify one of: resourceClaimName, resourceClaimTemplateName"
            )
    names = {claim.get("name") for claim in claims}
    gpus = ((vmi.get("domain") or {}).get("devices") or {}).get("gpus") or []
    dra = [(i, g) for i, g in enumerate(gpus) if not g.get("deviceName") and ("claimName" in g or "requestName" in g)]
    if dra and len(dra) != len(gpus):
        yield Violation(
            f"{path}.domain.devices.gpus",
            "mixes DRA GPUs (claimName) with device-plugin GPUs (deviceName), which KubeVirt refuses",
        )
    seen: set[tuple[str, str]] = set()
    for index, gpu in dra:
        where = f"{path}.domain.devices.gpus[{index}]"
        for key in ("claimName", "requestName"):
            if not gpu.get(key):
                yield Violation(where, f"{key} is required for DRA GPU")
        if gpu.get("claimName") and gpu["claimName"] not in names:
            yield Violation(
                f"{where}.claimName",
                f"{gpu['claimName']!r} is not a resourceClaims[].name of the VM "
                "(vmi.spec.resourceClaims must specify all claims used in gpus)",
            )
        pair = (str(gpu.get("claimName")), str(gpu.get("requestName")))
        if pair in seen:
            yield Violation(where, f"duplicate claimName/requestName pair {'/'.join(pair)!r}")
        seen.add(pair)


_INSTANCETYPE_FIELDS = (
    ("resources", "requests", "cpu"),
    ("resources", "limits", "cpu"),
    ("resources", "requests", "memory"),
    ("resources", "limits", "memory"),
    ("cpu", "sockets"),
    ("cpu", "cores"),
    ("cpu", "threads"),
    ("memory", "guest"),
)
"""``domain`` fields a VM sized by an instancetype may never set (KubeVirt v1.9.0 ``validateCPU``/
``validateMemory`` in ``pkg/instancetype/apply``: "VM field(s) ... conflicts with selected instance type")."""


def _instancetype_conflicts(spec: dict[str, Any]) -> Iterator[Violation]:
    if not spec.get("instancetype"):
        return
    domain = ((spec.get("template") or {}).get("spec") or {}).get("domain") or {}
    for path in _INSTANCETYPE_FIELDS:
        node: Any = domain
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            yield Violation(
                "spec.template.spec.domain." + ".".join(path), "conflicts with the instancetype the VM names"
            )


def _secure_boot(spec: dict[str, Any]) -> Iterator[Violation]:
    """KubeVirt v1.9.0 refuses EFI Secure Boot (the default of ``efi``) without SMM (``validateDomainSpec`` in
    ``pkg/virt-api/webhooks/validating-webhook/admitters/vmi-create-admitter.go``)."""
    domain = ((spec.get("template") or {}).get("spec") or {}).get("domain") or {}
    efi = ((domain.get("firmware") or {}).get("bootloader") or {}).get("efi")
    smm = (domain.get("features") or {}).get("smm")
    secure = efi is not None and efi.get("secureBoot", True)
    if secure and not (smm is not None and smm.get("enabled", True)):
        yield Violation(
            "spec.template.spec.domain.firmware.bootloader.efi",
            "has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled",
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
        yield from _dra_gpus((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")
        yield from _instancetype_conflicts(spec)
        yield from _secure_boot(spec)


def claim_template_violations(objects: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Violation]]:
    """``(VM, violation)`` for each DRA GPU of a rendered ``VirtualMachine`` that its ``ResourceClaimTemplate``
    (among ``objects``) does not back with exactly one device."""
    templates = {
        ((o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name")): o
        for o in objects
        if o.get("kind") == "ResourceClaimTemplate"
    }
    for vm in (
        o
        for o in objects
        if o.get("kind") == "VirtualMachine" and str(o.get("apiVersion", "")).startswith("kubevirt.io/")
    ):
        spec = ((vm.get("spec") or {}).get("template") or {}).get("spec") or {}
        namespace = (vm.get("metadata") or {}).get("namespace")
        claims = {c.get("name"): c.get("resourceClaimTemplateName") for c in spec.get("resourceClaims") or []}
        for index, gpu in enumerate(((spec.get("domain") or {}).get("devices") or {}).get("gpus") or []):
            template_name = claims.get(gpu.get("claimName"))
            if not template_name or gpu.get("deviceName"):
                continue
            where = f"spec.template.spec.domain.devices.gpus[{index}]"
            template = templates.get((namespace, template_name))
            if template is None:
                yield vm, Violation(where, f"ResourceClaimTemplate {template_name!r} is not rendered in {namespace}")
                continue
            requests = {
                r.get("name"): r
                for r in (((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get("requests") or []
            }
            request = requests.get(gpu.get("requestName"))
            if request is None:
                yield (
                    vm,
                    Violation(
                        f"{where}.requestName",
                        f"{gpu.get('requestName')!r} is not a request of ResourceClaimTemplate {template_name!r}",
                    ),
                )
            elif (request.get("exactly") or {}).get("count", 1) != 1 or (request.get("exactly") or {}).get(
                "allocationMode", "ExactCount"
            ) != "ExactCount":
                yield (
                    vm,
                    Violation(
                        f"{where}.requestName",
                        f"request {gpu.get('requestName')!r} of "
                        f"ResourceClaimTemplate {template_name!r} asks for more than one device; KubeVirt "
                        "attaches exactly one device per request",
                    ),
                )
