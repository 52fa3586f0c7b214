"""The admission-webhook rules gpucell's rendered objects rely on, as checked facts (issue 34 item 2).

Each rule is a small function transcribed from the upstream webhook at the pinned tag (the docstring cites file and
lines) that returns the upstream refusal messages for one object. Each test walks every relevant object of the prod
plan (tenants' workloads, the tenant cluster's Cluster API objects, the VMs its KubevirtMachineTemplates create, the
DataVolumes that VMs' ``dataVolumeTemplates`` and DataImportCrons create) and asserts there is at least one and
that none is refused; :func:`test_each_rule_refuses_what_upstream_refuses` shows that each rule can fail.

Pinned tags: KServe v0.20.0, Cluster API v1.14.0, KubeVirt v1.9.0, CDI v1.66.0 (``gpucell.releases``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ProdPlans

Rule = Callable[[dict[str, Any]], list[str]]


# -- the prod plan's objects --------------------------------------------------------------------------------------
@functools.cache
def prod_objects() -> tuple[dict[str, Any], ...]:
    """Every Kubernetes object the prod plans register, fra1's then iad1's (patches left out: a webhook sees the
    patched object)."""
    return tuple(
        r.masked_inputs()
        for r in ProdPlans().resources()
        if r.type.startswith("kubernetes:")
        and not r.type.endswith("Patch")
        and "apiVersion" in r.inputs
        and "kind" in r.inputs
    )


def objects(group: str, kind: str) -> list[dict[str, Any]]:
    """The prod plan's objects of API group ``group`` (``""`` for core) and ``kind``."""
    found = [
        o
        for o in prod_objects()
        if o["kind"] == kind and (o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else "") == group
    ]
    assert found, f"the prod plan renders no {group}/{kind}: the rule below would check nothing"
    return found


def name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"


def refusals(rule: Rule, items: list[dict[str, Any]]) -> list[str]:
    return [f"{name(o)}: {message}" for o in items for message in rule(o)]


def dig(node: Any, *path: str) -> Any:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "m": 10**-3,
    "": 1,
}


def quantity(value: Any) -> float:
    """A Kubernetes quantity (``"64Gi"``, ``"500m"``, ``8``) as a number; 0 when absent."""
    if value is None:
        return 0
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(value))
    assert match, f"not a quantity: {value!r}"
    assert match.group(2) in _SUFFIXES, f"not a quantity: {value!r}"
    return float(match.group(1)) * _SUFFIXES[match.group(2)]


# -- KServe v0.20.0: pkg/apis/serving/v1beta1/inference_service_validation.go (V) and component.go (C) ------------
_ISVC_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PREDICTOR_IMPLEMENTATIONS = (
    "xgboost",
    "pytorch",
    "triton",
    "sklearn",
    "tensorflow",
    "onnx",
    "pmml",
    "lightgbm",
    "paddle",
    "huggingface",
    "model",
)


def predictor(isvc: dict[str, Any]) -> dict[str, Any]:
    return dig(isvc, "spec", "predictor") or {}


def kserve_name(isvc: dict[str, Any]) -> list[str]:
    """V:46,55 ``IsvcNameFmt`` and V:469-474 ``validateInferenceServiceName``."""
    value = isvc["metadata"]["name"]
    return [] if _ISVC_NAME.match(value) else [f"the InferenceService {value!r} is invalid: name format"]


def kserve_autoscaler_class(isvc: dict[str, Any]) -> list[str]:
    """V:477-491 ``validateInferenceServiceAutoscaler`` against pkg/constants/constants.go:277-282
    ``AutoscalerAllowedClassList`` (hpa, external, keda, none; ``kpa`` is not in it)."""
    value = (isvc["metadata"].get("annotations") or {}).get("serving.kserve.io/autoscalerClass")
    if value is None or value in ("hpa", "external", "keda", "none"):
        return []
    return [f"[{value}] is not a supported autoscaler class type"]


def kserve_one_implementation(isvc: dict[str, Any]) -> list[str]:
    """C:415-420 ``validateExactlyOneImplementation`` with predictor.go:168-196 ``GetImplementations`` (the
    framework fields, ``model``, and a custom container), called from V:157-164; and V:296-297: no ``name`` in the
    ``model`` implementation."""
    spec = predictor(isvc)
    count = sum(1 for key in _PREDICTOR_IMPLEMENTATIONS if spec.get(key) is not None) + bool(spec.get("containers"))
    problems = [] if count == 1 else ["exactly one of [...] must be specified in PredictorSpec"]
    if any((spec.get(key) or {}).get("name") for key in _PREDICTOR_IMPLEMENTATIONS):
        problems.append("the 'name' field is not allowed in standard predictor")
    return problems


def kserve_replicas(isvc: dict[str, Any]) -> list[str]:
    """C:374-388 ``validateReplicas`` (``minReplicas`` defaults to 1, pkg/constants/constants.go:223)."""
    spec = predictor(isvc)
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas", 0)
    problems = []
    if low < 0:
        problems.append("'MinReplicas' cannot be less than 0")
    if high < 0:
        problems.append("'MaxReplicas' cannot be less than 0")
    if low > high and high != 0:
        problems.append("'MinReplicas' cannot be greater than MaxReplicas")
    return problems


