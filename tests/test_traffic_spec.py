"""Traffic in: LB IPAM pools, their announcement, public VM addresses and the endpoint Gateway, as config (exact
error lines) and as rendered objects (values, edges), from the prod regions (fra1: BGP, iad1: L2, per-tenant
Gateways)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucell.components.cilium import announcement_values, max_load_balancers
from gpucell.components.gateway import exposed_endpoints
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.traffic import parse_block
from tests.conftest import cell_cilium_values, prod_regions

PROD: dict[str, Any] = prod_regions()
F = "regions.fra1"
ACME = f"{F}.tenants.acme"


def fra1(**changes: Any) -> dict[str, Any]:
    """prod's fra1 with ``changes`` set at dotted paths (``loadBalancer.pools.x``)."""
    config = copy.deepcopy(PROD["fra1"])
    for path, value in changes.items():
        node = config
        *parents, last = path.split("__")
        for key in parents:
            node = node[key]
        node[last] = value
    return config


def errors(config: dict[str, Any]) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"fra1": config}})
    except ConfigError as exc:
        return exc.lines
    return []


def test_prod_regions_are_valid() -> None:
    assert errors(PROD["fra1"]) == []
    assert errors(PROD["iad1"]) == []


def test_blocks_are_cidrs_or_ranges() -> None:
    assert parse_block("203.0.113.16/28").manifest() == {"cidr": "203.0.113.16/28"}
    block = parse_block("10.120.3.200-10.120.3.239")
    assert block.manifest() == {"start": "10.120.3.200", "stop": "10.120.3.239"}
    assert [str(n) for n in block.networks()] == ["10.120.3.200/29", "10.120.3.208/28", "10.120.3.224/28"]
    config = fra1(loadBalancer__pools__platform={"blocks": ["203.0.113.9/30"]})
    assert errors(config) == [
        f"{F}.loadBalancer.pools.platform.blocks[0]: '203.0.113.9/30' is not an address block; give a CIDR such as "
        "203.0.113.16/28 or a range such as 203.0.113.10-203.0.113.20 (IPv4)"
    ]
    config = fra1(loadBalancer__pools__platform={"blocks": ["203.0.113.20-203.0.113.10"]})
    assert errors(config) == [
        f"{F}.loadBalancer.pools.platform.blocks[0]: '203.0.113.20-203.0.113.10' is a range that ends before it "
        "starts; give a CIDR such as 203.0.113.16/28 or a range such as 203.0.113.10-203.0.113.20 (IPv4)"
    ]


def test_overlapping_pools_are_refused() -> None:
    config = fra1(loadBalancer__pools__platform={"blocks": ["203.0.113.24-203.0.113.30"]}, gateway__address=None)
    assert errors(config) == [
        f"{F}.loadBalancer.pools.platform.blocks[0]: '203.0.113.24-203.0.113.30' overlaps "
        "loadBalancer.pools.acme-public.blocks[0] 203.0.113.16/28; an address belongs to one pool"
    ]


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            "10.111.200.0/24",
            "'10.111.200.0/24' overlaps network.podCidr 10.111.0.0/16; a pool must lie outside the "
            "cell's pod and service networks",
        ),
        (
            "10.112.0.0/28",
            "'10.112.0.0/28' overlaps network.serviceCidr 10.112.0.0/16; a pool must lie outside the "
            "cell's pod and service networks",
        ),
        (
            "10.110.3.0/28",
            "'10.110.3.0/28' overlaps network.nodeCidr 10.110.0.0/22; with announce bgp a pool must be "
            "routed apart from the node network (use a block of its own)",
        ),
    ],
)
def test_pools_stay_out_of_the_cells_networks(block: str, message: str) -> None:
    assert errors(fra1(loadBalancer__pools__platform={"blocks": [block]}, gateway__address=None)) == [
        f"{F}.loadBalancer.pools.platform.blocks[0]: {message}"
    ]


def test_an_l2_pool_in_the_node_network_keeps_clear_of_its_hosts() -> None:
    iad1 = copy.deepcopy(PROD["iad1"])
    iad1["loadBalancer"]["pools"]["platform"]["blocks"] = ["10.120.0.8/29"]
    try:
        StackSpec.model_validate({"regions": {"iad1": iad1}})
        lines: list[str] = []
    except ConfigError as exc:
        lines = exc.lines
    assert lines == [
        "regions.iad1.loadBalancer.pools.platform.blocks[0]: '10.120.0.8/29' holds 10.120.0.10, "
        "network.apiEndpoint; leave it out of the pool"
    ]


