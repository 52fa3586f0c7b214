"""Generate ``docs/config.md`` from the spec models, so the reference never drifts from what is validated.

Run ``python -m gpucell.stacks.docgen > docs/config.md``; a test fails when the committed file is stale.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpucell.spec import CellSpec, StackSpec

__all__ = ["render"]

_EXAMPLES: dict[str, str] = {
    "versions.k3s": "`v1.34.2+k3s1`",
    "versions.cilium": "`1.20.0`",
    "versions.kubevirt": "`v1.9.0`",
    "versions.gpuOperator": "`v26.7.0`",
    "versions.kserve": "`v0.20.0`",
    "network.podCidr": "`10.111.0.0/16`",
    "network.serviceCidr": "`10.112.0.0/16`",
    "network.clusterDns": "`10.112.0.10`",
    "network.podCidrMaskSize": "`24`",
    "ssh.user": "`ubuntu`",
    "ssh.port": "`22`",
    "ssh.privateKeyConfigKey": "`sshPrivateKeyFra1`",
    "nodePools.*.role": "`gpu`",
    "nodePools.*.hosts[].name": "`fra1-h100-1`",
    "nodePools.*.hosts[].address": "`10.110.0.21`",
    "nodePools.*.ssh.user": "`admin`",
    "nodePools.*.gpuMode": "`vm-passthrough`",
    "nodePools.*.topology.numaNodes": "`2`",
    "nodePools.*.topology.reservedMemoryPerNumaMib": "`4096`",
    "storage.backend": "`longhorn`",
    "storage.replicas": "`3`",
    "storage.values": "`{defaultSettings: {storageOverProvisioningPercentage: '150'}}`",
    "certManager.values": "`{prometheus: {enabled: false}}`",
    "gpuOperator.migStrategy": "`mixed`",
    "gpuOperator.dcgmExporter": "`true`",
    "gpuOperator.values": "`{driver: {version: 580.95.05}}`",
    "gpuOperator.vgpuDriverImage.image": "`vgpu-manager`",
    "kserve.deploymentMode": "`Standard`",
    "kserve.values": "`{kserve: {controller: {gateway: {domain: models.example.net}}}}`",
    "cdi.uploadProxyUrl": "`https://cdi-upload.fra1.example.net`",
    "regions": "`fra1: {...}`",
    "network.nodeCidr": "`10.110.0.0/22`",
    "network.apiEndpoint": "`10.110.0.10` or `api.fra1.example.net`",
    "network.tlsSans": "`[api.fra1.example.net]`",
    "nodePools": "`h100-vm: {role: gpu, ...}`",
    "nodePools.*.hosts": "`[{name: fra1-h100-1, address: 10.110.0.21}]`",
    "nodePools.*.gpuModel": "`H100-SXM5-80GB`",
    "nodePools.*.gpusPerNode": "`8`",
    "nodePools.*.migConfig": "`all-1g.18gb`, `all-balanced`",
    "nodePools.*.vgpuProfile": "`L40S-12Q`",
    "nodePools.*.topology.reservedCpus": "`0-3,112-115`",
    "nodePools.*.labels": "`{example.com/rack: r12}`",
    "nodePools.*.taints": "`[dedicated=vm:NoSchedule]`",
    "gpuOperator.vgpuDriverImage.repository": "`registry.example.com/nvidia`",
    "gpuOperator.vgpuDriverImage.version": "`580.95.02-ubuntu24.04`",
    "cilium.values": "`{hubble: {ui: {enabled: true}}}`",
    "k3s.profile": "`none` (labs only)",
    "k3s.secretsEncryption": "`false` (a cell created without it)",
    "k3s.installerSha256": "64 hex digits from `sha256sum`",
    "oidc.issuerUrl": "`https://login.example.net/realms/gpucell`",
    "oidc.clientId": "`kubernetes`",
    "oidc.usernameClaim": "`email`",
    "oidc.groupsPrefix": "`idp:`",
    "tenants.*.quota.nodePorts": "`1`",
    "tenants.*.virtualMachines.*.sshService.allowFromCidrs": "`[198.51.100.0/24]`",
}


_UNITS: dict[str, str] = {
    "network.podCidrMaskSize": "prefix bits",
    "network.apiPort": "TCP port",
    "ssh.port": "TCP port",
    "nodePools.*.ssh.port": "TCP port",
    "nodePools.*.gpusPerNode": "GPUs per host",
    "nodePools.*.topology.numaNodes": "count",
    "nodePools.*.topology.reservedMemoryPerNumaMib": "MiB",
    "storage.replicas": "replicas per volume",
}


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if annotation is Any:
        return "any"
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return "object"
    return {"str": "string", "int": "integer", "bool": "boolean", "IPv4Network": "IPv4 CIDR",
            "IPv4Address": "IPv4 address", "Any": "any"}.get(getattr(annotation, "__name__", str(annotation)),
                                                             str(annotation))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default
    if value is PydanticUndefined or value is None:
        return "none"
    if isinstance(value, pydantic.BaseModel):
        return "see below"
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value in ({}, []):
        return "empty"
    return f"`{value}`"


def _nested_model(annotation: Any) -> type[pydantic.BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, pydantic.BaseModel):
            return candidate
        nested = typing.get_args(candidate)
        if nested and candidate is not annotation:
            found = _nested_model(candidate)
            if found:
                return found
    return None


def _strip_optional(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _rows(model: type[pydantic.BaseModel], prefix: str) -> list[str]:
    rows: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{prefix}{key}"
        nested = _nested_model(field.annotation)
        origin = typing.get_origin(_strip_optional(field.annotation))
        description = " ".join((field.description or "").split()).replace("|", "\\|").replace("``", "`")
        example = _EXAMPLES.get(path, "")
        unit = _UNITS.get(path, "")
        rows.append(
            f"| `{path}` | {_type_name(field.annotation)} | {unit} | {_default(field)} | {description} | {example} |"
        )
        if nested is not None:
            suffix = {dict: ".*.", list: "[]."}.get(origin, ".")
            rows += _rows(nested, f"{path}{suffix}")
    return rows


def render() -> str:
    """The config reference in Markdown."""
    header = [
        "# Stack config reference",
        "",
        "Generated from the spec models by `python -m gpucell.stacks.docgen > docs/config.md`; do not edit by hand.",
        "",
        "All keys live in the `gpucell` namespace of `Pulumi.<stack>.yaml`. `gpucell:regions` maps a region name",
        "(a DNS-1123 label) to the region's cell; every key below is relative to `gpucell:regions.<region>`.",
        "A region's SSH private key is a separate secret key (default `gpucell:sshPrivateKey`, set with",
        "`pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519`).",
        "",
        "Units are in the key name or description: MiB, GiB, counts. A mistake stops the run with one line",
        "naming the key path, the bad value and what is accepted.",
        "",
        "| key | type | unit | default | meaning | example |",
        "|---|---|---|---|---|---|",
    ]
    assert StackSpec.model_fields["regions"]  # the one top-level key; its values are CellSpec
    return "\n".join([*header, *_rows(CellSpec, "")]) + "\n"


if __name__ == "__main__":
    print(render(), end="")