def _autoscaler(isvc: dict[str, Any]) -> tuple[str, str]:
    annotations = isvc["metadata"].get("annotations") or {}
    return annotations.get("serving.kserve.io/deploymentMode", ""), annotations.get(
        "serving.kserve.io/autoscalerClass", ""
    )


def kserve_hpa(isvc: dict[str, Any]) -> list[str]:
    """V:446-466 (Standard mode, class hpa) then V:527-565 ``validateScalingHPACompExtension``: ``scaleMetric`` in
    pkg/constants/constants.go:285-288 (cpu, memory), a cpu ``scaleTarget`` in [1, 100], and ``autoScaling``
    metrics of type Resource only."""
    mode, klass = _autoscaler(isvc)
    if mode != "Standard" or klass != "hpa":
        return []
    spec = predictor(isvc)
    metric, target = spec.get("scaleMetric", "cpu"), spec.get("scaleTarget")
    problems = [] if metric in ("cpu", "memory") else [f"[{metric}] is not a supported metric"]
    if target is not None and ((metric == "cpu" and target < 1) or target > 100):
        problems.append("the target utilization percentage should be a [1-100] integer")
    problems += [
        f"invalid HPA metric source type with value [{m.get('type')}],valid metric source types are Resource"
        for m in dig(spec, "autoScaling", "metrics") or []
        if m.get("type") != "Resource"
    ]
    return problems


def kserve_keda(isvc: dict[str, Any]) -> list[str]:
    """V:567-634 ``validateScalingKedaCompExtension`` (Standard mode, class keda): no ``scaleMetric`` (568-570); an
    External metric has a query (605-607) and a ``target.value`` (608-610, "the target threshold value should not be
    empty"); V:508-525 ``validateScaleTarget``: the field its ``type`` names is set."""
    mode, klass = _autoscaler(isvc)
    if mode != "Standard" or klass != "keda":
        return []
    spec = predictor(isvc)
    problems = ["ScaleMetric is not supported for KEDA"] if spec.get("scaleMetric") is not None else []
    for metric in dig(spec, "autoScaling", "metrics") or []:
        if metric.get("type") != "External":
            problems.append(f"gpucell renders External metrics only, not {metric.get('type')}")
            continue
        external = metric.get("external") or {}
        target = external.get("target") or {}
        if not dig(external, "metric", "query"):
            problems.append("the query should not be empty")
        if target.get("value") is None:
            problems.append("the target threshold value should not be empty")
        field = {"Utilization": "averageUtilization", "AverageValue": "averageValue", "Value": "value"}.get(
            target.get("type", "")
        )
        if field is not None and target.get(field) is None:
            problems.append(f"the {target['type']} type should be set")
    return problems


def kserve_deployment_strategy(isvc: dict[str, Any]) -> list[str]:
    """V:446-466 sends a non-Standard InferenceService to V:645-648 ``validateScalingKPACompExtension``, which
    refuses ``deploymentStrategy``: gpucell's strategy needs ``deploymentMode: Standard``."""
    mode, _ = _autoscaler(isvc)
    if predictor(isvc).get("deploymentStrategy") is not None and mode != "Standard":
        return ["customizing deploymentStrategy is only supported for raw deployment mode"]
    return []


def kserve_blocked_env(isvc: dict[str, Any]) -> list[str]:
    """V:302-315 ``validateBlockedEnvVars`` with pkg/validation/env_policy.go:25-27 (``PYTHONPATH``)."""
    spec = predictor(isvc)
    containers = [spec.get(key) or {} for key in _PREDICTOR_IMPLEMENTATIONS] + list(spec.get("containers") or [])
    return [
        f"setting PYTHONPATH in container {c.get('name', 'kserve-container')!r} is not allowed for security reasons"
        for c in containers
        for env in c.get("env") or []
        if env.get("name") == "PYTHONPATH"
    ]


# -- Cluster API v1.14.0 ------------------------------------------------------------------------------------------
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _version(value: str, path: str) -> list[str]:
    problems = [] if value.startswith("v") else [f"{path}: must start with v"]
    if not _SEMVER.match(value.removeprefix("v")):
        problems.append(f"{path}: must be a valid semantic version")
    return problems


def kcp_spec(kcp: dict[str, Any]) -> list[str]:
    """controlplane/kubeadm/webhooks/admission/kubeadmcontrolplane.go ``validateKubeadmControlPlaneSpec``:
    replicas > 0 (253-272) and odd with stacked etcd (274-285); ``machineTemplate.spec.infrastructureRef``
    apiGroup, kind and name set (287-316); version ``v`` + semver (323-328)."""
    spec = kcp["spec"]
    replicas = spec.get("replicas", 1)  # defaulted to 1 (Default, 68-71)
    problems = [] if replicas > 0 else ["spec.replicas: cannot be less than or equal to 0"]
    if dig(spec, "kubeadmConfigSpec", "clusterConfiguration", "etcd", "external") is None and replicas % 2 == 0:
        problems.append("spec.replicas: cannot be an even number when etcd is stacked")
    ref = dig(spec, "machineTemplate", "spec", "infrastructureRef") or {}
    problems += [
        f"spec.machineTemplate.infrastructure.{key}: cannot be empty"
        for key in ("apiGroup", "kind", "name")
        if not ref.get(key)
    ]
    return problems + _version(spec.get("version", ""), "spec.version")