def test_announcements_name_their_settings_and_pools() -> None:
    lb = copy.deepcopy(PROD["fra1"]["loadBalancer"])
    lb["announce"] = "l2"
    assert errors(fra1(loadBalancer=lb)) == [f"{F}.loadBalancer.l2: is required with announce: l2"]
    lb = copy.deepcopy(PROD["fra1"]["loadBalancer"])
    lb["bgp"]["nodePools"] = ["servers", "gpu"]
    assert errors(fra1(loadBalancer=lb)) == [
        f"{F}.loadBalancer.bgp.nodePools[1]: 'gpu' is not a node pool; pools: servers, h100-vm, h200-mig, h200, "
        "l40s-vgpu, l4-dra, cpu"
    ]


def test_vm_addresses_come_from_the_tenants_pools() -> None:
    desk = ("tenants", "acme", "virtualMachines", "desk-01", "sshService")
    config = fra1()
    config[desk[0]][desk[1]][desk[2]][desk[3]][desk[4]]["address"] = "203.0.113.40"
    assert errors(config) == [
        f"{ACME}.virtualMachines.desk-01.sshService.address: '203.0.113.40' is outside "
        "loadBalancer.pools.acme-public (203.0.113.16/28)"
    ]
    config[desk[0]][desk[1]][desk[2]][desk[3]][desk[4]]["address"] = "203.0.113.9"
    config[desk[0]][desk[1]][desk[2]][desk[3]][desk[4]]["pool"] = "platform"
    assert errors(config) == [
        f"{ACME}.virtualMachines.desk-01.sshService.pool: 'platform' is not a pool that lists tenant acme; its "
        "pools: acme-public (add the tenant to a pool's tenants)"
    ]


def test_two_vms_never_get_one_fixed_address() -> None:
    config = fra1()
    lb = {"type": "LoadBalancer", "address": "203.0.113.20", "allowFromCidrs": ["198.51.100.0/24"]}
    config["tenants"]["acme"]["virtualMachines"]["cad-01"]["sshService"] = lb
    config["tenants"]["acme"]["quota"]["loadBalancers"] = 2
    assert errors(config) == [
        f"{ACME}.virtualMachines.cad-01.sshService.address: '203.0.113.20' is already the address of "
        "tenants.acme.virtualMachines.desk-01; two Services never share an address"
    ]


def test_load_balancer_fields_need_type_load_balancer() -> None:
    config = fra1()
    config["tenants"]["acme"]["virtualMachines"]["cad-01"]["sshService"] = {
        "type": "ClusterIP",
        "address": "203.0.113.21",
    }
    assert errors(config) == [
        f"{ACME}.virtualMachines.cad-01.sshService.address: only applies to type LoadBalancer (type is ClusterIP)"
    ]


def test_endpoint_hosts_lie_under_the_domain_and_are_unique() -> None:
    config = fra1()
    config["tenants"]["globex"]["modelEndpoints"]["embedder"]["expose"] = {"host": "embed.globex.example.net"}
    assert errors(config) == [
        f"{F}.tenants.globex.modelEndpoints.embedder.expose.host: 'embed.globex.example.net' is outside "
        "gateway.domain models.fra1.gpucell.example; use a name ending in .models.fra1.gpucell.example"
    ]
    config["tenants"]["globex"]["modelEndpoints"]["embedder"]["expose"] = {
        "host": "llama-8b.acme.models.fra1.gpucell.example"
    }
    assert errors(config) == [
        f"{F}.tenants.globex.modelEndpoints.embedder.expose.host: 'llama-8b.acme.models.fra1.gpucell.example' is "
        "already the host of tenants.acme.modelEndpoints.llama-8b; each endpoint needs a host name of its own"
    ]


def test_the_gateway_address_lies_in_its_pool() -> None:
    assert errors(fra1(gateway__address="203.0.113.21")) == [
        f"{F}.gateway.address: '203.0.113.21' is outside loadBalancer.pools.platform (203.0.113.8/30)"
    ]
    assert errors(fra1(gateway__pool="public")) == [
        f"{F}.gateway.pool: 'public' is not a loadBalancer pool; pools: acme-public, platform"
    ]


def test_exposed_endpoints_need_a_gateway() -> None:
    config = fra1()
    del config["gateway"]
    assert errors(config) == [
        f"{ACME}.modelEndpoints.llama-8b.expose: needs the region's gateway (domain, pool, issuer) to serve the "
        "endpoint from"
    ]


