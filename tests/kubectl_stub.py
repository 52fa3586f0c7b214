"""A stand-in for ``k3s kubectl`` over a JSON file, for running the maintenance scripts for real in tests.

Usage (as the body of a ``k3s`` executable): ``python kubectl_stub.py STATE.json kubectl [flags] VERB ...``.

The state holds ``nodes`` (name -> Node object), ``pods`` (a list of Pod objects) and switches: ``api_down``
(every API), ``apis_down`` (the APIs that do not answer: ``local`` for the kubeconfig's own server, else a
``--server`` URL),
``pdb_blocked`` (pod names whose eviction answers 429), ``drain_fails`` (kubectl drain's error text),
``drain_seconds`` (how long a drain takes), ``drain_kills_node`` (the host dies mid-drain: the Node turns NotReady),
``flaky`` (call prefixes that fail once each, as a timeout would) and ``restart_fixes`` (label selector -> the
``labels``/``allocatable`` a Node gets once its pods of that selector are deleted, i.e. restarted; every such
delete is also listed in ``restarted``), ``on_annotate`` (annotation key -> the ``labels``/``annotations``/
``allocatable`` a Node gets once that annotation is set on it: the VF-typing service acting on its re-trigger);
``vms`` (VirtualMachine objects: ``get``, ``annotate`` and merge
``patch`` of ``virtualmachines.kubevirt.io``; ``replace --raw .../start`` is listed in ``started``); ``vmis`` and
``kubevirtmachines`` (read one by one), and ``delete machines.cluster.x-k8s.io``, listed in ``deleted_machines``,
which also takes the pods of that Machine's VM away, as Cluster API would (unless ``capi_down``: its controllers
are not running, the Machine stays deleting); ``missing_kinds`` lists the kinds whose CRD is not installed. Every
call is appended to ``calls`` (the arguments after the global flags, joined by spaces), so tests can assert what
was done, in order.

Only what the scripts use is implemented: ``get --raw=/readyz``, ``get node NAME [--ignore-not-found] -o
name|jsonpath=...``, ``get nodes -l KEY=VALUE -o jsonpath=...``, ``get pods (--all-namespaces | -n NS)
--field-selector ... [-l KEY[=VALUE]] -o jsonpath=...``, ``get KIND NAME`` of VMIs and KubevirtMachines,
``annotate``, ``label``, ``cordon``, ``uncordon``, ``drain``, ``delete node``, ``delete pods -l``, ``delete secret``
(listed in ``deleted_secrets``), ``delete virtualmachineinstances.kubevirt.io``, ``delete machines.cluster.x-k8s.io``,
``create --raw .../eviction``, ``taint node`` (add, ``--overwrite``, remove with ``-``), ``apply -f FILE`` of the
acceptance Job (kept in ``jobs``, its condition the state's ``job_outcome``), ``get job``, ``delete job`` and
``logs job/NAME`` (the state's ``job_logs``) and, for the kinds in ``objects`` (kind -> a list of objects: Longhorn's
``nodes.longhorn.io`` and ``replicas.longhorn.io``), ``get`` by name or label and a merge ``patch`` of
``nodes.longhorn.io`` (``evictionRequested`` removes the node's replicas unless ``longhorn_evicts`` is false).
JSONPath: members
(``\\.``-escaped dots), ``[n]``, ``[*]``, ``[?(@.k=="v")]``,
``range``/``end`` and ``"..."`` literals with ``\\t``/``\\n``; maps and lists print as compact JSON, as kubectl does.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

_GLOBAL_FLAGS = re.compile(r"^--(kubeconfig|request-timeout|server)(=.*)?$")


def main(argv: list[str]) -> int:
    state_path = Path(argv[0])
    state = json.loads(state_path.read_text())
    args = argv[2:] if argv[1:2] == ["kubectl"] else argv[1:]
    server = _option(args, "--server") or "local"
    args = _strip_globals(args)
    call = " ".join(args)
    state.setdefault("calls", []).append(call)
    flaky = state.get("flaky", [])
    failing = next((prefix for prefix in flaky if call.startswith(prefix)), None)
    if failing is not None:  # fails once, as a timeout while an API server restarts would
        flaky.remove(failing)
        state_path.write_text(json.dumps(state, indent=1))
        print("Unable to connect to the server: net/http: request canceled (Client.Timeout exceeded)", file=sys.stderr)
        return 1
    if server in state.get("apis_down", []):
        print(f"The connection to the server {server} was refused - did you specify the right host?", file=sys.stderr)
        state_path.write_text(json.dumps(state, indent=1))
        return 1
    try:
        code = _run(state, args)
    finally:
        state_path.write_text(json.dumps(state, indent=1))
    return code


def _strip_globals(args: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if _GLOBAL_FLAGS.match(arg):
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _run(state: dict[str, Any], args: list[str]) -> int:
    if state.get("api_down"):
        print("The connection to the server 127.0.0.1:6443 was refused", file=sys.stderr)
        return 1
    namespace = None
    if "-n" in args:
        at = args.index("-n")
        namespace, args = args[at + 1], args[:at] + args[at + 2 :]
    verb, rest = args[0], args[1:]
    handler = {
        "get": _get,
        "annotate": _annotate,
        "label": _label,
        "cordon": _cordon,
        "uncordon": _cordon,
        "drain": _drain,
        "delete": _delete,
        "create": _create,
        "patch": _patch,
        "replace": _replace,
        "taint": _taint,
        "apply": _apply,
        "logs": _logs,
    }[verb]
    return handler(state, rest, namespace, verb)


def _option(rest: list[str], name: str) -> str | None:
    for index, arg in enumerate(rest):
        if arg == name and index + 1 < len(rest):
            return rest[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _get(state: dict[str, Any], rest: list[str], namespace: str | None, _: str) -> int:
    if rest[0] == "--raw=/readyz":
        print("ok")
        return 0
    output = _option(rest, "-o") or ""
    if rest[0] in ("nodes", *state.get("objects", {})):  # by label, or another kind: get KIND [NAME] [-l KEY=VALUE]
        return _get_objects(state, rest, namespace, output)
    if rest[0] == "node":
        node = state["nodes"].get(rest[1])
        if node is None:
            if "--ignore-not-found" in rest:
                return 0
            print(f'Error from server (NotFound): nodes "{rest[1]}" not found', file=sys.stderr)
            return 1
        if output == "name":
            print(f"node/{rest[1]}")
            return 0
        sys.stdout.write(render(output.removeprefix("jsonpath="), node))
        return 0
    if rest[0] == "virtualmachines.kubevirt.io":
        return _get_vms(state, rest, namespace, output)
    if rest[0] == "job":  # the acceptance Job: once applied, it ends as ``job_outcome`` says
        job = state.get("jobs", {}).get(f"{namespace}/{rest[1]}")
        if job is None:
            print(f'Error from server (NotFound): jobs.batch "{rest[1]}" not found', file=sys.stderr)
            return 1
        sys.stdout.write(render(output.removeprefix("jsonpath="), job))
        return 0
    if rest[0] in _NAMED:
        return _get_named(state, rest, namespace, output)
    if rest[0] == "pods":
        terms = (_option(rest, "--field-selector") or "").split(",")
        node = next(t.split("=", 1)[1] for t in terms if t.startswith("spec.nodeName="))
        pods = [p for p in state["pods"] if p["spec"].get("nodeName") == node]
        pods = _labelled(pods, _option(rest, "-l"))
        if "--all-namespaces" not in rest:
            pods = [p for p in pods if p["metadata"]["namespace"] == namespace]
        excluded = {t.split("!=", 1)[1] for t in terms if t.startswith("status.phase!=")}
        pods = [p for p in pods if p["status"]["phase"] not in excluded]
        sys.stdout.write(render(output.removeprefix("jsonpath="), {"items": pods}))
        return 0
    raise SystemExit(f"stub: unsupported get {rest}")


def _get_vms(state: dict[str, Any], rest: list[str], namespace: str | None, output: str) -> int:
    """``get virtualmachines.kubevirt.io [NAME] (-n NS | --all-namespaces) -o jsonpath=...``."""
    vms = state.get("vms", [])
    if "--all-namespaces" not in rest:
        vms = [
            v
            for v in vms
            if v["metadata"]["namespace"] == namespace
            and (len(rest) < 2 or rest[1].startswith("-") or v["metadata"]["name"] == rest[1])
        ]
        if len(rest) > 1 and not rest[1].startswith("-"):
            if not vms:
                return 0 if "--ignore-not-found" in rest else 1
            sys.stdout.write(render(output.removeprefix("jsonpath="), vms[0]))
            return 0
    sys.stdout.write(render(output.removeprefix("jsonpath="), {"items": vms}))
    return 0


_NAMED = {
    "virtualmachineinstances.kubevirt.io": "vmis",
    "kubevirtmachines.infrastructure.cluster.x-k8s.io": "kubevirtmachines",
}
"""Kinds read one object at a time (``get KIND NAME -n NS``) -> the state's list of them."""