def kcp_rollout(kcp: dict[str, Any]) -> list[str]:
    """kubeadmcontrolplane.go ``validateRolloutAndCertValidityFields`` (335-410): only RollingUpdate (344-352);
    ``maxSurge: 0`` needs 3 replicas or more (357-365, a single control plane cannot scale in first); ``maxSurge`` 0
    or 1 (366-374). The webhook's ``Default`` (77-79) sets RollingUpdate and ``maxSurge: 1`` when absent."""
    spec = kcp["spec"]
    strategy = dig(spec, "rollout", "strategy") or {}
    if not strategy:
        return []
    problems = [] if strategy.get("type", "RollingUpdate") == "RollingUpdate" else ["only RollingUpdate is supported"]
    surge = dig(strategy, "rollingUpdate", "maxSurge")
    if surge == 0 and spec.get("replicas", 1) < 3:
        problems.append("when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3")
    if surge is not None and surge not in (0, 1):
        problems.append("spec.rollout.strategy.rollingUpdate.maxSurge: value must be 1 or 0")
    return problems


def machine_deployment(md: dict[str, Any]) -> list[str]:
    """core/webhooks/admission/machinedeployment.go ``validate`` (154-251): the name is a label value (156-168); a
    bootstrap ``configRef`` or ``dataSecretName`` (171-179); the selector matches the template's labels (181-195);
    ``spec.clusterName`` equals ``spec.template.spec.clusterName`` (215-224); ``validateRolloutStrategy``: maxSurge
    and maxUnavailable not both 0 (275-283); the template's version ``v`` + semver (229-236). The template's spec is
    each Machine's, so core/webhooks/admission/machine.go ``validate`` (98-125: bootstrap, version) holds with it."""
    spec = md["spec"]
    template = spec.get("template") or {}
    problems = (
        []
        if _LABEL_VALUE.match(md["metadata"]["name"]) and len(md["metadata"]["name"]) <= 63
        else ["metadata.name: must be a valid label value"]
    )
    bootstrap = dig(template, "spec", "bootstrap") or {}
    if not bootstrap.get("configRef") and bootstrap.get("dataSecretName") is None:
        problems.append("expected either spec.template.spec.bootstrap.dataSecretName or configRef to be populated")
    wanted = dig(spec, "selector", "matchLabels") or {}
    labels = dig(template, "metadata", "labels") or {}
    # the webhook's Default (126-128) adds cluster.x-k8s.io/cluster-name to both before validating
    labels = {**labels, "cluster.x-k8s.io/cluster-name": spec.get("clusterName")}
    if any(labels.get(key) != value for key, value in wanted.items()) or dig(spec, "selector", "matchExpressions"):
        problems.append("spec.template.metadata.labels: must match spec.selector")
    if spec.get("clusterName") != dig(template, "spec", "clusterName"):
        problems.append("spec.clusterName and spec.template.spec.clusterName must be set to the same value")
    rolling = dig(spec, "rollout", "strategy", "rollingUpdate") or {}
    if rolling.get("maxSurge", 1) == 0 and rolling.get("maxUnavailable", 0) == 0:  # defaults: Default, 111-117
        problems.append("spec.rollout.strategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0")
    version = dig(template, "spec", "version")
    return problems + ([] if not version else _version(version, "spec.template.spec.version"))


def machine_health_check(mhc: dict[str, Any]) -> list[str]:
    """core/webhooks/admission/machinehealthcheck.go ``validate`` (96-137): a non-empty selector (109-115) whose
    ``cluster.x-k8s.io/cluster-name`` is the MHC's cluster (117-121); ``nodeStartupTimeoutSeconds`` 0 or at least 30
    (139-150, constants 36-38)."""
    spec = mhc["spec"]
    selector = spec.get("selector") or {}
    problems = [] if selector.get("matchLabels") or selector.get("matchExpressions") else ["selector must not be empty"]
    cluster = (selector.get("matchLabels") or {}).get("cluster.x-k8s.io/cluster-name")
    if cluster is not None and cluster != spec.get("clusterName"):
        problems.append("cannot specify a cluster selector other than the one specified by ClusterName")
    timeout = dig(spec, "checks", "nodeStartupTimeoutSeconds")
    if timeout is not None and timeout != 0 and timeout < 30:
        problems.append("spec.checks.nodeStartupTimeoutSeconds: must be at least 30s")
    return problems