def test_cilium_values_enable_what_the_announcement_needs() -> None:
    fra = CellSpec.model_validate(PROD["fra1"])
    values = cell_cilium_values(fra)
    assert values["bgpControlPlane"] == {"enabled": True}
    assert values["gatewayAPI"] == {"enabled": True}
    assert "l2announcements" not in values
    assert "k8sClientRateLimit" not in values
    iad = CellSpec.model_validate(PROD["iad1"])
    # acme's quota of 1, globex's 1 (its tenant cluster's API), one Gateway per tenant
    assert max_load_balancers(iad.tenants, iad.gateway) == 1 + 1 + 2
    assert cell_cilium_values(iad)["l2announcements"] == {"enabled": True}
    assert cell_cilium_values(iad)["k8sClientRateLimit"] == {"qps": 11, "burst": 22}
    assert announcement_values(iad.load_balancer, 100)["k8sClientRateLimit"] == {"qps": 30, "burst": 60}  # type: ignore[arg-type]


def test_exposed_endpoints_of_prod() -> None:
    routes = exposed_endpoints(CellSpec.model_validate(PROD["iad1"]))
    assert [(r.host, r.gateway, r.listener, r.secret_name) for r in routes] == [
        ("llama-8b.acme.models.iad1.gpucell.example", "gpucell-acme", "acme-llama-8b", "acme-llama-8b-tls"),
        ("embedder.globex.models.iad1.gpucell.example", "gpucell-globex", "globex-embedder", "globex-embedder-tls"),
    ]


# -- day 2 ----------------------------------------------------------------------------------------------------------
def changes_between(old: dict[str, Any], new: dict[str, Any], region: str = "fra1") -> list[str]:
    from gpucell.day2.disruption import compare, fingerprint

    return [
        c.refusal()
        for c in compare(fingerprint(CellSpec.model_validate(old)), fingerprint(CellSpec.model_validate(new)), region)
    ]


def test_a_vms_public_address_moving_is_disruptive() -> None:
    from gpucell.day2.disruption import fingerprint

    assert fingerprint(CellSpec.model_validate(PROD["fra1"]))["publicAddresses"] == {
        "tenant-acme/desk-01": "203.0.113.20"
    }
    assert fingerprint(CellSpec.model_validate(PROD["iad1"]))["publicAddresses"] == {
        "tenant-acme/desk-01": "pool shared"
    }
    moved = fra1()
    moved["tenants"]["acme"]["virtualMachines"]["desk-01"]["sshService"]["address"] = "203.0.113.21"
    assert changes_between(PROD["fra1"], moved) == [
        f"{ACME}.virtualMachines.desk-01.sshService.address: tenant-acme/desk-01: 203.0.113.20 -> 203.0.113.21 is a "
        "disruptive change (publicAddress: the VM's public address moves (or goes away): Cilium LB IPAM gives its "
        "Service the new address, open connections to the old one are dropped and clients, DNS records and firewall "
        "rules must follow); to apply it, add {change: publicAddress, region: fra1, subject: tenant-acme/desk-01, "
        'reason: "..."} to gpucell:acknowledge'
    ]
    grown = fra1()
    grown["loadBalancer"]["pools"]["acme-public"]["blocks"].append("203.0.113.64/28")
    assert changes_between(PROD["fra1"], grown) == []  # a pool that grows converges


def test_switching_the_announcement_is_disruptive() -> None:
    switched = fra1()
    lb = switched["loadBalancer"]
    lb["announce"], lb["l2"] = "l2", {"interfaces": ["^bond0$"]}
    del lb["bgp"]
    assert [line.split(" is a disruptive change (")[0] for line in changes_between(PROD["fra1"], switched)] == [
        f"{F}.loadBalancer.announce: bgp -> l2"
    ]


def test_regions_without_load_balancer_keep_their_fingerprint() -> None:
    from gpucell.day2.disruption import fingerprint

    config = fra1()
    del config["loadBalancer"], config["gateway"]
    for tenant in config["tenants"].values():
        for vm in tenant["virtualMachines"].values():
            vm.pop("sshService", None)
        for endpoint in tenant["modelEndpoints"].values():
            endpoint.pop("expose", None)
    assert "publicAddresses" not in fingerprint(CellSpec.model_validate(config))


def test_the_pools_a_load_balancer_vm_runs_on_announce() -> None:
    lb = copy.deepcopy(PROD["fra1"]["loadBalancer"])
    lb["bgp"]["nodePools"] = ["servers", "cpu", "h100-vm"]
    assert errors(fra1(loadBalancer=lb)) == [
        f"{ACME}.virtualMachines.desk-01.sshService.type: 'LoadBalancer': the VM may run on pool l40s-vgpu, whose "
        "nodes do not announce (loadBalancer.bgp.nodePools: servers, cpu, h100-vm); only the node running the VM "
        "announces its address, so add the pool there"
    ]
    lb["bgp"]["nodePools"].append("l40s-vgpu")
    assert errors(fra1(loadBalancer=lb)) == []
