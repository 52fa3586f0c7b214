"""The checks of Pod Security's ``restricted`` level the tenant attack catalogue needs, with the API server's
wording (kubernetes/kubernetes ``staging/src/k8s.io/pod-security-admission/policy``, v1.34: ``check_*.go``).

Not the whole profile: privileged containers, host namespaces, ``hostPath`` volumes (baseline's check and
restricted's volume-type check), host ports, privilege escalation, non-root, seccomp and capabilities. Each failing
check gives ``<reason> (<detail>)`` as the check words it, joined with ``, `` as the admission message joins them (the
order here is by check ID, ``allowPrivilegeEscalation`` to ``seccompProfile``; the tests assert one pod's reasons,
not how the API server would order several).
"""

from __future__ import annotations

from typing import Any

RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
"""The volume types ``restricted`` allows (``check_restrictedVolumes.go``)."""


def _names(containers: list[dict[str, Any]]) -> str:
    quoted = ", ".join(f'"{c["name"]}"' for c in containers)
    return f"container {quoted}" if len(containers) == 1 else f"containers {quoted}"


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def violations(pod: dict[str, Any]) -> list[str]:
    """``<reason> (<detail>)`` of every failing check of ``pod`` (a Pod); ``[]`` when it passes."""
    spec = pod["spec"]
    pod_context = spec.get("securityContext") or {}
    containers = _containers(spec)
    ctx = {c["name"]: c.get("securityContext") or {} for c in containers}
    out: list[str] = []
    escalating = [c for c in containers if ctx[c["name"]].get("allowPrivilegeEscalation") is not False]
    if escalating:
        out.append(
            f"allowPrivilegeEscalation != false ({_names(escalating)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    uncapped = [c for c in containers if "ALL" not in ((ctx[c["name"]].get("capabilities") or {}).get("drop") or [])]
    if uncapped:
        out.append(f'unrestricted capabilities ({_names(uncapped)} must set securityContext.capabilities.drop=["ALL"])')
    hosts = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    if hosts:
        out.append(f"host namespaces ({', '.join(hosts)})")
    host_paths = [v["name"] for v in spec.get("volumes", []) if "hostPath" in v]
    if host_paths:
        out.append(f"hostPath volumes ({', '.join(f'volume {chr(34)}{n}{chr(34)}' for n in host_paths)})")
    ports = [(c, p["hostPort"]) for c in containers for p in c.get("ports", []) if p.get("hostPort")]
    if ports:
        out.append(f"hostPort ({', '.join(f'{_names([c])} uses hostPort {port}' for c, port in ports)})")
    privileged = [c for c in containers if ctx[c["name"]].get("privileged")]
    if privileged:
        out.append(f"privileged ({_names(privileged)} must not set securityContext.privileged=true)")
    restricted = [
        (v["name"], kind)
        for v in spec.get("volumes", [])
        for kind in v
        if kind != "name" and kind not in RESTRICTED_VOLUMES
    ]
    if restricted:
        details = ", ".join(f'volume "{n}" uses restricted volume type "{kind}"' for n, kind in restricted)
        out.append(f"restricted volume types ({details})")
    root = pod_context.get("runAsNonRoot") is not True and any(
        ctx[c["name"]].get("runAsNonRoot") is not True for c in containers
    )
    if root:
        out.append(f"runAsNonRoot != true (pod or {_names(containers)} must set securityContext.runAsNonRoot=true)")
    seccomp = (pod_context.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    if not seccomp:
        unset = [c for c in containers if (ctx[c["name"]].get("seccompProfile") or {}).get("type") is None]
        if unset:
            out.append(
                f"seccompProfile (pod or {_names(unset)} must set securityContext.seccompProfile.type to "
                '"RuntimeDefault" or "Localhost")'
            )
    return out


def refusal(pod: dict[str, Any], version: str = "v1.34") -> str | None:
    """The API server's refusal of ``pod`` in a namespace enforcing ``restricted`` at ``version``; ``None`` when it
    passes."""
    found = violations(pod)
    if not found:
        return None
    name = pod["metadata"]["name"]
    return f'pods "{name}" is forbidden: violates PodSecurity "restricted:{version}": {", ".join(found)}'