# -- KubeVirt v1.9.0: pkg/virt-api/webhooks/validating-webhook/admitters/vms-admitter.go (VM) and
#    vmi-create-admitter.go (VMI) ----------------------------------------------------------------------------------
def vm_specs() -> list[dict[str, Any]]:
    """Every VirtualMachine the prod plan creates: its own, and those CAPK creates from KubevirtMachineTemplates
    (``spec.template.spec.virtualMachineTemplate``, with the template's name)."""
    vms = objects("kubevirt.io", "VirtualMachine")
    machines = [
        {
            "kind": "VirtualMachine",
            "metadata": t["metadata"],
            "spec": dig(t, "spec", "template", "spec", "virtualMachineTemplate", "spec"),
        }
        for t in objects("infrastructure.cluster.x-k8s.io", "KubevirtMachineTemplate")
    ]
    return vms + machines


def instancetypes() -> dict[tuple[str, str, str], dict[str, Any]]:
    """``(kind, namespace, name)`` -> spec of each instancetype the prod plan renders."""
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o["spec"]
        for o in prod_objects()
        if o["kind"] in ("VirtualMachineInstancetype", "VirtualMachineClusterInstancetype")
    }


def vmi(vm: dict[str, Any]) -> dict[str, Any]:
    """The VM's template spec, as vms-admitter.go:112-119 validates it: with its instancetype applied (guest CPUs
    and memory, GPUs) when gpucell renders that instancetype."""
    spec = dig(vm, "spec", "template", "spec") or {}
    ref = dig(vm, "spec", "instancetype")
    if not ref:
        return spec
    kind = ref.get("kind", "VirtualMachineClusterInstancetype")
    namespace = "" if kind == "VirtualMachineClusterInstancetype" else vm["metadata"].get("namespace", "")
    found = instancetypes().get((kind, namespace, ref["name"]))
    if found is None:  # common-instancetypes' (u1.xlarge): sizes only, no devices
        return spec
    domain = dict(spec.get("domain") or {})
    domain["cpu"] = {**(domain.get("cpu") or {}), "cores": found["cpu"]["guest"]}
    domain["memory"] = {**(domain.get("memory") or {}), "guest": found["memory"]["guest"]}
    devices = dict(domain.get("devices") or {})
    devices["gpus"] = [*(devices.get("gpus") or []), *(found.get("gpus") or [])]
    domain["devices"] = devices
    return {**spec, "domain": domain}


def vm_run_strategy(vm: dict[str, Any]) -> list[str]:
    """VM:231-275 ``validateRunStrategy``: ``running`` and ``runStrategy`` are exclusive, one is needed, and the
    strategy is one of VM:53 ``validRunStrategies`` (Halted, Manual, Always, RerunOnFailure, Once)."""
    spec = vm["spec"]
    if "running" in spec and "runStrategy" in spec:
        return ["Running and RunStrategy are mutually exclusive"]
    if "running" not in spec and "runStrategy" not in spec:
        return ["RunStrategy must be specified"]
    value = spec.get("runStrategy")
    ok = value is None or value in ("Halted", "Manual", "Always", "RerunOnFailure", "Once")
    return [] if ok else [f"Invalid RunStrategy ({value})"]


def vmi_disks_and_volumes(vm: dict[str, Any]) -> list[str]:
    """VMI:288-317 every volume has a disk (or filesystem); VMI:613-634 every disk has a volume; VMI:1626-1637
    volume names are unique; VMI:671-682 (disks) and 352-372 (interfaces) boot orders are unique and > 0."""
    spec = vmi(vm)
    devices = dig(spec, "domain", "devices") or {}
    disks = {d["name"] for d in devices.get("disks") or []} | {f["name"] for f in devices.get("filesystems") or []}
    volumes = [v["name"] for v in spec.get("volumes") or []]
    problems = [f"volume {v!r} has no disk" for v in volumes if v not in disks]
    problems += [f"disk {d!r} has no volume" for d in disks if d not in volumes]
    problems += [f"volumes {v!r} must not have the same Name" for v in set(volumes) if volumes.count(v) > 1]
    orders = [
        x["bootOrder"] for x in [*(devices.get("disks") or []), *(devices.get("interfaces") or [])] if "bootOrder" in x
    ]
    if len(orders) != len(set(orders)) or any(o < 1 for o in orders):
        problems.append(f"boot orders {orders} must be unique and > 0")
    return problems


def _vcpus(cpu: dict[str, Any]) -> int:
    """pkg/util/hardware ``GetNumberOfVCPUs``: sockets x cores x threads, each defaulting to 1."""
    return cpu.get("sockets", 1) * cpu.get("cores", 1) * cpu.get("threads", 1) if cpu else 0