def _labelled(pods: list[dict[str, Any]], selector: str | None) -> list[dict[str, Any]]:
    """``pods`` that match a ``KEY=VALUE`` or ``KEY`` (has the label) selector (all of them without one)."""
    if selector is None:
        return pods
    if "=" not in selector:
        return [p for p in pods if selector in (p["metadata"].get("labels") or {})]
    key, value = selector.split("=", 1)
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(key) == value]


def _get_named(state: dict[str, Any], rest: list[str], namespace: str | None, output: str) -> int:
    """``get KIND NAME [--ignore-not-found] -o jsonpath=...`` of a kind of :data:`_NAMED`; a kind listed in
    ``missing_kinds`` is one whose CRD the cluster does not have."""
    if rest[0] in state.get("missing_kinds", []):
        print(f'error: the server doesn\'t have a resource type "{rest[0].split(".")[0]}"', file=sys.stderr)
        return 1
    items = [
        o
        for o in state.get(_NAMED[rest[0]], [])
        if (o["metadata"]["namespace"], o["metadata"]["name"]) == (namespace, rest[1])
    ]
    if not items:
        return 0 if "--ignore-not-found" in rest else 1
    sys.stdout.write(render(output.removeprefix("jsonpath="), items[0]))
    return 0


def _get_objects(state: dict[str, Any], rest: list[str], namespace: str | None, output: str) -> int:
    """``get nodes -l KEY=VALUE``, or ``get`` of a kind in ``objects`` (Longhorn's nodes and replicas) by name or by
    one label; ``-o name`` or ``-o jsonpath=...``."""
    objects = list(state["nodes"].values()) if rest[0] == "nodes" else state["objects"][rest[0]]
    namespace = None if rest[0] == "nodes" else namespace
    name = rest[1] if len(rest) > 1 and not rest[1].startswith("-") else None
    key, _, value = (_option(rest, "-l") or "").partition("=")
    found = [
        o
        for o in objects
        if o["metadata"].get("namespace") == namespace
        and (name is None or o["metadata"]["name"] == name)
        and (not key or o["metadata"].get("labels", {}).get(key) == value)
    ]
    if name is not None and not found and "--ignore-not-found" not in rest:
        print(f'Error from server (NotFound): {rest[0]} "{name}" not found', file=sys.stderr)
        return 1
    if output == "name":
        sys.stdout.write("".join(f"{rest[0]}/{o['metadata']['name']}\n" for o in found))
    else:
        sys.stdout.write(render(output.removeprefix("jsonpath="), {"items": found}))
    return 0


