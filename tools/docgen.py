"""Generate ``docs/config.md`` from the spec models, so the reference never drifts from what is validated.

Run ``python -m tools.docgen > docs/config.md``; a test fails when the committed file is stale.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from typing import Any

import pydantic
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpucell.admission.inventory import WHOLE_GPU
from gpucell.catalog.gpu_catalog import CATALOG, mig_resource_name
from gpucell.day2.disruption import Acknowledgement
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.gpu_models import GpuModelSpec

__all__ = ["plain_markdown", "render"]

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
    "nodePools.*.gpuMode": "`vm-passthrough`, `dra`",
    "nodePools.*.topology.numaNodes": "`2`",
    "nodePools.*.topology.reservedMemoryPerNumaMib": "`4096`",
    "nodePools.*.topology.cpusPerNuma": "`112`",
    "tenants.*.modelEndpoints.*.runtimeVersion": "`v0.11.0` (vLLM), `2.6.2-gpu` (TensorFlow Serving)",
    "nodePools.*.topology.memoryPerNumaGib": "`1000`",
    "nodePools.*.topology.hugepages1GiPerNuma": "`960`",
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
    "draDriver.values": "`{logVerbosity: '6'}`",
    "tenants.*.quota.deviceClasses": "`{gpu.nvidia.com: 4, vfio.gpu.nvidia.com: 4}`",
    "tenants.*.virtualMachines.*.gpuAllocation": "`dra`",
    "tenants.*.notebooks.*.gpu.allocation": "`dra`",
    "tenants.*.modelEndpoints.*.gpu.allocation": "`dra`",
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
    "acknowledge[].change": "`podCidr`",
    "acknowledge[].region": "`fra1`",
    "acknowledge[].subject": "`fra1-h100-3`",
    "acknowledge[].reason": "`maintenance window CHG-1234`",
    "k3s.profile": "`none` (labs only)",
    "k3s.secretsEncryption": "`false` (a cell created without it)",
    "k3s.installerSha256": "64 hex digits from `sha256sum`",
    "oidc.issuerUrl": "`https://login.example.net/realms/gpucell`",
    "oidc.clientId": "`kubernetes`",
    "oidc.usernameClaim": "`email`",
    "oidc.groupsPrefix": "`idp:`",
    "tenants.*.quota.nodePorts": "`1`",
    "tenants.*.virtualMachines.*.sshService.allowFromCidrs": "`[198.51.100.0/24]`",
    "gpuModels.*.pciDeviceId": "`2322`",
    "gpuModels.*.pciDeviceName": "`GH100 [H800 PCIe]`",
    "gpuModels.*.architecture": "`Hopper`",
    "gpuModels.*.framebufferMib": "`81559`",
    "gpuModels.*.migConfigs": "`{all-1g.10gb: {1g.10gb: 7}}`",
    "gpuModels.*.vgpuProfiles": "`{L40S-12Q: 4}`",
    "gpuModels.*.vfPciDeviceId": "`26b9`",
    "gpuModels.*.hgx.nvswitch": "`GH100`, `{pciDeviceId: 22a3, pciDeviceName: GH100 [H100 NVSwitch]}`",
    "gpuModels.*.bar1Mib": "`131072`",
}


_UNITS: dict[str, str] = {
    "network.podCidrMaskSize": "prefix bits",
    "network.apiPort": "TCP port",
    "ssh.port": "TCP port",
    "nodePools.*.ssh.port": "TCP port",
    "nodePools.*.gpusPerNode": "GPUs per host",
    "nodePools.*.topology.numaNodes": "count",
    "nodePools.*.topology.reservedMemoryPerNumaMib": "MiB",
    "nodePools.*.topology.cpusPerNuma": "logical CPUs",
    "nodePools.*.topology.memoryPerNumaGib": "GiB",
    "nodePools.*.topology.hugepages1GiPerNuma": "pages",
    "nodePools.*.topology.hugepages2MiPerNuma": "pages",
    "storage.replicas": "replicas per volume",
    "gpuModels.*.framebufferMib": "MiB",
    "gpuModels.*.bar1Mib": "MiB",
    "gpuModels.*.hgx.gpus": "GPUs per board",
    "gpuModels.*.hgx.nvswitches": "chips per board",
}


_ROLE = r":(?:py:)?(?:class|meth|func|data|attr|mod|obj|exc|const):`(?P<tilde>~?)(?P<target>[^`]+)`"
_PRIVATE_ROLES = (
    re.compile(rf"\s*\(\s*(?:see\s+)?{_ROLE}\s*\)"),  # (see :meth:`_x`)
    re.compile(rf"(?:\s*[:;,]?\s*\bsee\s+)?{_ROLE}"),  # : see :meth:`_x`
)
_ANY_ROLE = re.compile(_ROLE)


def _is_private(target: str) -> bool:
    target = target.rsplit("<", 1)[-1].rstrip(">")  # :meth:`title <target>`
    return any(part.startswith("_") and not part.startswith("__") for part in target.split("."))


def _role_as_code(match: re.Match[str]) -> str:
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<target>[^>]+)>", match["target"])
    if titled:  # :meth:`title <target>`
        return f"`{titled['title']}`"
    target = match["target"].removesuffix("()")
    return f"`{target.rsplit('.', 1)[-1] if match['tilde'] else target}`"


def plain_markdown(text: str) -> str:
    """A docstring's reStructuredText as Markdown: ````code```` as `` `code` ``, a Sphinx role (``:class:`X```,
    ``:meth:`~a.b.c```) as `` `X` `` (`` `c` `` with ``~``, as Sphinx shows it), and a role naming a private name
    (``:meth:`_rule```) dropped with the ``see`` before it or the parentheses around it: a reader of the docs
    cannot look it up."""
    for private in _PRIVATE_ROLES:
        text = private.sub(lambda m: "" if _is_private(m["target"]) else m[0], text)
    return _ANY_ROLE.sub(_role_as_code, text).replace("``", "`")


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args if a is not type(None))
    if annotation is Any or annotation is object:
        return "any"
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return "object"
    return {
        "str": "string",
        "int": "integer",
        "bool": "boolean",
        "IPv4Network": "IPv4 CIDR",
        "IPv4Address": "IPv4 address",
        "Any": "any",
    }.get(getattr(annotation, "__name__", str(annotation)), getattr(annotation, "__name__", str(annotation)))


def _default(field: FieldInfo, enclosing: pydantic.BaseModel | None = None, name: str = "") -> str:
    """The default column: ``field``'s own default, or its value in ``enclosing``, the default of the key that holds
    it (a tenant cluster's workers default to ``cpu: {cores: 4}`` though a CPU topology's own default is 2)."""
    if field.is_required() and enclosing is None:
        return "required"
    value = field.default if enclosing is None else getattr(enclosing, name)
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


def _rows(model: type[pydantic.BaseModel], prefix: str, enclosing: pydantic.BaseModel | None = None) -> list[str]:
    """One row per key of ``model`` under ``prefix``, nested models' keys after their own; ``enclosing``: the default
    instance of ``model`` the key holding it has, whose values are the nested keys' defaults."""
    rows: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{prefix}{key}"
        nested = _nested_model(field.annotation)
        origin = typing.get_origin(_strip_optional(field.annotation))
        description = plain_markdown(" ".join((field.description or "").split())).replace("|", "\\|")
        example = _EXAMPLES.get(path, "")
        unit = _UNITS.get(path, "")
        default = _default(field, enclosing, name)
        rows.append(f"| `{path}` | {_type_name(field.annotation)} | {unit} | {default} | {description} | {example} |")
        if nested is not None:
            suffix = {dict: ".*.", list: "[]."}.get(origin, ".")
            holds = getattr(enclosing, name) if enclosing is not None else field.default
            rows += _rows(nested, f"{path}{suffix}", holds if isinstance(holds, nested) else None)
    return rows