def vmi_dedicated_cpus(vm: dict[str, Any]) -> list[str]:
    """VMI:706-716 ``isolateEmulatorThread`` only with ``dedicatedCpuPlacement``; with it, VMI:718-732
    ``validateCpuPinning``: memory given (918-953), integral CPU requests/limits (894-916), memory requests equal
    limits (879-892), CPU requests equal limits (823-836) and equal the vCPU count when both are given (806-821),
    at most 2 threads (791-804)."""
    domain = dig(vmi(vm), "domain") or {}
    cpu = domain.get("cpu") or {}
    problems = []
    if cpu.get("isolateEmulatorThread") and not cpu.get("dedicatedCpuPlacement"):
        problems.append("IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement")
    if not cpu.get("dedicatedCpuPlacement"):
        return problems
    requests, limits = dig(domain, "resources", "requests") or {}, dig(domain, "resources", "limits") or {}
    memory = domain.get("memory") or {}
    if not (limits.get("memory") or requests.get("memory") or memory.get("hugepages") or memory.get("guest")):
        problems.append("memory requests, limits, hugepages or guest should be provided")
    for where, values in (("requests", requests), ("limits", limits)):
        if values.get("cpu") is not None and quantity(values["cpu"]) != int(quantity(values["cpu"])):
            problems.append(f"provided resources CPU {where} must be an interger")
    if requests.get("memory") and limits.get("memory") and quantity(requests["memory"]) != quantity(limits["memory"]):
        problems.append("resources.requests.memory must be equal to resources.limits.memory")
    req_cpu, lim_cpu, vcpus = quantity(requests.get("cpu")), quantity(limits.get("cpu")), _vcpus(cpu)
    if req_cpu and lim_cpu and req_cpu != lim_cpu:
        problems.append("resources.requests.cpu or resources.limits.cpu must be equal when DedicatedCPUPlacement")
    if (req_cpu or lim_cpu) and vcpus and vcpus not in (req_cpu, lim_cpu):
        problems.append(f"CPU requests {req_cpu} and limits {lim_cpu} differ from the {vcpus} vCPUs of domain.cpu")
    if cpu.get("threads", 1) > 2:
        problems.append("Not more than two threads must be provided when DedicatedCPUPlacement is true")
    return problems


def vmi_numa(vm: dict[str, Any]) -> list[str]:
    """VMI:734-767 ``validateNUMA``: ``guestMappingPassthrough`` needs ``dedicatedCpuPlacement`` and hugepages (and
    the NUMA gate, GA at v1.9.0: shared/upstream/kubevirt/feature-gates-v1.9.0.md)."""
    domain = dig(vmi(vm), "domain") or {}
    if dig(domain, "cpu", "numa", "guestMappingPassthrough") is None:
        return []
    problems = [] if dig(domain, "cpu", "dedicatedCpuPlacement") else ["dedicatedCpuPlacement must be set to true"]
    return problems + ([] if dig(domain, "memory", "hugepages") else ["hugepages must be requested"])


def vmi_memory(vm: dict[str, Any]) -> list[str]:
    """VMI:1049-1099 ``validateHugepagesMemoryRequests``: the VM's memory (requests, else guest, else limits) is at
    least one page and a multiple of it; VMI:1024-1047 guest memory at most the limit; VMI:1101-1144 requests at most
    limits and at least 1M; VMI:955-969 CPU requests at most limits."""
    domain = dig(vmi(vm), "domain") or {}
    requests, limits = dig(domain, "resources", "requests") or {}, dig(domain, "resources", "limits") or {}
    guest = quantity(dig(domain, "memory", "guest"))
    problems = []
    page = dig(domain, "memory", "hugepages", "pageSize")
    if page is not None:
        size = quantity(page)
        memory = quantity(requests.get("memory")) or guest or quantity(limits.get("memory"))
        if memory and memory < size:
            problems.append(f"memory {memory} must be equal to or larger than page size {page}")
        elif memory % size:
            problems.append(f"memory {memory} is not a multiple of the page size {page}")
    if guest and limits.get("memory") and quantity(limits["memory"]) < guest:
        problems.append("domain.memory.guest must be equal to or less than the memory limit")
    if limits.get("memory") and quantity(requests.get("memory")) > quantity(limits["memory"]):
        problems.append("resources.requests.memory is greater than resources.limits.memory")
    if requests.get("memory") and quantity(requests["memory"]) < 10**6:
        problems.append("resources.requests.memory must be greater than or equal to 1M")
    if limits.get("cpu") and quantity(requests.get("cpu")) > quantity(limits["cpu"]):
        problems.append("resources.requests.cpu is greater than resources.limits.cpu")
    return problems


def vmi_eviction_strategy(vm: dict[str, Any]) -> list[str]:
    """VMI:502-525 ``validateLiveMigration``: LiveMigrate, LiveMigrateIfPossible, None or External."""
    value = dig(vmi(vm), "evictionStrategy")
    ok = value in (None, "LiveMigrate", "LiveMigrateIfPossible", "None", "External")
    return [] if ok else [f"evictionStrategy is set with an unrecognized option: {value}"]


def kubevirt_config() -> dict[str, Any]:
    """The KubeVirt CR's ``spec.configuration`` (every region renders the same devices for these VMs)."""
    configs = [o["spec"].get("configuration") or {} for o in objects("kubevirt.io", "KubeVirt")]
    merged: dict[str, Any] = {"featureGates": set(), "permitted": set()}
    for config in configs:
        merged["featureGates"] |= set(dig(config, "developerConfiguration", "featureGates") or [])
        for group in ("pciHostDevices", "mediatedDevices", "usb"):
            merged["permitted"] |= {d["resourceName"] for d in dig(config, "permittedHostDevices", group) or []}
    return merged