def _vm(state: dict[str, Any], namespace: str | None, name: str) -> dict[str, Any]:
    return next(
        v for v in state.get("vms", []) if (v["metadata"]["namespace"], v["metadata"]["name"]) == (namespace, name)
    )


def _annotate(state: dict[str, Any], rest: list[str], namespace: str | None, __: str) -> int:
    node = _vm(state, namespace, rest[1]) if rest[0] == "virtualmachines.kubevirt.io" else state["nodes"][rest[1]]
    annotations = node["metadata"].setdefault("annotations", {})
    for arg in rest[2:]:
        if arg.startswith("--"):
            continue
        if arg.endswith("-"):
            annotations.pop(arg[:-1], None)
        else:
            key, value = arg.split("=", 1)
            annotations[key] = value
            _fix(node, state.get("on_annotate", {}).get(key))
    return 0


def _fix(node: dict[str, Any], fix: dict[str, dict[str, str]] | None) -> None:
    """What a Node becomes once the agent that acts on a change has acted (a restarted pod, a re-triggered service)."""
    if fix is None:
        return
    node["metadata"].setdefault("labels", {}).update(fix.get("labels", {}))
    node["metadata"].setdefault("annotations", {}).update(fix.get("annotations", {}))
    node.setdefault("status", {}).setdefault("allocatable", {}).update(fix.get("allocatable", {}))


def _patch(state: dict[str, Any], rest: list[str], namespace: str | None, __: str) -> int:
    if rest[0] == "nodes.longhorn.io":  # Longhorn evicts the node's replicas once asked, when state says it can
        target = next(o for o in state["objects"][rest[0]] if o["metadata"]["name"] == rest[1])
        target.setdefault("spec", {}).update(json.loads(_option(rest, "-p") or "{}")["spec"])
        if target["spec"].get("evictionRequested") and state.get("longhorn_evicts", True):
            replicas = state["objects"].get("replicas.longhorn.io", [])
            replicas[:] = [r for r in replicas if r["metadata"].get("labels", {}).get("longhorn.io/node") != rest[1]]
        return 0
    assert rest[0] == "virtualmachines.kubevirt.io", rest
    assert _option(rest, "--type") == "merge", rest
    vm = _vm(state, namespace, rest[1])
    vm["spec"].update(json.loads(_option(rest, "-p") or "{}")["spec"])
    return 0


