"""Traffic in, as the prod-fra1 and prod-iad1 plans render it: LB IPAM pools and their announcement, a VM behind a
LoadBalancer Service, endpoints behind the Gateway (values, ordering edges), and the CRD check catching a wrong
field."""

from __future__ import annotations

from typing import Any

from gpucell.engine.mock_engine import Registration
from gpucell.stacks.conformance.objects import checker_for
from tests.conftest import UPSTREAM, prod_plan_of


def named(name: str) -> Registration:
    """The registration ``name`` (``fra1-...``) of its region's production stack."""
    return prod_plan_of(name.split("-", 1)[0]).result.named(name)


def spec(name: str) -> Any:
    return named(name).inputs["spec"]


def depends_on(name: str, other: str) -> bool:
    return named(other).urn in named(name).dependencies


def test_pools_admit_their_tenants_services_only() -> None:
    assert spec("fra1-load-balancer-pool-acme-public") == {
        "allowFirstLastIPs": "Yes",
        "blocks": [{"cidr": "203.0.113.16/28"}],
        "serviceSelector": {
            "matchLabels": {"gpucell.io/lb-pool": "acme-public"},
            "matchExpressions": [
                {"key": "io.kubernetes.service.namespace", "operator": "In", "values": ["tenant-acme"]}
            ],
        },
    }
    shared = spec("iad1-load-balancer-pool-shared")
    assert shared["blocks"] == [{"start": "10.120.3.200", "stop": "10.120.3.239"}]
    assert shared["serviceSelector"]["matchExpressions"][0]["values"] == ["tenant-acme", "tenant-globex"]
    assert spec("fra1-load-balancer-pool-platform")["serviceSelector"]["matchExpressions"][0]["values"] == [
        "gpucell-gateway"
    ]
    assert depends_on("fra1-load-balancer-pool-acme-public", "fra1-cilium-cilium")


def test_bgp_in_fra1_and_l2_in_iad1() -> None:
    cluster = spec("fra1-load-balancer-bgp-cluster")
    assert cluster == {
        "bgpInstances": [
            {
                "name": "gpucell",
                "localASN": 65110,
                "peers": [
                    {
                        "name": "tor-a",
                        "peerAddress": "10.110.0.1",
                        "peerASN": 65100,
                        "peerConfigRef": {"name": "gpucell"},
                    },
                    {
                        "name": "tor-b",
                        "peerAddress": "10.110.0.2",
                        "peerASN": 65100,
                        "peerConfigRef": {"name": "gpucell"},
                    },
                ],
            }
        ]
    }
    assert spec("fra1-load-balancer-bgp-peer")["families"] == [
        {"afi": "ipv4", "safi": "unicast", "advertisements": {"matchLabels": {"gpucell.io/advertise": "load-balancer"}}}
    ]
    assert spec("fra1-load-balancer-bgp-advertisement")["advertisements"][0]["service"] == {
        "addresses": ["LoadBalancerIP"]
    }
    assert spec("iad1-load-balancer-l2") == {"loadBalancerIPs": True, "externalIPs": False, "interfaces": ["^bond0$"]}
    values = named("fra1-cilium-cilium").inputs["values"]
    assert (values["bgpControlPlane"], values["gatewayAPI"]) == ({"enabled": True}, {"enabled": True})
    iad = named("iad1-cilium-cilium").inputs["values"]
    assert iad["l2announcements"] == {"enabled": True}
    assert iad["k8sClientRateLimit"] == {"qps": 11, "burst": 22}


def test_the_vm_is_behind_a_load_balancer_limited_to_its_cidrs() -> None:
    service = named("fra1-acme-desk-01-ssh").inputs
    assert service["metadata"]["annotations"] == {"lbipam.cilium.io/ips": "203.0.113.20"}
    assert service["metadata"]["labels"]["gpucell.io/lb-pool"] == "acme-public"
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    assert service["spec"]["allocateLoadBalancerNodePorts"] is False
    assert service["spec"]["externalTrafficPolicy"] == "Local"
    assert [p["port"] for p in service["spec"]["ports"]] == [22, 8443]
    policy = spec("fra1-acme-desk-01-ssh-policy")
    assert policy["ingress"] == [
        {
            "fromCIDRSet": [{"cidr": "198.51.100.0/24"}],
            "toPorts": [{"ports": [{"port": "22", "protocol": "TCP"}, {"port": "8443", "protocol": "TCP"}]}],
        }
    ]
    # iad1's desk-01 takes any address of acme's first pool
    iad = named("iad1-acme-desk-01-ssh").inputs
    assert "annotations" not in iad["metadata"]
    assert iad["metadata"]["labels"]["gpucell.io/lb-pool"] == "shared"
    assert named("fra1-acme-quota").inputs["spec"]["hard"]["services.loadbalancers"] == "1"