def vmi_host_devices(vm: dict[str, Any]) -> list[str]:
    """VMI:553-563 ``validateHostDevicesWithPassthroughEnabled``: ``hostDevices`` need the HostDevices gate (Alpha at
    v1.9.0). And virt-controller's pkg/virt-controller/services/renderresources.go:493-533
    ``validatePermittedHostDevices`` (the launcher pod is not rendered otherwise): every ``gpus``/``hostDevices``
    ``deviceName`` not from a DRA claim is a ``permittedHostDevices`` resourceName."""
    devices = dig(vmi(vm), "domain", "devices") or {}
    config = kubevirt_config()
    problems = []
    if devices.get("hostDevices") is not None and "HostDevices" not in config["featureGates"]:
        problems.append("Host Devices feature gate is not enabled in kubevirt-config")
    for key, what in (("gpus", "GPU"), ("hostDevices", "HostDevice")):
        problems += [
            f"{what} {d['deviceName']} is not permitted in permittedHostDevices configuration"
            for d in devices.get(key) or []
            if d.get("deviceName") and d["deviceName"] not in config["permitted"]
        ]
    return problems


# -- CDI v1.66.0: pkg/apiserver/webhooks/datavolume-validate.go (DV), util.go (U), dataimportcron-validate.go --------
def data_volumes() -> list[dict[str, Any]]:
    """The DataVolumes the prod plan makes CDI admit: each VM's ``dataVolumeTemplates`` (virt-controller creates
    them; CAPK's VMs too) and each DataImportCron's template (validated as a DataVolume, dataimportcron-validate.go:
    114)."""
    found = [
        {"kind": "DataVolume", "metadata": t["metadata"], "spec": t["spec"]}
        for vm in vm_specs()
        for t in dig(vm, "spec", "dataVolumeTemplates") or []
    ]
    found += [
        {"kind": "DataVolume", "metadata": c["metadata"], "spec": c["spec"]["template"]["spec"]}
        for c in objects("cdi.kubevirt.io", "DataImportCron")
    ]
    return found


_SOURCES = ("http", "s3", "gcs", "registry", "pvc", "upload", "blank", "imageio", "vddk", "snapshot")


def data_volume(dv: dict[str, Any]) -> list[str]:
    """DV:65-234 ``validateDataVolumeSpec``: exactly one of ``pvc`` and ``storage`` (70-85); a size of at least 1MiB
    unless a clone under ``storage`` (352-397); PVC access modes (97-141); exactly one of ``source`` and
    ``sourceRef`` unless externally populated (143-156); a sourceRef of kind DataSource with a name (236-260);
    exactly one source type (U:34-57); a registry source with a docker:// or oci:// URL or an image stream
    (U:84-140)."""
    spec = dv["spec"]
    target = [key for key in ("pvc", "storage") if spec.get(key) is not None]
    if len(target) != 1:
        return ["Missing Data volume PVC" if not target else "Duplicate storage definition"]
    storage = spec[target[0]]
    problems = []
    size = dig(storage, "resources", "requests", "storage")
    clone = spec.get("sourceRef") is not None or any(k in (spec.get("source") or {}) for k in ("pvc", "snapshot"))
    if size is None and (target[0] == "pvc" or not clone):
        problems.append(f"{target[0]} size is missing")
    elif size is not None and quantity(size) < 2**20:
        problems.append(f"{target[0]} size should be at least 1MiB")
    modes = storage.get("accessModes") or []
    if any(m not in ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod") for m in modes) or (
        target[0] == "pvc" and len(modes) != 1
    ):
        problems.append(f"unsupported access modes {modes}")
    if storage.get("dataSource") or storage.get("dataSourceRef"):
        return problems
    if (spec.get("source") is None) == (spec.get("sourceRef") is None):
        return [*problems, "Data volume should have either Source or SourceRef, or be externally populated"]
    if spec.get("sourceRef") is not None:
        ref = spec["sourceRef"]
        if ref.get("kind") != "DataSource" or not ref.get("name"):
            problems.append(f"Unsupported sourceRef {ref}")
        return problems
    source = spec["source"]
    if len([k for k in _SOURCES if source.get(k) is not None]) != 1:
        problems.append("Missing or multiple Data volume sources")
    registry = source.get("registry")
    if registry is not None:
        url, stream = registry.get("url"), registry.get("imageStream")
        if (url is None) == (stream is None):
            problems.append("Source registry should have either URL or ImageStream")
        elif url is not None and url.split("://")[0] not in ("docker", "oci"):
            problems.append(f"Illegal registry source URL scheme {url}")
    return problems


