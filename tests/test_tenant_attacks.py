"""The tenant attack catalogue as one list (issue 35): what a tenant member could apply or request with the rights
gpucell gives it, and the layer that refuses each, from the three catalogues that prove each refusal:

- ``tests/test_tenant_attacks_rbac.py``: RBAC, computed from every Role, ClusterRole and binding of the prod plan and
  its charts (aggregation resolved, the escalation check applied);
- ``tests/test_tenant_attacks_admission.py``: the tenant's ValidatingAdmissionPolicies (their CEL evaluated) and Pod
  Security ``restricted``;
- ``tests/test_tenant_attacks_network.py``: the cluster-wide Cilium deny rules, against every policy prod renders plus
  the one the tenant adds.

This file holds what the catalogue as a whole must be: no id twice, every attack with exactly one named layer, every
layer represented, and the attacks issue 35 names present.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.conftest import ProdPlans
from tests.test_tenant_attacks_admission import ATTACKS as ADMISSION_ATTACKS
from tests.test_tenant_attacks_network import ATTACKS as NETWORK_ATTACKS
from tests.test_tenant_attacks_rbac import ATTACKS as RBAC_ATTACKS

LAYERS = ("RBAC", "ValidatingAdmissionPolicy", "Pod Security", "Cilium deny")
"""The layers that refuse a tenant's attack (docs/security.md, one section each)."""

CATALOGUE: list[tuple[str, str]] = [
    *((attack.id, attack.layer) for attack in RBAC_ATTACKS),
    *((attack[0], attack[2]) for attack in ADMISSION_ATTACKS),
    *((attack[0], attack[3]) for attack in NETWORK_ATTACKS),
]
"""(attack id, refusing layer) of every attack of the three catalogues."""


def test_every_attack_has_one_id_and_a_named_layer() -> None:
    ids = Counter(attack for attack, _ in CATALOGUE)
    assert [attack for attack, count in ids.items() if count > 1] == []
    assert {layer for _, layer in CATALOGUE} == set(LAYERS)
    assert len(CATALOGUE) >= 25


def test_the_attacks_issue_35_names_are_in_the_catalogue() -> None:
    named = dict(CATALOGUE)
    expected = {
        "netpol-allow-all-egress": "RBAC",  # a NetworkPolicy allowing all egress: a tenant cannot write one...
        "np-all-egress-etcd": "Cilium deny",  # ...and if one existed, etcd stays denied
        "cilium-policy-to-world": "RBAC",
        "cnp-world-metadata": "Cilium deny",
        "cnp-kube-apiserver-etcd": "Cilium deny",
        "toleration-of-the-server-taint": "ValidatingAdmissionPolicy",
        "node-name-of-a-server": "ValidatingAdmissionPolicy",
        "certificate-for-another-tenants-host": "RBAC",
        "issuer": "RBAC",
        "podmonitor": "RBAC",
        "gpu-pod-labelled-as-a-vms-launcher": "ValidatingAdmissionPolicy",
        "rolebinding-to-cluster-admin": "RBAC",
        "rolebinding-to-admin": "RBAC",
        "service-annotated-with-another-tenants-address": "ValidatingAdmissionPolicy",
        "service-with-a-reserved-address": "ValidatingAdmissionPolicy",
        "vm-with-a-host-device-not-offered": "ValidatingAdmissionPolicy",
        "privileged-pod": "Pod Security",
        "rewrite-of-a-tenant-clusters-kubeconfig": "ValidatingAdmissionPolicy",
        "read-kube-system-secrets": "RBAC",
    }
    assert {attack: named.get(attack) for attack in expected} == expected


def test_every_monitor_that_scrapes_any_namespace_keeps_its_series_by_name() -> None:
    """A tenant pod that looks like a scrape target (a predictor's labels) may export anything: a monitor reading
    every namespace keeps only the series it is for, by ``__name__``, and never the target's own labels."""
    plan = ProdPlans()
    any_namespace: list[tuple[str, dict[str, Any]]] = []
    for region in plan.cells:
        for resource in plan.region_resources(region):
            if resource.type.rsplit(":", 1)[-1] not in ("PodMonitor", "ServiceMonitor"):
                continue
            spec = resource.inputs["spec"]
            if spec.get("namespaceSelector", {}).get("any") is True:
                for endpoint in spec.get("podMetricsEndpoints") or spec.get("endpoints") or []:
                    any_namespace.append((f"{region}/{resource.inputs['metadata']['name']}", endpoint))
    assert sorted({name for name, _ in any_namespace}) == ["fra1/kserve-predictors", "iad1/kserve-predictors"]
    for name, endpoint in any_namespace:
        keeps = [r for r in endpoint["metricRelabelings"] if r.get("action") == "keep"]
        assert [r["sourceLabels"] for r in keeps] == [["__name__"]], name
        assert endpoint.get("honorLabels", False) is False, name