def render() -> str:
    """The config reference in Markdown."""
    header = [
        "# Stack config reference",
        "",
        "Generated from the spec models by `python -m tools.docgen > docs/config.md`; do not edit by hand.",
        "",
        "All keys live in the `gpucell` namespace of `Pulumi.<stack>.yaml`. `gpucell:regions` maps a region name",
        "(a DNS-1123 label) to the region's cell; every key of the first table is relative to",
        "`gpucell:regions.<region>`. `gpucell:gpuModels` (GPU models of your own, for every region) and",
        "`gpucell:acknowledge` have sections of their own below.",
        "A region's SSH private key is a separate secret key (default `gpucell:sshPrivateKey`, set with",
        "`pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519`).",
        "",
        "Units are in the key name or description: MiB, GiB, counts. A mistake stops the run with one line",
        "naming the key path, the bad value and what is accepted.",
        "",
        "| key | type | unit | default | meaning | example |",
        "|---|---|---|---|---|---|",
    ]
    # regions' values are CellSpec; production and otherCells have a section of their own
    assert set(StackSpec.model_fields) == {"regions", "gpu_models", "production", "other_cells"}
    return (
        "\n".join(
            [
                *header,
                *_rows(CellSpec, ""),
                *gpu_catalog_section(),
                *_GPU_MODELS,
                *_rows(GpuModelSpec, "gpuModels.*."),
                *_FLEET,
                *_ACKNOWLEDGE,
                *_rows(Acknowledgement, "acknowledge[]."),
                *_EDITORS,
            ]
        )
        + "\n"
    )