def data_import_cron(cron: dict[str, Any]) -> list[str]:
    """dataimportcron-validate.go:57-60 and 150-162: the name and ``managedDataSource`` are DNS-1035 labels'
    length (63) and the latter set; 93-112: a registry or PVC source and no SourceRef/ContentType/Checkpoints;
    139-148 ``garbageCollect`` Never or Outdated; 130-137 ``importsToKeep`` not negative."""
    spec = cron["spec"]
    template = dig(spec, "template", "spec") or {}
    problems = [] if len(cron["metadata"]["name"]) <= 63 else ["Name cannot be longer than 63 characters"]
    managed = spec.get("managedDataSource") or ""
    if not managed or len(managed) > 63:
        problems.append("Illegal ManagedDataSource value")
    source = template.get("source") or {}
    if source.get("registry") is None and source.get("pvc") is None:
        problems.append("Missing source")
    if any(template.get(k) for k in ("sourceRef", "contentType", "checkpoints", "finalCheckpoint")):
        problems.append("Unsettable fields: SourceRef, ContentType, Checkpoints, FinalCheckpoint")
    if spec.get("garbageCollect") not in (None, "Never", "Outdated"):
        problems.append("Illegal GarbageCollect value")
    if spec.get("importsToKeep", 0) < 0:
        problems.append("Illegal ImportsToKeep value")
    return problems


# -- the tests ----------------------------------------------------------------------------------------------------
def isvcs() -> list[dict[str, Any]]:
    return objects("serving.kserve.io", "InferenceService")


@pytest.mark.parametrize(
    "rule",
    [
        kserve_name,
        kserve_autoscaler_class,
        kserve_one_implementation,
        kserve_replicas,
        kserve_hpa,
        kserve_keda,
        kserve_deployment_strategy,
        kserve_blocked_env,
    ],
)
def test_kserve_admits_every_inference_service(rule: Rule) -> None:
    assert refusals(rule, isvcs()) == []


def test_the_prod_plan_scales_with_both_hpa_and_keda() -> None:
    """The HPA and KEDA rules above are exercised: prod renders InferenceServices of both classes."""
    classes = {_autoscaler(isvc) for isvc in isvcs()}
    assert classes == {("Standard", "hpa"), ("Standard", "keda")}


def test_cluster_api_admits_the_kubeadm_control_plane() -> None:
    kcps = objects("controlplane.cluster.x-k8s.io", "KubeadmControlPlane")
    assert refusals(kcp_spec, kcps) + refusals(kcp_rollout, kcps) == []


def test_cluster_api_admits_the_machine_deployments_and_their_machines() -> None:
    assert refusals(machine_deployment, objects("cluster.x-k8s.io", "MachineDeployment")) == []


def test_cluster_api_admits_the_machine_health_checks() -> None:
    assert refusals(machine_health_check, objects("cluster.x-k8s.io", "MachineHealthCheck")) == []


@pytest.mark.parametrize(
    "rule",
    [
        vm_run_strategy,
        vmi_disks_and_volumes,
        vmi_dedicated_cpus,
        vmi_numa,
        vmi_memory,
        vmi_eviction_strategy,
        vmi_host_devices,
    ],
)
def test_kubevirt_admits_every_virtual_machine(rule: Rule) -> None:
    assert refusals(rule, vm_specs()) == []


def test_the_vm_rules_see_dedicated_cpus_numa_hugepages_and_host_devices() -> None:
    """The CPU, NUMA, hugepages and host-device rules above are exercised by prod's VMs."""
    domains = [dig(vmi(vm), "domain") or {} for vm in vm_specs()]
    assert any(dig(d, "cpu", "dedicatedCpuPlacement") for d in domains)
    assert any(dig(d, "cpu", "numa", "guestMappingPassthrough") is not None for d in domains)
    assert any(dig(d, "memory", "hugepages", "pageSize") == "1Gi" for d in domains)
    assert any(dig(d, "devices", "hostDevices") for d in domains)
    assert any(
        g.get("deviceName") == "nvidia.com/NVIDIA_L40S-12Q" for d in domains for g in dig(d, "devices", "gpus") or []
    )


def test_cdi_admits_every_data_volume() -> None:
    dvs = data_volumes()
    assert {next(iter(dv["spec"].get("source") or {"sourceRef": 0})) for dv in dvs} == {
        "sourceRef",
        "blank",
        "registry",
    }
    assert refusals(data_volume, dvs) == []


def test_cdi_admits_every_data_import_cron() -> None:
    assert refusals(data_import_cron, objects("cdi.kubevirt.io", "DataImportCron")) == []


# each rule refuses what upstream refuses (so that the tests above can fail)
def _isvc(annotations: dict[str, str], **predictor_spec: Any) -> dict[str, Any]:
    return {
        "kind": "InferenceService",
        "metadata": {"name": "m", "annotations": annotations},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "x"}}, **predictor_spec}},
    }


_KEDA = {"serving.kserve.io/deploymentMode": "Standard", "serving.kserve.io/autoscalerClass": "keda"}
_HPA = {"serving.kserve.io/deploymentMode": "Standard", "serving.kserve.io/autoscalerClass": "hpa"}
_AVERAGE = {
    "type": "External",
    "external": {
        "metric": {"backend": "prometheus", "query": "q"},
        "target": {"type": "AverageValue", "averageValue": "5"},
    },
}


def _vm(domain: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "kind": "VirtualMachine",
        "metadata": {"name": "v"},
        "spec": {"runStrategy": "Always", **spec, "template": {"spec": {"domain": domain}}},
    }