def _replace(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    match = re.match(
        r"^/apis/subresources\.kubevirt\.io/v1/namespaces/([^/]+)/virtualmachines/([^/]+)/start$",
        _option(rest, "--raw") or "",
    )
    if match is None:
        raise SystemExit(f"stub: unsupported replace {rest}")
    sys.stdin.read()
    state.setdefault("started", []).append(f"{match[1]}/{match[2]}")
    return 0


def _label(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    labels = state["nodes"][rest[1]]["metadata"].setdefault("labels", {})
    for arg in rest[2:]:
        if arg.endswith("-"):
            labels.pop(arg[:-1], None)
        elif not arg.startswith("--"):
            key, value = arg.split("=", 1)
            labels[key] = value
    return 0


def _cordon(state: dict[str, Any], rest: list[str], _: str | None, verb: str) -> int:
    state["nodes"][rest[0]].setdefault("spec", {})["unschedulable"] = verb == "cordon"
    print(f"node/{rest[0]} {verb}ed")
    return 0


def _drain(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    time.sleep(state.get("drain_seconds", 0))  # a drain that waits out its timeout
    if state.get("drain_kills_node"):  # the host dies mid-drain: its pods never confirm, the Node goes NotReady
        ready = next(c for c in state["nodes"][rest[0]]["status"]["conditions"] if c["type"] == "Ready")
        ready["status"] = "Unknown"
        print(f'error: unable to drain node "{rest[0]}" due to error: global timeout reached', file=sys.stderr)
        return 1
    if state.get("drain_fails"):
        print(state["drain_fails"], file=sys.stderr)
        return 1
    state["pods"] = [p for p in state["pods"] if p["spec"].get("nodeName") != rest[0] or _owner(p)[0] == "DaemonSet"]
    print(f"node/{rest[0]} drained")
    return 0


def _delete(state: dict[str, Any], rest: list[str], namespace: str | None, _: str) -> int:
    kind, name = rest[0], (rest[1] if len(rest) > 1 else "")
    if kind == "node":
        state["nodes"].pop(name, None)
        return 0
    if kind == "secret":
        state.setdefault("deleted_secrets", []).append(f"{namespace}/{name}")
        return 0
    if kind == "job":
        state.get("jobs", {}).pop(f"{namespace}/{name}", None)
        return 0
    if kind == "pods":  # delete pods -l SELECTOR --field-selector spec.nodeName=NODE: a DaemonSet pod restarted
        selector = _option(rest, "-l") or ""
        node = (_option(rest, "--field-selector") or "").removeprefix("spec.nodeName=")
        state.setdefault("restarted", []).append(f"{namespace} {selector} {node}")
        _fix(state["nodes"][node], state.get("restart_fixes", {}).get(selector))
        return 0
    if kind == "machines.cluster.x-k8s.io":  # Cluster API drains the node, then deletes the Machine's VM
        state.setdefault("deleted_machines", []).append(f"{namespace}/{name}")
        if state.get("capi_down"):  # its controllers are not running: the Machine waits, deleting
            return 0
        vms = {
            m["metadata"]["name"]
            for m in state.get("kubevirtmachines", [])
            if m["metadata"]["namespace"] == namespace
            and any(o.get("name") == name for o in m["metadata"].get("ownerReferences", []))
        }
        state["pods"] = [
            p
            for p in state["pods"]
            if not (
                p["metadata"]["namespace"] == namespace
                and _owner(p)[0] == "VirtualMachineInstance"
                and _owner(p)[1] in vms
            )
        ]
        return 0
    if kind == "virtualmachineinstances.kubevirt.io":
        state["pods"] = [
            p
            for p in state["pods"]
            if not (p["metadata"]["namespace"] == namespace and _owner(p) == ("VirtualMachineInstance", name))
        ]
        return 0
    raise SystemExit(f"stub: unsupported delete {rest}")


def _create(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    match = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$", _option(rest, "--raw") or "")
    if match is None:
        raise SystemExit(f"stub: unsupported create {rest}")
    body = json.loads(sys.stdin.read())
    assert body["kind"] == "Eviction", body
    assert body["metadata"] == {"name": match[2], "namespace": match[1]}, body
    if match[2] in state.get("pdb_blocked", []):
        print(
            "Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget.",
            file=sys.stderr,
        )
        return 1
    state["pods"] = [p for p in state["pods"] if (p["metadata"]["namespace"], p["metadata"]["name"]) != match.groups()]
    return 0


def _taint(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    """``taint node NAME KEY[=VALUE]:EFFECT[-] [--overwrite]``."""
    spec = state["nodes"][rest[1]].setdefault("spec", {})
    taints = spec.setdefault("taints", [])
    for arg in rest[2:]:
        if arg.startswith("--"):
            continue
        remove = arg.endswith("-")
        key_value, effect = arg.removesuffix("-").rsplit(":", 1)
        key, _sep, value = key_value.partition("=")
        kept = [t for t in taints if (t["key"], t["effect"]) != (key, effect)]
        if remove and len(kept) == len(taints):
            print(f"error: taint {key!r} not found", file=sys.stderr)
            return 1
        taints[:] = kept if remove else [*kept, {"key": key, **({"value": value} if value else {}), "effect": effect}]
    return 0


def _apply(state: dict[str, Any], rest: list[str], _: str | None, __: str) -> int:
    """``apply -f FILE`` of a Job: kept in ``jobs`` (``applied`` lists each), its status the ``job_outcome``
    condition (``Complete``, ``Failed``; none: it never ends)."""
    manifest = json.loads(Path(_option(rest, "-f") or "").read_text())
    assert manifest["kind"] == "Job", manifest
    key = f"{manifest['metadata']['namespace']}/{manifest['metadata']['name']}"
    outcome = state.get("job_outcome")
    manifest["status"] = {"conditions": [{"type": outcome, "status": "True"}]} if outcome else {}
    state.setdefault("jobs", {})[key] = manifest
    state.setdefault("applied", []).append(manifest)
    return 0


def _logs(state: dict[str, Any], rest: list[str], namespace: str | None, __: str) -> int:
    """``logs job/NAME --all-containers=true --tail=N``: the state's ``job_logs``."""
    assert f"{namespace}/{rest[0].removeprefix('job/')}" in state.get("jobs", {}), rest
    sys.stdout.write(state.get("job_logs", ""))
    return 0


def _owner(pod: dict[str, Any]) -> tuple[str, str]:
    owners = pod["metadata"].get("ownerReferences") or [{}]
    return owners[0].get("kind", ""), owners[0].get("name", "")


# -- JSONPath ---------------------------------------------------------------------------------------------------
def render(template: str, data: Any) -> str:
    """``template`` evaluated against ``data`` the way kubectl's ``-o jsonpath`` prints it."""
    tokens = re.findall(r"\{((?:[^{}\"]|\"[^\"]*\")*)\}|([^{]+)", template)
    out, _ = _render(tokens, 0, data)
    return out


def _render(tokens: list[tuple[str, str]], index: int, data: Any) -> tuple[str, int]:
    out = ""
    while index < len(tokens):
        expression, literal = tokens[index]
        if literal:
            out += literal
        elif expression.startswith("range "):
            items = _values(expression.removeprefix("range "), data)
            end = _matching_end(tokens, index)
            for item in items:
                chunk, _ = _render(tokens[index + 1 : end], 0, item)
                out += chunk
            index = end
        elif expression == "end":
            return out, index
        elif expression.startswith('"'):
            out += json.loads(expression)
        else:
            out += " ".join(_text(v) for v in _values(expression, data))
        index += 1
    return out, index


def _matching_end(tokens: list[tuple[str, str]], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        expression = tokens[index][0]
        if expression.startswith("range "):
            depth += 1
        elif expression == "end":
            depth -= 1
            if depth == 0:
                return index
    raise SystemExit("stub: range without end")


def _values(path: str, data: Any) -> list[Any]:
    values = [data]
    for step in re.findall(r"\.((?:\\\.|[^.\[])+)|\[([^\]]*)\]", path):
        member, index = step
        next_values: list[Any] = []
        for value in values:
            if member:
                key = member.replace("\\.", ".")
                if isinstance(value, dict) and key in value:
                    next_values.append(value[key])
            elif index == "*":
                next_values.extend(value if isinstance(value, list) else list(value.values()))
            elif index.startswith("?("):
                key, want = re.match(r'^\?\(@\.(\w+)=="([^"]*)"\)$', index).groups()  # type: ignore[union-attr]
                next_values.extend(v for v in value if isinstance(v, dict) and v.get(key) == want)
            elif isinstance(value, list) and int(index) < len(value):
                next_values.append(value[int(index)])
        values = next_values
    return values


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