def _codes(names: typing.Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) or "none"


def gpu_catalog_section() -> list[str]:
    """The GPU models ``nodePools.*.gpuModel`` accepts and the extended resources each mode advertises: the names
    tenant quotas (``tenants.*.quota.gpus``) and the capacity view use."""
    lines = [
        "",
        "## GPU models",
        "",
        "`nodePools.*.gpuModel` (and `gpuModel` of VMs, notebooks and endpoints) takes these names. `migConfig` and",
        "`vgpuProfile` take the values listed for the model.",
        "",
        "| gpuModel | PCI device | memory (GiB) | migConfig | vgpuProfile |",
        "|---|---|---|---|---|",
    ]
    for model in CATALOG.values():
        lines.append(
            f"| `{model.name}` | `{model.pci_selector}` {model.pci_device_name} | {model.memory_gib} | "
            f"{_codes(model.mig_configs)} | {_codes(model.vgpu_profiles)} |"
        )
    lines += [
        "",
        "## GPU resources for quotas",
        "",
        "`tenants.*.quota.gpus` is keyed by the extended resource a pool's nodes advertise, which follows from the",
        "pool's `gpuMode` (and `migConfig` / `vgpuProfile`). `gpucell plan` prints each region's resources with",
        "their capacity.",
        "",
        "| gpuModel | container | container with MIG (`migStrategy: mixed`) | vm-passthrough | vm-vgpu |",
        "|---|---|---|---|---|",
    ]
    for model in CATALOG.values():
        profiles = sorted({p for layout in model.mig_configs.values() for p in layout})
        lines.append(
            f"| `{model.name}` | `{WHOLE_GPU}` | {_codes(mig_resource_name(p) for p in profiles)} | "
            f"`{model.passthrough_resource}` | {_codes(model.vgpu_resource(p) for p in model.vgpu_profiles)} |"
        )
    lines += ["", "Under `migStrategy: single` a MIG instance is advertised as `nvidia.com/gpu`."]
    return lines


_GPU_MODELS = [
    "",
    "## `gpucell:gpuModels`",
    "",
    "GPU models of your own, beside the built-in ones above, for every region of the stack: catalog name ->",
    "the model's facts, checked by the rules the built-in models pass (a PCI id or resource no other model has, MIG",
    "layouts as the GPU Operator's MIG manager names them, vGPU types that fit the framebuffer). A pool, VM,",
    "notebook or endpoint names one by its key in `gpuModel` like a built-in one. docs/gpus.md has an example and",
    "what changing a model on a live cell does.",
    "",
    "```yaml",
    "  gpucell:gpuModels:",
    "    H800-PCIe-80GB:",
    "      pciDeviceId: '2322'",
    "      pciDeviceName: GH100 [H800 PCIe]",
    "      architecture: Hopper",
    "      framebufferMib: 81559",
    "```",
    "",
    "| key | type | unit | default | meaning | example |",
    "|---|---|---|---|---|---|",
]