_DEDICATED = {
    "cpu": {"cores": 4, "dedicatedCpuPlacement": True, "threads": 1},
    "resources": {"requests": {"cpu": "4", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}},
}


@pytest.mark.parametrize(
    ("rule", "obj", "message"),
    [
        (kserve_name, {"metadata": {"name": "Llama"}}, "the InferenceService 'Llama' is invalid: name format"),
        (
            kserve_autoscaler_class,
            _isvc({"serving.kserve.io/autoscalerClass": "kpa"}),
            "[kpa] is not a supported autoscaler class type",
        ),
        (
            kserve_one_implementation,
            _isvc({}, containers=[{"name": "kserve-container"}]),
            "exactly one of [...] must be specified in PredictorSpec",
        ),
        (kserve_replicas, _isvc({}, minReplicas=3, maxReplicas=2), "'MinReplicas' cannot be greater than MaxReplicas"),
        (kserve_hpa, _isvc(_HPA, scaleMetric="concurrency"), "[concurrency] is not a supported metric"),
        (
            kserve_keda,
            _isvc(_KEDA, autoScaling={"metrics": [_AVERAGE]}),
            "the target threshold value should not be empty",
        ),
        (
            kserve_deployment_strategy,
            _isvc({}, deploymentStrategy={"type": "Recreate"}),
            "customizing deploymentStrategy is only supported for raw deployment mode",
        ),
        (
            kserve_blocked_env,
            _isvc({}, model={"env": [{"name": "PYTHONPATH", "value": "/x"}]}),
            "setting PYTHONPATH in container 'kserve-container' is not allowed for security reasons",
        ),
        (
            kcp_spec,
            {
                "spec": {
                    "replicas": 2,
                    "version": "v1.34.1",
                    "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "g", "kind": "k", "name": "n"}}},
                }
            },
            "spec.replicas: cannot be an even number when etcd is stacked",
        ),
        (
            kcp_rollout,
            {"spec": {"replicas": 1, "rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0}}}}},
            "when KubeadmControlPlane is configured to scale-in, replica count needs to be at least 3",
        ),
        (
            machine_deployment,
            {
                "metadata": {"name": "w"},
                "spec": {
                    "clusterName": "c",
                    "rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
                    "template": {"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"}}},
                },
            },
            "spec.rollout.strategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0",
        ),
        (
            machine_health_check,
            {
                "spec": {
                    "clusterName": "c",
                    "selector": {"matchLabels": {"a": "b"}},
                    "checks": {"nodeStartupTimeoutSeconds": 10},
                }
            },
            "spec.checks.nodeStartupTimeoutSeconds: must be at least 30s",
        ),
        (vm_run_strategy, _vm({}, running=True), "Running and RunStrategy are mutually exclusive"),
        (vmi_disks_and_volumes, _vm({"devices": {"disks": [{"name": "root"}]}}), "disk 'root' has no volume"),
        (
            vmi_dedicated_cpus,
            _vm({**_DEDICATED, "cpu": {"cores": 4, "dedicatedCpuPlacement": True, "threads": 4}}),
            "Not more than two threads must be provided when DedicatedCPUPlacement is true",
        ),
        (
            vmi_dedicated_cpus,
            _vm({"cpu": {"isolateEmulatorThread": True}}),
            "IsolateEmulatorThread should be only set in combination with DedicatedCPUPlacement",
        ),
        (
            vmi_numa,
            _vm({"cpu": {"dedicatedCpuPlacement": True, "numa": {"guestMappingPassthrough": {}}}}),
            "hugepages must be requested",
        ),
        (
            vmi_memory,
            _vm({"memory": {"guest": "1536Mi", "hugepages": {"pageSize": "1Gi"}}}),
            "memory 1610612736.0 is not a multiple of the page size 1Gi",
        ),
        (
            vmi_eviction_strategy,
            {"spec": {"template": {"spec": {"evictionStrategy": "Drain"}}}},
            "evictionStrategy is set with an unrecognized option: Drain",
        ),
        (
            vmi_host_devices,
            _vm({"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/GP100GL_TESLA_P100"}]}}),
            "GPU nvidia.com/GP100GL_TESLA_P100 is not permitted in permittedHostDevices configuration",
        ),
        (
            data_volume,
            {
                "spec": {
                    "storage": {"resources": {"requests": {"storage": "1Gi"}}},
                    "source": {"blank": {}},
                    "sourceRef": {"kind": "DataSource", "name": "d"},
                }
            },
            "Data volume should have either Source or SourceRef, or be externally populated",
        ),
        (data_volume, {"spec": {"storage": {}, "source": {"blank": {}}}}, "storage size is missing"),
        (
            data_import_cron,
            {
                "metadata": {"name": "c"},
                "spec": {
                    "managedDataSource": "d",
                    "garbageCollect": "Always",
                    "template": {"spec": {"source": {"registry": {}}}},
                },
            },
            "Illegal GarbageCollect value",
        ),
    ],
    ids=lambda value: value.__name__ if callable(value) else "",
)
def test_each_rule_refuses_what_upstream_refuses(rule: Rule, obj: dict[str, Any], message: str) -> None:
    assert message in rule(obj)