def test_endpoints_behind_the_gateway() -> None:
    gateway = spec("fra1-gateway-gateway")
    assert gateway["gatewayClassName"] == "cilium"
    assert gateway["infrastructure"] == {
        "labels": {"gpucell.io/lb-pool": "platform"},
        "annotations": {"lbipam.cilium.io/ips": "203.0.113.9"},
    }
    listeners = {listener["name"]: listener for listener in gateway["listeners"]}
    assert list(listeners) == ["http", "acme-llama-8b", "globex-embedder"]
    assert listeners["acme-llama-8b"]["hostname"] == "llama-8b.acme.models.fra1.gpucell.example"
    assert listeners["acme-llama-8b"]["tls"] == {
        "mode": "Terminate",
        "certificateRefs": [{"kind": "Secret", "name": "acme-llama-8b-tls"}],
    }
    assert listeners["acme-llama-8b"]["allowedRoutes"]["namespaces"]["selector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "tenant-acme"}
    }
    assert spec("fra1-gateway-cert-acme-llama-8b") == {
        "secretName": "acme-llama-8b-tls",
        "dnsNames": ["llama-8b.acme.models.fra1.gpucell.example"],
        "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "gpucell-gateway"},
    }
    issuer = spec("fra1-gateway-issuer")["acme"]
    assert issuer["solvers"] == [
        {
            "http01": {
                "gatewayHTTPRoute": {
                    "parentRefs": [
                        {
                            "group": "gateway.networking.k8s.io",
                            "kind": "Gateway",
                            "name": "gpucell",
                            "namespace": "gpucell-gateway",
                            "sectionName": "http",
                        }
                    ]
                }
            }
        }
    ]
    route = spec("fra1-acme-llama-8b-route")
    assert route["parentRefs"][0]["sectionName"] == "acme-llama-8b"
    assert route["rules"] == [{"backendRefs": [{"name": "llama-8b-predictor", "port": 80}]}]
    assert spec("fra1-acme-llama-8b-gateway-policy")["ingress"] == [
        {"fromEntities": ["ingress"], "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}
    ]
    assert named("fra1-cert-manager-cert-manager").inputs["values"]["config"]["enableGatewayAPI"] is True
    # iad1: one Gateway per tenant, certificates from the operator's CA, no HTTP listener
    assert [listener["name"] for listener in spec("iad1-gateway-gateway-acme")["listeners"]] == ["acme-llama-8b"]
    assert spec("iad1-gateway-issuer") == {"ca": {"secretName": "gpucell-ca"}}
    assert "config" not in named("iad1-cert-manager-cert-manager").inputs["values"]


def test_ordering_edges() -> None:
    assert depends_on("fra1-cilium-cilium", "fra1-gateway-api-crds")  # the CRDs before Cilium's operator starts
    assert named("fra1-gateway-api-crds").options.get("retainOnDelete") is True
    assert named("fra1-gateway-api-crds").inputs["file"] == (
        "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.5.1/standard-install.yaml"
    )
    assert depends_on("fra1-gateway-gateway", "fra1-cert-manager-cert-manager")
    assert depends_on("fra1-gateway-gateway", "fra1-load-balancer-pool-platform")
    assert depends_on("fra1-acme-llama-8b-route", "fra1-gateway-gateway")


def test_the_crds_catch_a_wrong_field() -> None:
    checker = checker_for(UPSTREAM, "1.34")
    gateway = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "g", "namespace": "n"},
        "spec": {
            "gatewayClassName": "cilium",
            "listeners": [{"name": "h", "port": 443, "protocol": "HTTPS", "hostnme": "x.example"}],
        },
    }
    assert checker.source_of("gateway.networking.k8s.io/v1", "Gateway") == (
        "gateway-api/gateway.networking.k8s.io_gateways.yaml"
    )
    assert [(v.path, v.message) for v in checker.check(gateway)] == [
        ("spec.listeners[0]", "Additional properties are not allowed ('hostnme' was unexpected)")
    ]
    pool = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumLoadBalancerIPPool",
        "metadata": {"name": "p"},
        "spec": {"blocks": [{"cidr": "203.0.113.0/28"}], "allowFirstLastIPs": "yes"},
    }
    assert [v.path for v in checker.check(pool)] == ["spec.allowFirstLastIPs"]
    certificate = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "c"},
        "spec": {"secretName": "s", "issuerRef": {"name": "i"}, "dnsName": ["x"]},
    }
    assert checker.source_of("cert-manager.io/v1", "Certificate") == (
        "cert-manager/crd-cert-manager.io_certificates.yaml"
    )
    assert [v.path for v in checker.check(certificate)] == ["spec"]