def _description(model: type[pydantic.BaseModel], name: str) -> str:
    """A field's docstring on one line."""
    return " ".join((model.model_fields[name].description or "").split())


_FLEET = [
    "",
    "## `gpucell:production` and `gpucell:otherCells`",
    "",
    "Production is one stack per region (docs/decisions/0034). `gpucell:production: true` (default `false`, declared",
    "in `Pulumi.yaml`) makes a stack hold one region and pin every component version in `regions.<region>.versions`",
    "(`gpucell pin-versions STACK` writes them); a stack without it may hold several regions (a lab), planned with a",
    "warning naming the failure domain they share. `gpucell:otherCells` (region -> CIDRs, written once for the fleet",
    "in `Pulumi.yaml`) lists the networks of the cells other stacks deploy: each cell's tenants are denied them, as",
    "they are denied the networks of their stack's other regions; a stack skips the entries of its own regions.",
    "",
    "```yaml",
    "  gpucell:production: true",
    "```",
    "",
    "| key | type | unit | default | meaning | example |",
    "|---|---|---|---|---|---|",
    f"| `production` | boolean | | `false` | {_description(StackSpec, 'production')} | `true` |",
    f"| `otherCells` | map of CIDR lists | | none | {_description(StackSpec, 'other_cells')} | "
    "`{iad1: [10.120.0.0/22]}` |",
]
_ACKNOWLEDGE = [
    "",
    "## `gpucell:acknowledge`",
    "",
    "A list of the disruptive changes the next `pulumi up` may apply; `pulumi up` refuses any other disruptive",
    "change against the last deployment, and an entry that matches nothing is an error (remove it after the run",
    "that applied it). The kinds of change and what each does to running workloads: docs/reviewing-changes.md.",
    "",
    "```yaml",
    "  gpucell:acknowledge:",
    '  - {change: gpuMode, region: fra1, subject: fra1-h100-3, reason: "drained for CHG-1234"}',
    "```",
    "",
    "| key | type | unit | default | meaning | example |",
    "|---|---|---|---|---|---|",
]

_EDITORS = [
    "",
    "## Editor support: the JSON Schema of stack files",
    "",
    "`schema/gpucell-stack.schema.json` is the JSON Schema (2020-12) of `Pulumi.<stack>.yaml`, generated from the",
    "same models (`gpucell schema --out schema/gpucell-stack.schema.json`; a test fails when it is stale). With it",
    "an editor completes keys, shows each key's description, and flags unknown keys, wrong enum values, numbers",
    "out of range and secrets stored in plain text while you type. Cross-field rules (a MIG layout the GPU model",
    "lacks, quotas that exceed the region) are checked by `gpucell plan` only.",
    "",
    "**VS Code** (Red Hat's YAML extension, `redhat.vscode-yaml`): map the stack files to the schema in the",
    "workspace's `.vscode/settings.json`:",
    "",
    "```json",
    "{",
    '  "yaml.schemas": {',
    '    "./schema/gpucell-stack.schema.json": "Pulumi.*.yaml"',
    "  }",
    "}",
    "```",
    "",
    "or name the schema in a stack file's first line (a modeline the extension reads; the path is relative to the",
    "file):",
    "",
    "```yaml",
    "# yaml-language-server: $schema=./schema/gpucell-stack.schema.json",
    "```",
    "",
    "Leave `Pulumi.yaml` (the project file) out of the mapping: it has its own shape.",
    "",
    "**JetBrains IDEs** (IntelliJ IDEA, PyCharm, GoLand...): *Settings > Languages & Frameworks > Schemas and DTDs >",
    "JSON Schema Mappings*, add a mapping, set *Schema file or URL* to `schema/gpucell-stack.schema.json` (the",
    "version is read from its `$schema`) and add a *File path pattern* `Pulumi.*.yaml`. Projects can share the",
    "mapping by committing `.idea/jsonSchemas.xml`.",
]


if __name__ == "__main__":
    print(render(), end="")
