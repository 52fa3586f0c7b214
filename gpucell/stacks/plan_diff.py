"""What changes between two offline plans, resource by resource, as ``pulumi up`` would carry it out.

Reads two ``gpucell plan --json`` documents generically: resources are matched by URN (and by the ``aliases``
option), inputs are compared path by path, resource options come from ``options``. Nothing here knows gpucell's
components, so resources other issues add (node patches, reconfiguration commands) are diffed the same way.

Replacements follow the providers' own rules:

- Kubernetes objects: ``metadata.name``/``metadata.namespace`` and the per-kind immutable fields pulumi-kubernetes
  replaces on (:func:`force_new`, :data:`K8S_FORCE_NEW`, from pulumi/pulumi-kubernetes
  ``provider/pkg/provider/diff.go``; patches only on their identity); a Helm release on ``name``/``namespace``
  (``helm_release.go``). A named object is deleted before it is created again.
- any resource: a change under one of its ``replaceOnChanges`` option paths (pulumi-command's ``triggers[*]``);
- a k3s node whose name changes (same ``node-ip``, another ``node-name``): an agent joins again under the new name
  and the old Node is deleted (k3s stays installed); a server refuses the rename at install time.

Changes that cannot reach the live object as it is are marked *immutable* (:data:`K8S_IMMUTABLE`): a VM's
``dataVolumeTemplates`` source or class (KubeVirt creates a DataVolume only when it is missing), a DataVolume's spec
(CDI's webhook refuses updates). Changes a running VM takes only when it restarts are marked *restart*
(:data:`K8S_RESTART`: its instancetype, preference, domain, volumes); a changed instancetype or preference says that
existing VMs keep the copy they captured (:data:`REVISIONED_KINDS`), and a changed cloud-init Secret that existing VMs
keep what their first boot applied.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "K8S_FORCE_NEW",
    "K8S_IMMUTABLE",
    "K8S_RESTART",
    "MISSING",
    "REVISIONED_KINDS",
    "ROLLOUTS",
    "SECRET_CHANGED",
    "UNIT_CHANGE_NOTE",
    "InputChange",
    "PlanDiff",
    "ResourceDiff",
    "TextDiff",
    "diff_plans",
    "diff_values",
    "force_new",
    "index_plan",
    "unwrap_script",
]

COMPONENT_PREFIX = "gpucell:index:"
REGION_TYPE = f"{COMPONENT_PREFIX}RegionalCell"
COMMAND_TYPE = "command:remote:Command"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
SECRET = "[secret]"
SECRET_CHANGED = "[secret, changed]"
"""The new side of a secret input whose digest (the plan's ``secrets``) differs: its value is never shown."""


class _Missing:
    """The value of a path on the side where it does not exist."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Stands for "absent" in an :class:`InputChange`."""


def _containers(*prefixes: str) -> tuple[str, ...]:
    """``containerForceNewProperties`` of diff.go."""
    fields = (
        "args",
        "command",
        "env",
        "env.value",
        "image",
        "imagePullPolicy",
        "lifecycle",
        "livenessProbe",
        "ports",
        "readinessProbe",
        "resources",
        "securityContext",
        "stdin",
        "stdinOnce",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "tty",
        "volumeDevices",
        "volumeMounts",
        "workingDir",
    )
    return tuple(f"{prefix}.{name}" for prefix in prefixes for name in fields)


# Upstream also lists each selector's matchExpressions/matchLabels below .spec.selector
# (labelSelectorForceNewProperties); a path under spec.selector matches spec.selector already.
_DEPLOYMENT = ("spec.selector",)
_STATEFUL_SET = (
    "spec.podManagementPolicy",
    "spec.revisionHistoryLimit",
    "spec.selector",
    "spec.serviceName",
    "spec.volumeClaimTemplates",
)
_JOB = ("spec.completions", "spec.parallelism", "spec.selector", "spec.template")
_ROLE_BINDING = ("roleRef",)
_CORE_V1: dict[str, tuple[str, ...]] = {
    "PersistentVolume": tuple(
        f"spec.{source}"
        for source in (
            "awsElasticBlockStore",
            "azureDisk",
            "azureFile",
            "cephfs",
            "cinder",
            "csi",
            "fc",
            "flexVolume",
            "flocker",
            "gcePersistentDisk",
            "glusterfs",
            "hostPath",
            "iscsi",
            "local",
            "nfs",
            "photonPersistentDisk",
            "portworxVolume",
            "quobyte",
            "rbd",
            "scaleIO",
            "storageos",
            "vsphereVolume",
        )
    ),
    "PersistentVolumeClaim": ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
    "Pod": (
        "spec.affinity",
        "spec.automountServiceAccountToken",
        "spec.dnsConfig",
        "spec.dnsPolicy",
        "spec.enableServiceLinks",
        "spec.hostAliases",
        "spec.hostIPC",
        "spec.hostNetwork",
        "spec.hostPID",
        "spec.hostname",
        "spec.imagePullSecrets",
        "spec.nodeName",
        "spec.nodeSelector",
        "spec.overhead",
        "spec.preemptionPolicy",
        "spec.priority",
        "spec.priorityClassName",
        "spec.readinessGates",
        "spec.restartPolicy",
        "spec.runtimeClassName",
        "spec.schedulerName",
        "spec.securityContext",
        "spec.serviceAccount",
        "spec.serviceAccountName",
        "spec.shareProcessNamespace",
        "spec.subdomain",
        "spec.terminationGracePeriodSeconds",
        "spec.volumes",
        *_containers("spec.containers[*]", "spec.initContainers[*]"),
    ),
    "ResourceQuota": ("spec.scopes",),
    "Secret": ("type",),
    "Service": ("spec.clusterIP",),
}
K8S_FORCE_NEW: dict[str, dict[str, tuple[str, ...]]] = {
    "apps/v1beta1": {"StatefulSet": _STATEFUL_SET},
    "apps/v1beta2": {"DaemonSet": _DEPLOYMENT, "Deployment": _DEPLOYMENT, "StatefulSet": _STATEFUL_SET},
    "apps/v1": {"DaemonSet": _DEPLOYMENT, "Deployment": _DEPLOYMENT, "StatefulSet": _STATEFUL_SET},
    "v1": _CORE_V1,
    "core/v1": _CORE_V1,
    "policy/v1beta1": {"PodDisruptionBudget": ("spec",)},
    **{
        f"rbac.authorization.k8s.io/{version}": {"ClusterRoleBinding": _ROLE_BINDING, "RoleBinding": _ROLE_BINDING}
        for version in ("v1alpha1", "v1beta1", "v1")
    },
    "storage.k8s.io/v1": {"StorageClass": ("parameters", "provisioner")},
    **{f"batch/{version}": {"Job": _JOB} for version in ("v1beta1", "v1", "v2alpha1")},
}
"""apiVersion -> kind -> input paths whose change makes pulumi-kubernetes replace the object (besides
``metadata.name`` and ``metadata.namespace``): ``forceNew`` in pulumi/pulumi-kubernetes
``provider/pkg/provider/diff.go`` at tag v4.32.0 (the file is unchanged since Feb 2026, commit eaf47e8; gpucell
pins 4.34.2, which the stored upstream snapshot does not hold). Keyed by group and version as upstream is: a
``policy/v1`` PodDisruptionBudget or a custom resource named ``Job`` forces nothing. Secrets and ConfigMaps:
:func:`force_new`."""

_SECRET_FORCE_NEW = ("type", "stringData", "data")
_CONFIG_MAP_FORCE_NEW = ("binaryData", "data")


def force_new(api_version: str, kind: str, *, patch: bool = False) -> tuple[str, ...]:
    """The input paths whose change replaces a Kubernetes object of ``api_version``/``kind``, as pulumi-kubernetes
    decides (``forceNewProperties`` in ``provider/pkg/provider/diff.go`` and its caller in ``provider.go``).

    Always ``metadata.name`` and ``metadata.namespace``; nothing else for a ``*Patch`` resource (server-side-apply
    patches update everything else in place). A core Secret: ``type``, ``stringData``, ``data``, and a core
    ConfigMap ``binaryData``, ``data``, because gpucell's providers keep ``enableSecretMutable`` and
    ``enableConfigMapMutable`` off. Otherwise :data:`K8S_FORCE_NEW`.
    """
    identity = ("metadata.name", "metadata.namespace")
    if patch:
        return identity
    kinds = K8S_FORCE_NEW.get(api_version)
    if kinds is None:
        return identity
    if kind == "Secret" and kinds is _CORE_V1:
        return (*identity, *_SECRET_FORCE_NEW)
    if kind == "ConfigMap" and kinds is _CORE_V1:
        return (*identity, *_CONFIG_MAP_FORCE_NEW)
    return (*identity, *kinds.get(kind, ()))


K8S_IMMUTABLE: dict[str, tuple[tuple[str, str], ...]] = {
    "VirtualMachine": (
        (
            "spec.dataVolumeTemplates[*].spec.source",
            "not applied to an existing disk: KubeVirt creates a VM's DataVolume from its template only when it is "
            "missing",
        ),
        (
            "spec.dataVolumeTemplates[*].spec.storage.storageClassName",
            "not applied to an existing disk: KubeVirt creates a VM's DataVolume from its template only when it is "
            "missing",
        ),
    ),
    "DataVolume": (("spec", "refused by CDI's webhook: a DataVolume's spec cannot be updated"),),
}
"""Kind -> (path, why) of changes the live object will not take although Pulumi updates it: KubeVirt
``pkg/virt-controller/watch/vm/vm.go`` (``handleDataVolumes`` creates missing DataVolumes only), CDI
``pkg/apiserver/webhooks/datavolume-validate.go`` ("Cannot update DataVolume Spec")."""

_RESTART_WHY = (
    "takes effect when the VM restarts: KubeVirt leaves the running VM as it is and marks it RestartRequired "
    "(kubevirt v1.9.0 pkg/virt-controller/watch/vm/vm.go); gpucell never restarts it: `virtctl restart`"
)
K8S_RESTART: dict[str, tuple[tuple[str, str], ...]] = {
    "VirtualMachine": (
        (
            "spec.instancetype",
            "the VM captures the new instancetype (a ControllerRevision) and runs with its size from its next "
            "restart, when KubeVirt marks it RestartRequired; gpucell never restarts it: `virtctl restart`",
        ),
        ("spec.preference", _RESTART_WHY),
        ("spec.template.spec.domain", _RESTART_WHY),
        ("spec.template.spec.volumes", _RESTART_WHY),
    ),
}
"""Kind -> (path, why) of changes a running VM takes only when it restarts (KubeVirt's ``RestartRequired``
condition): its size, firmware, devices, volumes. ``gpucell diff`` marks them so a reviewer knows which tenants must
restart a VM for the change to reach it."""
REVISIONED_KINDS = (
    "VirtualMachineClusterInstancetype",
    "VirtualMachineInstancetype",
    "VirtualMachineClusterPreference",
    "VirtualMachinePreference",
)
"""Kinds a VM keeps a copy of (a ControllerRevision captured when it first starts, kubevirt v1.9.0
``pkg/instancetype/revision/store.go``): a change reaches only VMs that name it afterwards."""
_REVISION_NOTE = (
    "not applied to existing VMs: each keeps the ControllerRevision it captured (kubevirt v1.9.0 "
    "pkg/instancetype/revision/store.go); VMs created later get it. Give a new size a new name and move VMs to it"
)
_CLOUD_INIT_NOTE = (
    "cloud-init applies user data once per instance, and a VM's NoCloud instance-id (its firmware UUID) stays the "
    "same across restarts (kubevirt v1.9.0 pkg/cloud-init/cloud-init.go): an existing VM keeps what its first boot "
    "applied (only per-boot parts such as bootcmd run again at a restart); new VMs get it"
)

UNIT_CHANGE_NOTE = (
    "an isolated notebook's or endpoint's unit changed (its image, arguments or environment; the unit disk's serial "
    "is the unit's digest): the guest installs the new unit from its unit disk at its next boot, and KubeVirt marks "
    "the running VM RestartRequired; until `virtctl restart <vm> -n <namespace>` (the tenant's or the operator's) the "
    "old image keeps running, and the restart takes the workload down until the guest has booted and pulled the new "
    "image (a notebook's home disk is kept; docs/decisions/0040)"
)
"""What ``gpucell diff`` says of an isolated workload whose unit changed (:mod:`gpucell.workloads.isolated`)."""

_PREDICTOR_SCALING = tuple(
    f"spec.predictor.{key}"
    for key in ("minReplicas", "maxReplicas", "scaleMetric", "scaleMetricType", "scaleTarget", "autoScaling")
)
ROLLOUTS: dict[str, tuple[tuple[str, tuple[str, ...], str], ...]] = {
    "InferenceService": (
        (
            "spec.predictor",
            _PREDICTOR_SCALING,
            "KServe rolls the predictor's Deployment: each replica is replaced in turn (GPU endpoints take no surge "
            "replica, so one fewer serves meanwhile; with one replica the endpoint is down until the new one is "
            "ready)",
        ),
    ),
    "StatefulSet": (("spec.template", (), "restarts the notebook's pod (its home volume is kept)"),),
    "VirtualMachine": (
        (
            "spec.template.spec.priorityClassName",
            (),
            "reaches the running VM at its next restart (KubeVirt marks it RestartRequired)",
        ),
        (
            "spec.template.spec.domain.devices.disks[*].serial",
            (),
            UNIT_CHANGE_NOTE,
        ),
    ),
    "Schedule": (
        ("spec.template.ttl", (), "applies to backups taken from now on; existing backups keep their expiry"),
        ("spec.schedule", (), "the next backup follows the new schedule; existing backups are kept"),
    ),
}
"""Kind -> (path, paths under it that do not count, what the change does to running workloads) of in-place updates
worth a reviewer's note: KServe's raw-mode Deployment (v0.20.0 ``reconcilers/deployment``) rolls on a pod template
change but not on a scaling change (the HPA's or ScaledObject's); a StatefulSet rolls its pod; KubeVirt applies a
running VM's template at restart; Velero sets a Backup's ``ttl`` when it takes it."""

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_HEREDOC = re.compile(r'cat >"?[^"\n]*?([\w.-]+)"? <<\'(\w+)\'\n(.*?)^\2$', re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class InputChange:
    """One input path whose value differs; ``old`` or ``new`` is :data:`MISSING` where the path is absent."""

    path: str
    old: Any
    new: Any


@dataclass(frozen=True)
class TextDiff:
    """A unified diff of one text (a node's ``config.yaml``, its ``install.sh``, a multi-line input)."""

    name: str
    diff: str


@dataclass
class ResourceDiff:
    """What happens to one resource."""

    action: str
    """``create``, ``delete``, ``update`` or ``replace``."""
    urn: str
    type: str
    name: str
    region: str
    label: str
    """What a reviewer calls it: ``Namespace tenant-acme``, ``Helm release cilium``, ``node fra1-gpu-1``."""
    changes: list[InputChange] = field(default_factory=list)
    texts: list[TextDiff] = field(default_factory=list)
    replaced_by: list[str] = field(default_factory=list)
    """Why it is replaced (each a short phrase)."""
    immutable: list[str] = field(default_factory=list)
    """Changes the live object will not take (path: why)."""
    restart: list[str] = field(default_factory=list)
    """Changes a running VM takes only when it restarts, one per :data:`K8S_RESTART` path they are under (path:
    why); the changed paths themselves are in :attr:`changes`."""
    notes: list[str] = field(default_factory=list)
    protected: bool = False
    """Deleted or replaced while ``protect`` is set: ``pulumi up`` stops on it."""


@dataclass
class PlanDiff:
    """All resource changes between two plans, by region (regions in head order, then removed ones)."""

    regions: dict[str, list[ResourceDiff]]

    @property
    def changed(self) -> bool:
        """True when any resource changes."""
        return any(self.regions.values())


# -- reading a plan ------------------------------------------------------------------------------------------------
def index_plan(plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """URN -> resource of a plan JSON document, with each resource's ``region`` added (the ``RegionalCell`` above
    it; ``""`` for resources outside any cell)."""
    by_urn = {r["urn"]: dict(r) for r in plan.get("resources", [])}
    for resource in by_urn.values():
        resource["region"] = _region(resource, by_urn)
    return by_urn


def _region(resource: Mapping[str, Any], by_urn: Mapping[str, Mapping[str, Any]]) -> str:
    node: Mapping[str, Any] | None = resource
    while node is not None:
        if node.get("type") == REGION_TYPE:
            return str(node.get("name"))
        node = by_urn.get(str(node.get("parent") or ""))
    return ""


def unwrap_script(value: Any) -> str | None:
    """The script of a ``bash -c '<script>'`` command line (how gpucell runs scripts over SSH), else ``None``."""
    if not isinstance(value, str) or not value.startswith("bash -c "):
        return None
    try:
        words = shlex.split(value)
    except ValueError:
        return None
    return words[2] if len(words) == 3 and words[:2] == ["bash", "-c"] else None


def _kind(resource: Mapping[str, Any]) -> str | None:
    inputs = resource.get("inputs") or {}
    kind = inputs.get("kind") if resource.get("type", "").startswith("kubernetes:") else None
    return kind if isinstance(kind, str) else None


def _node_files(resource: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """(node name, {file name: text}) of a node command: its install script with each quoted heredoc taken out
    as its own file (``config.yaml``), and its uninstall script."""
    inputs = resource.get("inputs") or {}
    files: dict[str, str] = {}
    node = None
    install = unwrap_script(inputs.get("create"))
    if install is not None:
        for match in _HEREDOC.finditer(install):
            files[match.group(1)] = match.group(3)
            found = re.search(r"^node-name:\s*(\S+)", match.group(3), re.MULTILINE)
            node = node or (found.group(1) if found else None)
        files["install.sh"] = _HEREDOC.sub(lambda m: f"# ... {m.group(1)} (shown on its own) ...\n", install)
    update = unwrap_script(inputs.get("update"))
    if update is not None and update != install:
        files["update.sh"] = update
    delete = unwrap_script(inputs.get("delete"))
    if delete is not None:
        files["uninstall.sh" if install is not None else "delete.sh"] = delete
    if node is None:  # not a node's install command (a maintenance step, the kubeconfig read): plain step names
        files = {{"install.sh": "create.sh", "uninstall.sh": "delete.sh"}.get(k, k): v for k, v in files.items()}
    return node, files


def _node_ip(resource: Mapping[str, Any]) -> str | None:
    _, files = _node_files(resource)
    found = re.search(r"^node-ip:\s*(\S+)", files.get("config.yaml", ""), re.MULTILINE)
    return found.group(1) if found else None


def label(resource: Mapping[str, Any]) -> str:
    """A reviewer's name for a resource."""
    inputs = resource.get("inputs") or {}
    kind = _kind(resource)
    rtype = str(resource.get("type", ""))
    if kind is not None:
        meta = inputs.get("metadata") or {}
        where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
        patch = " (patch)" if rtype.endswith("Patch") else ""
        return f"{kind} {where or resource.get('name')}{patch}"
    if rtype == RELEASE_TYPE:
        return f"Helm release {inputs.get('name', resource.get('name'))} ({inputs.get('namespace', '')})"
    if rtype == COMMAND_TYPE:
        node, _ = _node_files(resource)
        return f"node {node}" if node else f"command {resource.get('name')}"
    if rtype == "kubernetes:yaml/v2:ConfigFile":
        return f"manifest {inputs.get('file', resource.get('name'))}"
    if rtype.startswith("pulumi:providers:"):
        return f"provider {resource.get('name')} ({rtype.rsplit(':', 1)[-1]})"
    return f"{rtype.rsplit(':', 1)[-1]} {resource.get('name')}"


# -- comparing values --------------------------------------------------------------------------------------------
def _join(path: str, key: str) -> str:
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _item_name(item: Any) -> str | None:
    """A list item's ``name``, or its ``metadata.name`` (templates of Kubernetes objects)."""
    if not isinstance(item, Mapping):
        return None
    name = item.get("name")
    if name is None and isinstance(item.get("metadata"), Mapping):
        name = item["metadata"].get("name")
    return name if isinstance(name, str) else None


def _named(items: list[Any]) -> dict[str, Any] | None:
    """Items keyed by their name when every item is a map with a distinct string ``name`` (or ``metadata.name``)."""
    names = [_item_name(i) for i in items]
    if not items or any(n is None for n in names) or len(set(names)) != len(names):
        return None
    return {str(n): i for n, i in zip(names, items, strict=True)}


def diff_values(old: Any, new: Any, path: str = "") -> list[InputChange]:
    """Leaf-level differences between ``old`` and ``new``: maps key by key, lists of named maps by ``name`` or
    ``metadata.name`` (``containers[name=kserve]``), other lists index by index when their lengths agree and whole
    otherwise."""
    if old == new:
        return []
    if old is MISSING and isinstance(new, Mapping) and new:
        old = {}
    if new is MISSING and isinstance(old, Mapping) and old:
        new = {}
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[InputChange] = []
        for key in sorted(set(old) | set(new), key=str):
            out += diff_values(old.get(key, MISSING), new.get(key, MISSING), _join(path, str(key)))
        return out
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            out = []
            for name in [*old_named, *(n for n in new_named if n not in old_named)]:
                out += diff_values(old_named.get(name, MISSING), new_named.get(name, MISSING), f"{path}[name={name}]")
            return out
        if len(old) == len(new):
            return [c for i, (a, b) in enumerate(zip(old, new, strict=True)) for c in diff_values(a, b, f"{path}[{i}]")]
    return [InputChange(path, old, new)]


def _pattern(path: str) -> re.Pattern[str]:
    """A regex matching ``path`` (``[*]`` = any list item) and everything below it."""
    escaped = re.escape(path).replace(r"\[\*\]", r"\[[^\]]*\]")
    return re.compile(rf"^{escaped}(?=$|[.\[])")


def _under(path: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if _pattern(p).match(path)), None)


# -- one resource ------------------------------------------------------------------------------------------------
def _split_texts(changes: list[InputChange]) -> tuple[list[InputChange], list[TextDiff]]:
    """Multi-line strings become unified diffs; every other change stays a value change."""
    kept: list[InputChange] = []
    texts: list[TextDiff] = []
    for change in changes:
        old, new = change.old, change.new
        multiline = any(isinstance(v, str) and "\n" in v for v in (old, new))
        if multiline and SECRET not in (old, new):
            texts.append(
                TextDiff(
                    change.path,
                    unified(old if isinstance(old, str) else "", new if isinstance(new, str) else "", change.path),
                )
            )
        else:
            kept.append(change)
    return kept, texts


def unified(old: str, new: str, name: str) -> str:
    """A unified diff of two texts, labelled ``a/<name>`` and ``b/<name>``, three lines of context."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _command_texts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[TextDiff]:
    node, old_files = _node_files(old)
    new_node, new_files = _node_files(new)
    prefix = f"nodes/{new_node or node}/" if (new_node or node) else f"commands/{new.get('name') or old.get('name')}/"
    return [
        TextDiff(f"{prefix}{name}", unified(old_files.get(name, ""), new_files.get(name, ""), f"{prefix}{name}"))
        for name in [*new_files, *(n for n in old_files if n not in new_files)]
        if old_files.get(name) != new_files.get(name)
    ]


def _secret_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[InputChange]:
    """Secret inputs whose digests (the plans' ``secrets``) differ: both sides show ``[secret]`` there, so
    :func:`diff_values` sees no change. Plans written before digests existed have none: their secrets count as
    unchanged."""
    before, after = old.get("secrets") or {}, new.get("secrets") or {}
    return [
        InputChange(path, SECRET, SECRET_CHANGED)
        for path, digest in sorted(after.items())
        if path in before and before[path] != digest
    ]


def _compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> ResourceDiff | None:
    """The update or replacement of one resource present in both plans, or ``None`` when nothing changes.

    Changes under the new side's ``ignoreChanges`` are left out of the update, with a note: Pulumi keeps the
    deployed value there."""
    changes = diff_values(old.get("inputs") or {}, new.get("inputs") or {}) + _secret_changes(old, new)
    ignore = tuple((new.get("options") or {}).get("ignoreChanges", []))
    ignored = [c for c in changes if _under(c.path, ignore)]
    changes = [c for c in changes if not _under(c.path, ignore)]
    option_changes = diff_values(old.get("options") or {}, new.get("options") or {}, "options")
    if not changes and not option_changes:
        return None
    result = ResourceDiff("update", new["urn"], new["type"], new["name"], new.get("region", ""), label(new))
    if ignored:
        result.notes.append("not applied, in `ignoreChanges`: " + ", ".join(f"`{c.path}`" for c in ignored))
    if new["type"] == COMMAND_TYPE and any(unwrap_script(v) is not None for v in (new.get("inputs") or {}).values()):
        scripts = {"create", "update", "delete"}
        result.texts = _command_texts(old, new)
        changes = [c for c in changes if c.path not in scripts]
    changes, texts = _split_texts(changes)
    result.changes = changes + option_changes
    result.texts += texts
    _replacements(old, new, result)
    if result.action == "update":
        result.notes += _rollout_notes(_kind(new), [c.path for c in changes])
    return result


def _rollout_notes(kind: str | None, paths: list[str]) -> list[str]:
    """The :data:`ROLLOUTS` notes of ``kind`` whose path one of ``paths`` is under (its exclusions aside)."""
    return [
        note
        for prefix, excluded, note in ROLLOUTS.get(kind or "", ())
        if any(_pattern(prefix).match(p) and not _under(p, excluded) for p in paths)
    ]


def _replacements(old: Mapping[str, Any], new: Mapping[str, Any], result: ResourceDiff) -> None:
    paths = [c.path for c in result.changes] + [t.name for t in result.texts]
    kind, rtype = _kind(new), str(new.get("type"))
    force: tuple[str, ...] = ()
    if kind is not None:
        force = force_new(str((new.get("inputs") or {}).get("apiVersion", "")), kind, patch=rtype.endswith("Patch"))
    elif rtype == RELEASE_TYPE:
        force = ("name", "namespace")
    elif rtype.startswith("pulumi:providers:kubernetes"):
        force = ("clusterIdentifier",)
    replace_on = tuple((new.get("options") or {}).get("replaceOnChanges", []))
    for path in paths:
        hit = _under(path, force) or _under(path, replace_on)
        if hit is not None:
            result.replaced_by.append(f"`{path}` changed ({hit} cannot change in place)")
        for prefix, why in K8S_IMMUTABLE.get(kind or "", ()):
            if _pattern(prefix).match(path):
                result.immutable.append(f"`{path}`: {why}")
    _vm_effects(kind, paths, result)
    if result.replaced_by:
        result.action = "replace"
        if kind is not None:
            result.notes.append(_replacement_order(old, new))
        if rtype.startswith("pulumi:providers:kubernetes"):
            result.notes.append("a new provider replaces every Kubernetes resource of the cell that uses it")
        result.protected = bool((old.get("options") or {}).get("protect"))


def _vm_effects(kind: str | None, paths: list[str], result: ResourceDiff) -> None:
    """What a change means for running VMs: one :attr:`ResourceDiff.restart` entry per :data:`K8S_RESTART` path the
    changes fall under, and a note on a changed instancetype or preference (:data:`REVISIONED_KINDS`)."""
    for prefix, why in K8S_RESTART.get(kind or "", ()):
        if any(_pattern(prefix).match(path) for path in paths):
            result.restart.append(f"`{prefix}`: {why}")
    if kind in REVISIONED_KINDS and any(p.startswith("spec") for p in paths):
        result.notes.append(_REVISION_NOTE)


def _replacement_order(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """How pulumi-kubernetes replaces a Kubernetes object: delete first only when the new one keeps the old one's
    name and namespace (``provider/pkg/provider/provider.go`` ``Diff``, ``deleteBeforeReplace``); a renamed object
    (a hashed template name) is created first and the old one deleted at the end of the run."""

    def identity(resource: Mapping[str, Any]) -> tuple[Any, Any]:
        meta = (resource.get("inputs") or {}).get("metadata") or {}
        return meta.get("name"), meta.get("namespace")

    if identity(old) == identity(new):
        return "deleted, then created again under the same name: it is gone in between"
    return "created under its new name first; the old object is deleted at the end of the run"


# -- the whole plan ----------------------------------------------------------------------------------------------
def _alias_urns(resource: Mapping[str, Any], stack: str, project: str, by_urn: Mapping[str, Any]) -> Iterator[str]:
    """The URNs the resource's ``aliases`` option names (URN strings, or specs with name/type/parent)."""
    for alias in (resource.get("options") or {}).get("aliases", []):
        if isinstance(alias, str):
            yield alias
            continue
        name = alias.get("name", resource["name"])
        rtype = alias.get("type", resource["type"])
        parent_urn = "" if alias.get("noParent") else alias.get("parentUrn", resource.get("parent") or "")
        parent = by_urn.get(parent_urn)
        chain = ""
        if parent is not None and parent.get("type") != "pulumi:pulumi:Stack":
            parent_chain = parent["urn"].split("::")[2]
            chain = f"{parent_chain}$"
        yield f"urn:pulumi:{alias.get('stack', stack)}::{alias.get('project', project)}::{chain}{rtype}::{name}"


def _created(resource: Mapping[str, Any]) -> ResourceDiff:
    result = ResourceDiff(
        "create", resource["urn"], resource["type"], resource["name"], resource.get("region", ""), label(resource)
    )
    if resource["type"] == COMMAND_TYPE:
        result.texts = [t for t in _command_texts({}, resource) if t.name.endswith("config.yaml")]
    if (resource.get("options") or {}).get("protect"):
        result.notes.append("protected (`protect`): deleting it later needs an explicit unprotect")
    return result


def _deleted(resource: Mapping[str, Any]) -> ResourceDiff:
    result = ResourceDiff(
        "delete", resource["urn"], resource["type"], resource["name"], resource.get("region", ""), label(resource)
    )
    options = resource.get("options") or {}
    if options.get("protect"):
        result.protected = True
    script = unwrap_script((resource.get("inputs") or {}).get("delete")) if resource["type"] == COMMAND_TYPE else None
    if script is not None:
        result.notes.append(_delete_script_note(script, retained=bool(options.get("retainOnDelete"))))
    elif options.get("retainOnDelete"):
        result.notes.append("`retainOnDelete`: Pulumi forgets it, the object stays in the cluster")
    return result


def _delete_script_note(script: str, *, retained: bool) -> str:
    """What deleting a command with a delete script really does (issue 30: a forgotten or retained host's rows said
    the k3s uninstall runs): the script's own title (its second line, ``# gpucell: uninstall k3s from <node>``,
    ``drain <node> before removing it``, ``delete node <node> from the cell``), or that it does not run."""
    lines = script.splitlines()
    title = lines[1].removeprefix("# gpucell: ") if len(lines) > 1 and lines[1].startswith("# gpucell: ") else ""
    if retained:
        kept = ": k3s stays installed on the host" if title.startswith("uninstall ") else ""
        return f"`retainOnDelete`: Pulumi forgets it; its delete script does not run{kept}"
    return f"runs its delete script: {title}" if title else "runs its delete script"


def _pair_nodes(created: dict[str, dict[str, Any]], deleted: dict[str, dict[str, Any]]) -> list[ResourceDiff]:
    """Node commands deleted and created for the same ``node-ip``: the node's identity (its name) changes."""
    pairs: list[ResourceDiff] = []
    by_ip = {ip: urn for urn, r in created.items() if r["type"] == COMMAND_TYPE and (ip := _node_ip(r))}
    for urn, old in list(deleted.items()):
        ip = _node_ip(old) if old["type"] == COMMAND_TYPE else None
        new_urn = by_ip.get(ip) if ip else None
        if new_urn is None or new_urn not in created:
            continue
        new = created.pop(new_urn)
        del deleted[urn]
        old_node, _ = _node_files(old)
        new_node, _ = _node_files(new)
        result = ResourceDiff("replace", new["urn"], new["type"], new["name"], new.get("region", ""), label(new))
        result.replaced_by.append(f"node identity: `node-name` {old_node} → {new_node} on {ip}")
        result.notes.append(_rename_note(new, str(old_node), str(new_node)))
        result.texts = _command_texts(old, new)
        result.protected = bool((old.get("options") or {}).get("protect"))
        pairs.append(result)
    return pairs


def _rename_note(new: Mapping[str, Any], old_node: str, new_node: str) -> str:
    """What ``pulumi up`` does to a host renamed at the same address: it runs the new name's install first and the
    old name's delete last (:func:`gpucell.k3s._scripts.install_script` and ``uninstall_script``)."""
    install = unwrap_script((new.get("inputs") or {}).get("create")) or ""
    if re.search(r"^readonly K3S_EXEC=server$", install, re.MULTILINE):
        return (
            f"a server cannot be renamed in place: its install stops `pulumi up` before anything changes; remove "
            f"{old_node} in one `pulumi up` and add {new_node} in the next"
        )
    return (
        f"k3s joins again as {new_node} first; then {old_node}'s delete keeps k3s on the host (it now runs as "
        f"{new_node}) and deletes the Node {old_node}"
    )


def diff_plans(base: Mapping[str, Any], head: Mapping[str, Any]) -> PlanDiff:
    """Every resource change from plan ``base`` to plan ``head`` (two ``gpucell plan --json`` documents).

    Component resources (``gpucell:index:*``) carry no inputs and are left out; their children show what changes.
    """
    old, new = index_plan(base), index_plan(head)
    stack = str(head.get("stack") or base.get("stack") or "")
    project = next((urn.split("::")[1] for urn in [*new, *old]), "gpucell")
    renamed: dict[str, str] = {}
    for urn, resource in new.items():
        if urn not in old:
            alias = next((a for a in _alias_urns(resource, stack, project, new) if a in old and a not in new), None)
            if alias is not None:
                renamed[urn] = alias
    cloud_init = {("Secret", key) for vm in new.values() for key in _cloud_init_secrets(vm)}
    created = {u: r for u, r in new.items() if u not in old and u not in renamed and _diffable(r)}
    deleted = {u: r for u, r in old.items() if u not in new and u not in renamed.values() and _diffable(r)}
    diffs: list[ResourceDiff] = _pair_nodes(created, deleted)
    for urn, resource in new.items():
        if not _diffable(resource) or urn in created:
            continue
        before = old.get(renamed.get(urn, urn))
        if before is None:
            continue
        found = _compare(before, resource)
        if urn in renamed:
            found = found or ResourceDiff(
                "update", urn, resource["type"], resource["name"], resource.get("region", ""), label(resource)
            )
            found.notes.append(f"moved from `{renamed[urn]}` (alias: no replacement)")
        if found is not None:
            if (_kind(resource), _object_key(resource)) in cloud_init:
                found.notes.append(_CLOUD_INIT_NOTE)
            diffs.append(found)
    diffs += [_created(r) for r in created.values()] + [_deleted(r) for r in deleted.values()]
    regions: dict[str, list[ResourceDiff]] = {}
    for region in dict.fromkeys([*(r["region"] for r in new.values()), *(r["region"] for r in old.values())]):
        regions[region] = sorted((d for d in diffs if d.region == region), key=lambda d: (d.label, d.urn))
    return PlanDiff(regions={k: v for k, v in regions.items() if v or k})


def _object_key(resource: Mapping[str, Any]) -> tuple[str, str]:
    meta = (resource.get("inputs") or {}).get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def _cloud_init_secrets(resource: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(namespace, name)`` of the Secrets a VirtualMachine's ``cloudInitNoCloud`` volumes read."""
    if _kind(resource) != "VirtualMachine":
        return []
    namespace = _object_key(resource)[0]
    template = (((resource.get("inputs") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    found = []
    for volume in template.get("volumes") or []:
        source = volume.get("cloudInitNoCloud") or {}
        for key in ("secretRef", "networkDataSecretRef"):
            name = (source.get(key) or {}).get("name")
            if name:
                found.append((namespace, str(name)))
    return found


def _diffable(resource: Mapping[str, Any]) -> bool:
    return not str(resource.get("type", "")).startswith(COMPONENT_PREFIX)
