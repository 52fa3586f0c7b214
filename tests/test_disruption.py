"""Fingerprints of a cell's disruptive settings, the rule that compares two of them, and acknowledgements."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucell.day2.disruption import (
    Acknowledgement,
    Change,
    StackAcknowledgements,
    compare,
    fingerprint,
    judge,
    release_line,
    removed_regions,
)
from gpucell.errors import ConfigError
from tests.conftest import cell, minimal_cell_config, prod_regions


def fp(config: dict[str, Any] | None = None) -> dict[str, Any]:
    return fingerprint(cell(config or minimal_cell_config()))


def changed(edit: Any) -> list[str]:
    """Refusal lines for ``edit`` applied to the minimal cell (deployed = unedited)."""
    config = minimal_cell_config()
    edit(config)
    return [c.refusal() for c in compare(fp(), fp(config), "lab")]


def test_fingerprint_of_the_minimal_cell() -> None:
    assert fp() == {
        "version": 1,
        "network": {
            "podCidr": "10.42.0.0/16",
            "podCidrMaskSize": 24,
            "serviceCidr": "10.43.0.0/16",
            "clusterDns": "10.43.0.10",
            "apiVip": None,
        },
        "cilium": {"kubeProxyReplacement": "true", "routing": {}, "ipamMode": "cluster-pool"},
        "nodes": {
            "lab-srv-1": {
                "pool": "servers",
                "role": "server",
                "address": "10.20.0.11",
                "gpuMode": None,
                "migConfig": None,
                "vgpuProfile": None,
                "removalPolicy": "protect",
            },
            "lab-gpu-1": {
                "pool": "l40s",
                "role": "gpu",
                "address": "10.20.0.21",
                "gpuMode": "container",
                "migConfig": None,
                "vgpuProfile": None,
                "removalPolicy": "protect",
            },
            "lab-cpu-1": {
                "pool": "cpu",
                "role": "cpu",
                "address": "10.20.0.31",
                "gpuMode": None,
                "migConfig": None,
                "vgpuProfile": None,
                "removalPolicy": "protect",
            },
        },
        "tenants": {},
        "storage": {"defaultClass": "local-path", "volumes": {}},
        "versions": {
            "k3s": "v1.34.2+k3s1",
            "kubevirt": "v1.9.0",
            "charts": {"cilium": "1.20.0", "certManager": "v1.21.1", "gpuOperator": "v26.7.0", "kserve": "v0.20.0"},
        },
    }


def test_nothing_is_disruptive_on_a_first_deploy_or_without_change() -> None:
    assert compare(None, fp(), "lab") == []
    assert compare(fp(), fp(), "lab") == []


def test_pod_cidr_change_is_refused_with_the_key_and_the_acknowledgement() -> None:
    lines = changed(lambda c: c["network"].update(podCidr="10.52.0.0/16"))
    assert lines == [
        "regions.lab.network.podCidr: 10.42.0.0/16 -> 10.52.0.0/16 is a disruptive change (podCidr: every pod and "
        "VM keeps its address from the old range until it is recreated, and gpucell does not migrate the pod "
        "ranges Cilium already gave the nodes; plan a restart of every workload, and update network policies and "
        'firewalls written for the old range); to apply it, add {change: podCidr, region: lab, reason: "..."} to '
        "gpucell:acknowledge"
    ]


def kinds(edit: Any) -> list[tuple[str, str | None, str, str, str]]:
    config = minimal_cell_config()
    edit(config)
    return [(c.change.value, c.subject, c.key, c.old, c.new) for c in compare(fp(), fp(config), "lab")]


def test_network_and_cilium_datapath_changes() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["network"].update(serviceCidr="10.53.0.0/16", clusterDns="10.53.0.10", podCidrMaskSize=25)
        c["cilium"] = {
            "values": {
                "kubeProxyReplacement": False,
                "routingMode": "native",
                "ipv4NativeRoutingCIDR": "10.42.0.0/16",
                "ipam": {"mode": "kubernetes"},
            }
        }

    assert kinds(edit) == [
        ("podCidrMaskSize", None, "regions.lab.network.podCidrMaskSize", "24", "25"),
        ("serviceCidr", None, "regions.lab.network.serviceCidr", "10.43.0.0/16", "10.53.0.0/16"),
        ("clusterDns", None, "regions.lab.network.clusterDns", "10.43.0.10", "10.53.0.10"),
        ("kubeProxyReplacement", None, "regions.lab.cilium.values.kubeProxyReplacement", "true", "false"),
        (
            "ciliumRouting",
            None,
            "regions.lab.cilium.values.routingMode",
            "chart defaults",
            "ipv4NativeRoutingCIDR=10.42.0.0/16, routingMode=native",
        ),
        ("ciliumIpam", None, "regions.lab.cilium.values.ipam.mode", "cluster-pool", "kubernetes"),
    ]


def test_kube_proxy_replacement_as_a_string_is_no_change() -> None:
    assert kinds(lambda c: c.update(cilium={"values": {"kubeProxyReplacement": "true"}})) == []


def test_gpu_mode_mig_and_vgpu_changes_per_node() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["nodePools"]["l40s"].update(gpuMode="vm-vgpu", vgpuProfile="L40S-12Q")
        c["gpuOperator"] = {
            "vgpuDriverImage": {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}
        }

    assert kinds(edit) == [
        ("gpuMode", "lab-gpu-1", "regions.lab.nodePools.l40s.gpuMode", "container", "vm-vgpu"),
        ("vgpuProfile", "lab-gpu-1", "regions.lab.nodePools.l40s.vgpuProfile", "none", "L40S-12Q"),
    ]


def test_mig_layout_change() -> None:
    config = minimal_cell_config()
    config["nodePools"]["l40s"].update(gpuModel="H100-SXM5-80GB", migConfig="all-1g.10gb")
    after = copy.deepcopy(config)
    after["nodePools"]["l40s"]["migConfig"] = "all-balanced"
    assert [(c.change, c.old, c.new) for c in compare(fp(config), fp(after), "lab")] == [
        (Change.MIG_CONFIG, "all-1g.10gb", "all-balanced")
    ]


def test_removing_a_server_or_a_worker_and_moving_a_host() -> None:
    config = minimal_cell_config()
    config["nodePools"]["servers"]["hosts"] += [
        {"name": "lab-srv-2", "address": "10.20.0.12"},
        {"name": "lab-srv-3", "address": "10.20.0.13"},
    ]
    config["nodePools"]["cpu"]["hosts"].append({"name": "lab-cpu-2", "address": "10.20.0.32"})
    config["network"]["apiEndpoint"] = "10.20.0.10"
    config["etcd"] = {"initServer": "lab-srv-1"}
    after = copy.deepcopy(config)
    after["nodePools"]["servers"]["hosts"][2] = {"name": "lab-srv-4", "address": "10.20.0.14"}
    after["nodePools"]["l40s"]["hosts"] = [{"name": "lab-cpu-1", "address": "10.20.0.31"}]
    after["nodePools"]["cpu"]["hosts"] = [{"name": "lab-gpu-1", "address": "10.20.0.21"}]
    lines = [(c.change.value, c.subject, c.key, c.summary()) for c in compare(fp(config), fp(after), "lab")]
    assert lines == [
        ("serverRemoved", "lab-srv-3", "regions.lab.nodePools.servers.hosts", "server lab-srv-3 removed"),
        ("nodeRole", "lab-gpu-1", "regions.lab.nodePools.cpu.hosts", "lab-gpu-1: l40s (gpu) -> cpu (cpu)"),
        ("gpuMode", "lab-gpu-1", "regions.lab.nodePools.cpu.gpuMode", "lab-gpu-1: container -> none"),
        ("nodeRole", "lab-cpu-1", "regions.lab.nodePools.l40s.hosts", "lab-cpu-1: cpu (cpu) -> l40s (gpu)"),
        ("gpuMode", "lab-cpu-1", "regions.lab.nodePools.l40s.gpuMode", "lab-cpu-1: none -> container"),
        ("nodeRemoved", "lab-cpu-2", "regions.lab.nodePools.cpu.hosts", "cpu lab-cpu-2 removed"),
    ]


def test_a_server_address_change_is_disruptive_and_an_agent_address_change_is_not() -> None:
    def move(c: dict[str, Any]) -> None:
        c["nodePools"]["servers"]["hosts"][0]["address"] = "10.20.0.12"
        c["nodePools"]["cpu"]["hosts"][0]["address"] = "10.20.0.32"

    assert changed(move) == [
        "regions.lab.nodePools.servers.hosts: lab-srv-1: 10.20.0.11 -> 10.20.0.12 is a disruptive change "
        "(serverAddress: the server's etcd member keeps its old peer address: k3s restarts with the new node-ip, but "
        "an etcd member's address cannot change in place (k3s maintainers, rancher/rke2#5651, k3s-io/k3s#6524), so "
        "the member stays unreachable and the cluster loses a vote; remove the server in one pulumi up "
        "(serverRemoved) and add it again with its new address in the next); to apply it, add "
        '{change: serverAddress, region: lab, subject: lab-srv-1, reason: "..."} to gpucell:acknowledge'
    ]


def test_a_fingerprint_without_addresses_counts_them_as_unchanged() -> None:
    """Cells deployed before addresses were fingerprinted: no serverAddress until one is recorded."""
    deployed = fp()
    for entry in deployed["nodes"].values():
        del entry["address"]
    config = minimal_cell_config()
    config["nodePools"]["servers"]["hosts"][0]["address"] = "10.20.0.12"
    assert compare(deployed, fp(config), "lab") == []


def test_storage_class_of_existing_volumes(cell_config: dict[str, Any]) -> None:
    cell_config["tenants"] = {
        "acme": {
            "quota": {"cpuMillicores": 8000, "memoryGib": 64, "storageGib": 500},
            "notebooks": {"nb": {"cpuMillicores": 1000, "memoryGib": 4, "homeGib": 10}},
        }
    }
    after = copy.deepcopy(cell_config)
    after["tenants"]["acme"]["notebooks"]["nb"]["storageClass"] = "fast"
    after["storage"] = {"backend": "longhorn", "replicas": 3, "otherClasses": ["fast"]}
    assert [(c.change.value, c.subject, c.key, c.old, c.new) for c in compare(fp(cell_config), fp(after), "lab")] == [
        ("storageClass", "default", "regions.lab.storage.backend", "local-path", "longhorn"),
        (
            "storageClass",
            "tenant-acme/home-nb-0",
            "regions.lab.tenants.acme.notebooks.nb.storageClass",
            "default (longhorn)",
            "fast",
        ),
    ]


@pytest.mark.parametrize(
    ("old", "new", "disruptive"),
    [
        ("v1.34.2+k3s1", "v1.35.0+k3s1", False),
        ("v1.34.2+k3s1", "v1.34.5+k3s2", False),
        ("v1.34.2+k3s1", "v1.36.1+k3s1", True),
        ("v1.34.2+k3s1", "v1.33.9+k3s1", True),
    ],
)
def test_k3s_minor_jump(old: str, new: str, disruptive: bool) -> None:
    before, after = minimal_cell_config(), minimal_cell_config()
    before["versions"], after["versions"] = {"k3s": old}, {"k3s": new}
    for config, version in ((before, old), (after, new)):  # a reviewed installer for every release but the default
        if version != "v1.34.2+k3s1":
            config["k3s"] = {"installerSha256": "0" * 64}
    found = [(c.change, c.old, c.new) for c in compare(fp(before), fp(after), "lab")]
    assert found == ([(Change.K3S_MINOR, old, new)] if disruptive else [])


def test_chart_major_bumps_count_minor_releases_of_0x() -> None:
    assert release_line("1.20.0") == (1,)
    assert release_line("v0.20.0") == (0, 20)
    assert release_line("v26.7.0") == (26,)
    assert kinds(lambda c: c.update(versions={"cilium": "2.0.0", "kserve": "v0.21.0", "certManager": "v1.22.0"})) == [
        ("chartMajor", "cilium", "regions.lab.versions.cilium", "1.20.0", "2.0.0"),
        ("chartMajor", "kserve", "regions.lab.versions.kserve", "v0.20.0", "v0.21.0"),
    ]


def test_removed_region() -> None:
    [change] = removed_regions(["fra1", "iad1"], ["iad1"])
    assert change.refusal().startswith(
        "regions.fra1: region fra1 removed is a disruptive change (regionRemoved: the whole cell is destroyed"
    )
    assert change.acknowledgement() == '{change: regionRemoved, region: fra1, reason: "..."}'


def ack(**entry: Any) -> Acknowledgement:
    return StackAcknowledgements.model_validate({"acknowledge": [{"reason": "CHG-1", **entry}]}).acknowledge[0]


def test_acknowledgements_match_by_kind_region_and_subject() -> None:
    config = minimal_cell_config()
    config["nodePools"]["l40s"]["hosts"].append({"name": "lab-gpu-2", "address": "10.20.0.22"})
    after = copy.deepcopy(config)
    after["nodePools"]["l40s"]["gpuMode"] = "vm-passthrough"
    changes = compare(fp(config), fp(after), "lab")
    one = judge(changes, [ack(change="gpuMode", region="lab", subject="lab-gpu-1")], ["lab"])
    assert [c.subject for c in one.refused] == ["lab-gpu-2"]
    both = judge(changes, [ack(change="gpuMode", region="lab")], ["lab"])
    assert (both.refused, both.stale, len(both.acknowledged)) == ([], [], 2)


def test_stale_acknowledgements_only_where_the_deployment_is_known() -> None:
    entries = [ack(change="podCidr", region="lab"), ack(change="podCidr", region="new")]
    judged = judge([], entries, ["lab"])
    assert judged.stale == [(0, entries[0])]
    assert judge([], entries, []).stale == []


@pytest.mark.parametrize(
    ("entry", "line"),
    [
        (
            {"change": "podCIDR", "region": "lab", "reason": "x"},
            "acknowledge[0].change: 'podCIDR' is not one of podCidr, podCidrMaskSize, serviceCidr, clusterDns, "
            "kubeProxyReplacement, ciliumRouting, ciliumIpam, gpuMode, migConfig, vgpuProfile, nodeRole, "
            "serverAddress, "
            "serverRemoved, "
            "nodeRemoved, dataDeleted, storageClass, k3sMinor, chartMajor, metricsStorage, regionRemoved, "
            "publicAddress, "
            "loadBalancerAnnounce, instancetypeResized, vmFirmware, tenantClusterVersion, loadBalancerPool, "
            "gatewayAddress, tenantClusterApiAddress, metricsRetention, apiVip, endpointHpaToKeda, endpointKedaToHpa, "
            "workloadIsolation, fabric, fabricVlan, longhornVolumeSetting",
        ),
        (
            {"change": "tenantClusterVersion", "region": "lab", "reason": "x"},
            "acknowledge[0].change: 'tenantClusterVersion' cannot be acknowledged: Cluster API's KubeadmControlPlane "
            "upgrades a tenant cluster one minor version at a time (its webhook refuses 'cannot update Kubernetes "
            "version', controlplane/kubeadm/webhooks/admission) and kubeadm never downgrades; no acknowledgement "
            "makes it work",
        ),
        (
            {"change": "podCidr", "region": "lab", "reason": "  "},
            "acknowledge[0].reason: '  ' is blank; say why the disruption is acceptable (maintenance window, ticket)",
        ),
        ({"change": "podCidr", "region": "lab"}, "acknowledge[0].reason: required key is missing"),
        (
            {"change": "podCidr", "region": "lab", "reason": "x", "node": "a"},
            "acknowledge[0].node: unknown key; accepted keys are change, region, subject, reason",
        ),
    ],
)
def test_malformed_acknowledgements(entry: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as info:
        StackAcknowledgements.model_validate({"acknowledge": [entry]})
    assert info.value.lines == [line]


# -- issue 18: data deleted, nodes forgotten, servers removed together ----------------------------------------
def _with_tenant(policy: str = "protect") -> dict[str, Any]:
    old = fp()
    old["tenants"] = {"acme": {"namespace": "tenant-acme", "removalPolicy": policy}}
    old["storage"]["volumes"] = {
        "tenant-acme/vm1-root": {
            "storageClass": None,
            "key": "tenants.acme.virtualMachines.vm1.rootDisk.storageClass",
            "owner": "tenants.acme.virtualMachines.vm1",
            "removalPolicy": policy,
        }
    }
    return old


def test_deleting_a_tenant_deletes_data_and_is_disruptive() -> None:
    changes = compare(_with_tenant(), fp(), "lab")
    assert [(c.change, c.subject, c.key, c.old) for c in changes] == [
        (Change.DATA_DELETED, "tenant-acme", "regions.lab.tenants.acme", "namespace tenant-acme"),
        (
            Change.DATA_DELETED,
            "tenant-acme/vm1-root",
            "regions.lab.tenants.acme.virtualMachines.vm1",
            "volume tenant-acme/vm1-root",
        ),
    ]
    assert compare(_with_tenant("retain"), fp(), "lab") == []  # retained: it stays, with its data


def test_removing_a_retained_node_runs_nothing_and_is_not_disruptive() -> None:
    old = fp()
    old["nodes"]["lab-old-1"] = {"pool": "cpu", "role": "cpu", "address": "10.20.0.39", "removalPolicy": "retain"}
    old["nodes"]["lab-old-2"] = {"pool": "cpu", "role": "cpu", "address": "10.20.0.38", "removalPolicy": "delete"}
    assert [(c.change, c.subject) for c in compare(old, fp(), "lab")] == [(Change.NODE_REMOVED, "lab-old-2")]


def test_two_servers_removed_in_one_run_are_refused_whatever_is_acknowledged() -> None:
    from gpucell.day2.disruption import refused_together

    old = fp()
    for name, address in (("lab-srv-2", "10.20.0.12"), ("lab-srv-3", "10.20.0.13")):
        old["nodes"][name] = {"pool": "servers", "role": "server", "address": address, "removalPolicy": "delete"}
    changes = compare(old, fp(), "lab")
    assert refused_together(changes) == [
        "regions.lab.nodePools: removes 2 servers in one run (lab-srv-2, lab-srv-3); remove one server per pulumi "
        "up (keep lab-srv-2 in the config, pulumi up, then remove the next)"
    ]
    assert refused_together(changes[:1]) == []


@pytest.mark.parametrize(
    ("key", "deployed", "previous", "line"),
    [
        (
            "cilium",
            "1.18.4",
            "1.19.3",
            "regions.lab.versions.cilium: 1.18.4 -> 1.20.0 skips Cilium 1.19: its upgrade guide tests consecutive "
            "minor releases only; cilium/cilium#46608: after 1.16 -> 1.19 the agent no longer started on new nodes; "
            "set versions.cilium to the latest 1.19 release first, pulumi up, then 1.20.0",
        ),
        (
            "longhorn",
            "1.10.2",
            "1.11.0",
            "regions.lab.versions.longhorn: 1.10.2 -> 1.12.1 skips Longhorn 1.11: its manager refuses an upgrade that "
            "skips a minor release, and the chart's pre-upgrade hook fails the Helm upgrade (longhorn/longhorn#9569); "
            "set versions.longhorn to the latest 1.11 release first, pulumi up, then 1.12.1",
        ),
        (
            "kubevirt",
            "v1.7.2",
            "v1.8.1",
            "regions.lab.versions.kubevirt: v1.7.2 -> v1.9.0 skips KubeVirt 1.8: updates are supported from the "
            "previous minor release only; the maintainers test N-1 -> N (kubevirt/kubevirt#13783); set "
            "versions.kubevirt to the latest 1.8 release first, pulumi up, then v1.9.0",
        ),
        (
            "k3s",
            "v1.32.9+k3s1",
            "v1.33.5+k3s1",
            "regions.lab.versions.k3s: v1.32.9+k3s1 -> v1.34.2+k3s1 skips k3s 1.33: Kubernetes allows one minor "
            "release between API servers, and k3s's upgrade docs say not to skip intermediate minor releases "
            "(rancher/rke2-docs#132; k3s-io/k3s#9560); set versions.k3s to the latest 1.33 release first, pulumi up, "
            "then v1.34.2+k3s1",
        ),
        (
            "certManager",
            "v1.19.4",
            "v1.20.2",
            "regions.lab.versions.certManager: v1.19.4 -> v1.21.1 skips cert-manager 1.20: its upgrade guide says to "
            "upgrade one minor release at a time, to the latest patch release, each with its own upgrade notes "
            "(cert-manager/website#852); set versions.certManager to the latest 1.20 release first, pulumi up, then "
            "v1.21.1",
        ),
        (
            "clusterApi",
            "v1.10.3",
            "v1.11.0",
            "regions.lab.versions.clusterApi: v1.10.3 -> v1.14.0 skips Cluster API 1.13: it supports upgrades of up "
            "to three minor releases (N-3 -> N) and plans its API removals on that; clusterctl refuses a longer skip "
            "(kubernetes-sigs/cluster-api#12017); set versions.clusterApi to the latest 1.13 release first, pulumi up, "
            "then v1.14.0",
        ),
    ],
)
def test_an_upgrade_that_skips_a_minor_release_is_refused_whatever_is_acknowledged(
    key: str, deployed: str, previous: str, line: str
) -> None:
    from gpucell.day2.disruption import skipped_releases

    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    new = fingerprint(cell(config))
    if key == "clusterApi":  # only a region with tenant clusters installs Cluster API
        new["versions"]["clusterApi"] = "v1.14.0"

    def deployed_at(version: str) -> dict[str, Any]:
        old = copy.deepcopy(new)
        versions = old["versions"]
        (versions if key in ("kubevirt", "clusterApi", "k3s") else versions["charts"])[key] = version
        return old

    assert skipped_releases(deployed_at(deployed), new, "lab") == [line]
    assert skipped_releases(deployed_at(previous), new, "lab") == []  # one minor release: the supported path
    assert skipped_releases(None, new, "lab") == []  # a first deploy


def test_velero_is_a_chart_of_the_cell_with_backups_and_its_major_is_a_chart_major_change() -> None:
    """``backups`` adds the Velero chart to the fingerprint; a deployed chart of another major (the release line of
    12.1.0 is 12) is ``chartMajor``, a minor bump within 12 is not; removing ``backups`` is no chart change (the
    namespace, release and repository password are protected instead, tests/test_backups.py)."""
    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    assert "velero" not in fp(config)["versions"]["charts"]
    config["backups"] = {
        "storage": {"bucket": "lab-backups", "region": "eu-central-1", "credentialsConfigKey": "backupS3Lab"},
        "repositoryPasswordConfigKey": "backupRepoLab",
    }
    new = fp(config)
    assert new["versions"]["charts"]["velero"] == "12.1.0"

    def deployed_at(version: str) -> dict[str, Any]:
        old = copy.deepcopy(new)
        old["versions"]["charts"]["velero"] = version
        return old

    found = [(c.change, c.subject, c.key, c.old, c.new) for c in compare(deployed_at("11.4.0"), new, "lab")]
    assert found == [(Change.CHART_MAJOR, "velero", "regions.lab.versions.velero", "11.4.0", "12.1.0")]
    assert compare(deployed_at("12.0.0"), new, "lab") == []
    without = copy.deepcopy(new)
    del without["versions"]["charts"]["velero"]
    assert compare(new, without, "lab") == []


def iad1() -> dict[str, Any]:
    """The prod stack's iad1 region: an API VIP, a shared pool with a VM whose address Cilium assigns, per-tenant
    Gateways from the platform pool, a tenant cluster with its API on a pool address, model endpoints."""
    regions = prod_regions()
    return copy.deepcopy(regions["iad1"])


def iad1_changes(edit: Any, deployed: Any = None) -> list[tuple[str, str | None, str, str, str]]:
    before, after = iad1(), iad1()
    if deployed is not None:
        deployed(before)
        deployed(after)
    edit(after)
    return [(c.change.value, c.subject, c.key, c.old, c.new) for c in compare(fp(before), fp(after), "iad1")]


def test_shrinking_or_moving_a_pool_with_assigned_addresses_is_disruptive_and_widening_is_not() -> None:
    """cilium/cilium#41458, #40358: desk-01's address is assigned by Cilium from the shared pool."""

    def shrink(c: dict[str, Any]) -> None:
        c["loadBalancer"]["pools"]["shared"]["blocks"] = ["10.120.3.200-10.120.3.229"]

    def widen(c: dict[str, Any]) -> None:
        c["loadBalancer"]["pools"]["shared"]["blocks"] = ["10.120.3.200-10.120.3.239", "10.120.3.192/29"]

    assert iad1_changes(shrink) == [
        (
            "loadBalancerPool",
            "shared",
            "regions.iad1.loadBalancer.pools.shared.blocks",
            "10.120.3.200-10.120.3.239",
            "10.120.3.200-10.120.3.229",
        ),
    ]
    assert iad1_changes(widen) == []


def test_a_pool_whose_services_all_have_fixed_addresses_shrinks_without_disruption() -> None:
    def fixed(c: dict[str, Any]) -> None:
        c["tenants"]["acme"]["virtualMachines"]["desk-01"]["sshService"]["address"] = "10.120.3.201"

    def shrink(c: dict[str, Any]) -> None:
        c["loadBalancer"]["pools"]["shared"]["blocks"] = ["10.120.3.200-10.120.3.229"]

    assert iad1_changes(shrink, deployed=fixed) == []


def test_gateway_address_tenant_cluster_api_address_retention_and_api_vip_are_disruptive() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gateway"].update(address="10.120.3.241", perTenant=False)
        c["tenants"]["globex"]["tenantClusters"]["ml"]["apiServer"]["address"] = "10.120.3.211"
        c["metrics"]["retentionDays"] = 7
        del c["network"]["apiVip"]

    assert iad1_changes(edit) == [
        ("apiVip", None, "regions.iad1.network.apiVip", "arp", "none"),
        ("metricsRetention", None, "regions.iad1.metrics.retentionDays", "30 days", "7 days"),
        (
            "tenantClusterApiAddress",
            "tenant-globex/ml",
            "regions.iad1.tenants.globex.tenantClusters.ml.apiServer",
            "10.120.3.210",
            "10.120.3.211",
        ),
        (
            "gatewayAddress",
            None,
            "regions.iad1.gateway.address",
            "pool platform, one per tenant",
            "10.120.3.241",
        ),
    ]
    assert iad1_changes(lambda c: c["metrics"].update(retentionDays=60)) == []  # longer retention keeps everything


def test_an_api_vip_switched_between_arp_and_bgp_is_not_turned_on_or_off() -> None:
    def edit(c: dict[str, Any]) -> None:
        peers = [{"address": "10.120.0.1", "asn": 64513}]
        c["network"]["apiVip"].update(mode="bgp", bgp={"asn": 64512, "peers": peers})

    assert [kind for kind, *_ in iad1_changes(edit)] == []


def test_endpoint_autoscaler_switches_name_the_way_out() -> None:
    """kserve/kserve#5196 (HPA -> KEDA stuck until the HPA is deleted), kedacore/keda#947 (an HPA never scales up
    from zero)."""

    def at_zero(c: dict[str, Any]) -> None:
        c["tenants"]["acme"]["modelEndpoints"]["llama-8b"]["minReplicas"] = 0

    def edit(c: dict[str, Any]) -> None:
        c["tenants"]["acme"]["modelEndpoints"]["llama-70b"]["scaleMetric"] = "vllm-queue"
        endpoint = c["tenants"]["acme"]["modelEndpoints"]["llama-8b"]
        endpoint.update(scaleMetric="cpu", minReplicas=1)
        endpoint.pop("scaleTarget", None)

    before, after = iad1(), iad1()
    at_zero(before)
    at_zero(after)
    edit(after)
    changes = compare(fp(before), fp(after), "iad1")
    assert [c.refusal() for c in changes] == [
        "regions.iad1.tenants.acme.modelEndpoints.llama-70b.scaleMetric: tenant-acme/llama-70b: hpa (minReplicas 1) "
        "-> keda (minReplicas 1) is a disruptive change (endpointHpaToKeda: KServe creates the endpoint's "
        "ScaledObject while the HorizontalPodAutoscaler it made before still manages the predictor: KEDA's webhook "
        "refuses it ('is already managed by the hpa') and the endpoint stays in a reconcile error until that HPA is "
        "deleted by hand (kserve/kserve#5196); after pulumi up, run kubectl -n <namespace> delete hpa "
        "<endpoint>-predictor); to apply it, add {change: endpointHpaToKeda, region: iad1, subject: "
        'tenant-acme/llama-70b, reason: "..."} to gpucell:acknowledge',
        "regions.iad1.tenants.acme.modelEndpoints.llama-8b.scaleMetric: tenant-acme/llama-8b: keda (minReplicas 0) "
        "-> hpa (minReplicas 1) is a disruptive change (endpointKedaToHpa: KEDA may have scaled the predictor to "
        "zero, and the HorizontalPodAutoscaler KServe creates instead never scales a workload up from zero replicas "
        "(autoscaling is off at 0; kedacore/keda#947): the endpoint stays down; after pulumi up, run kubectl -n "
        "<namespace> scale deployment <endpoint>-predictor --replicas=1); to apply it, add {change: "
        'endpointKedaToHpa, region: iad1, subject: tenant-acme/llama-8b, reason: "..."} to gpucell:acknowledge',
    ]
    # KEDA that never went below one replica hands over to the HPA without a gap
    assert iad1_changes(lambda c: c["tenants"]["acme"]["modelEndpoints"]["llama-8b"].update(scaleMetric="cpu")) == []


def test_a_region_with_tenant_clusters_refuses_a_cluster_api_upgrade_beyond_three_minor_releases() -> None:
    """kubernetes-sigs/cluster-api#12017: Cluster API supports N-3 -> N and clusterctl refuses a longer skip; gpucell
    upgrades it through the cluster-api-operator, so the plan refuses it. The prod region with globex's cluster records
    its Cluster API release."""
    from gpucell.day2.disruption import skipped_releases

    new = fp(iad1())
    assert new["versions"]["clusterApi"] == "v1.14.0"
    assert "clusterApi" not in fp()["versions"]  # no tenant cluster, no Cluster API
    old = copy.deepcopy(new)
    old["versions"]["clusterApi"] = "v1.10.3"
    (line,) = skipped_releases(old, new, "iad1")
    assert line.startswith("regions.iad1.versions.clusterApi: v1.10.3 -> v1.14.0 skips Cluster API 1.13: ")
    old["versions"]["clusterApi"] = "v1.11.4"
    assert skipped_releases(old, new, "iad1") == []


def test_a_longhorn_setting_that_needs_every_volume_detached_is_disruptive() -> None:
    """longhorn/longhorn#7675, #4160: Longhorn rejects a changed taint-toleration (and the other settings that
    recreate its instance managers) while a volume is attached, and keeps failing to apply it. A pool newly tainted on
    a Longhorn cell changes taintToleration; a priorityClass override changes priorityClass; the chart's own words."""
    from tests.test_storage import UPSTREAM

    questions = (UPSTREAM / "charts" / "longhorn-1.12.1" / "questions.yaml").read_text()
    assert questions.count("You cannot modify this setting while volumes are still attached.") == 3
    assert "DO NOT CHANGE THIS SETTING WITH ATTACHED VOLUMES" in questions

    def longhorn(c: dict[str, Any]) -> None:
        c["storage"] = {"backend": "longhorn", "replicas": 1}

    def edit(c: dict[str, Any]) -> None:
        longhorn(c)
        c["nodePools"]["l40s"]["taints"] = ["gpucell.io/gpu:NoSchedule"]
        c["storage"]["values"] = {"defaultSettings": {"priorityClass": "system-node-critical"}}

    deployed = minimal_cell_config()
    longhorn(deployed)
    assert fp(deployed)["storage"]["longhornSettings"] == {
        "taintToleration": None,
        "systemManagedComponentsNodeSelector": None,
        "priorityClass": None,
        "storageNetwork": None,
    }
    config = minimal_cell_config()
    edit(config)
    found = compare(fp(deployed), fp(config), "lab")
    assert [(c.change.value, c.subject, c.key, c.old, c.new) for c in found] == [
        ("longhornVolumeSetting", "taintToleration", "regions.lab.nodePools", "none", "gpucell.io/gpu:NoSchedule"),
        (
            "longhornVolumeSetting",
            "priorityClass",
            "regions.lab.storage.values.defaultSettings.priorityClass",
            "none",
            "system-node-critical",
        ),
    ]
    refusal = found[0].refusal()
    assert refusal.startswith(
        "regions.lab.nodePools: taintToleration: none -> gpucell.io/gpu:NoSchedule is a disruptive change "
        "(longhornVolumeSetting: Longhorn applies a changed taint-toleration, "
    )
    assert refusal.endswith(
        "stop the VMs, notebooks, endpoints and metrics that use Longhorn volumes for the run); to apply it, add "
        '{change: longhornVolumeSetting, region: lab, subject: taintToleration, reason: "..."} to gpucell:acknowledge'
    )
    assert "longhornSettings" not in fp()["storage"]  # local-path: nothing to detach


@pytest.mark.parametrize(
    ("key", "deployed", "line"),
    [
        (
            "longhorn",
            "1.12.2",
            "regions.lab.versions.longhorn: 1.12.2 -> 1.12.1 is a downgrade of Longhorn: Longhorn does not support "
            "downgrades at all, not even to an earlier patch release: its manager refuses to start on data of a newer "
            "release (longhorn/longhorn#5131, #9291); keep versions.longhorn at 1.12.2 or later",
        ),
        (
            "kubevirt",
            "v1.10.1",
            "regions.lab.versions.kubevirt: v1.10.1 -> v1.9.0 is a downgrade of KubeVirt: an older release's operator "
            "does not roll KubeVirt back: the update gets stuck at the KubeVirt CR (kubevirt/kubevirt#4797), and "
            "downgrades are not officially supported (kubevirt/kubevirt#12002, #15018); keep versions.kubevirt at "
            "v1.10.1 or later",
        ),
    ],
)
def test_a_longhorn_or_kubevirt_downgrade_is_refused_whatever_is_acknowledged(
    key: str, deployed: str, line: str
) -> None:
    """longhorn/longhorn#5131, #9291: no Longhorn downgrade, a patch one included; kubevirt/kubevirt#4797, #12002: an
    older operator manifest leaves KubeVirt stuck. One line each (not a skip line besides), none going up."""
    from gpucell.day2.disruption import skipped_releases

    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    new = fingerprint(cell(config))
    old = copy.deepcopy(new)
    (old["versions"] if key == "kubevirt" else old["versions"]["charts"])[key] = deployed
    assert skipped_releases(old, new, "lab") == [line]
    assert skipped_releases(new, old, "lab") == []  # the way up is fine
    far = copy.deepcopy(old)
    (far["versions"] if key == "kubevirt" else far["versions"]["charts"])[key] = (
        "v1.14.0" if key == "kubevirt" else "1.14.0"
    )
    (downgrade,) = skipped_releases(far, new, "lab")
    assert " is a downgrade of " in downgrade


def test_a_gateway_api_downgrade_below_v1_5_is_refused_and_a_patch_one_within_it_is_not() -> None:
    """kubernetes-sigs/gateway-api#4165, hcloud-k8s/terraform-hcloud-kubernetes#349: from v1.5.0 on, the bundle's
    safe-upgrades ValidatingAdmissionPolicy denies CRDs of an earlier release. The prod region has a gateway."""
    from gpucell.day2.disruption import skipped_releases

    deployed = fp(iad1())
    assert deployed["versions"]["gatewayApi"] == "v1.5.1"
    assert "gatewayApi" not in fp()["versions"]  # no gateway, no Gateway API CRDs
    older = copy.deepcopy(deployed)
    older["versions"]["gatewayApi"] = "v1.4.1"
    assert skipped_releases(deployed, older, "iad1") == [
        "regions.iad1.versions.gatewayApi: v1.5.1 -> v1.4.1 is a downgrade of the Gateway API CRDs: from v1.5.0 on, "
        "their safe-upgrades ValidatingAdmissionPolicy denies installing CRDs of an earlier release "
        '(kubernetes-sigs/gateway-api#4165; hcloud-k8s/terraform-hcloud-kubernetes#349: "Installing CRDs with version '
        'before v1.5.0 is prohibited by default"), so the run stops half way; keep versions.gatewayApi at v1.5.0 or '
        "later"
    ]
    patch = copy.deepcopy(deployed)
    patch["versions"]["gatewayApi"] = "v1.5.0"
    assert skipped_releases(deployed, patch, "iad1") == []  # the policy allows it
    assert skipped_releases(older, deployed, "iad1") == []  # the way up


def test_a_k3s_minor_downgrade_is_refused_and_a_patch_one_is_not() -> None:
    """rancher/system-upgrade-controller#212: a k3s downgrade stops at the first node, left NotReady; Kubernetes
    supports no minor downgrade. Acknowledgeable before (k3sMinor); a patch downgrade within the minor passes."""
    from gpucell.day2.disruption import skipped_releases

    deployed = fp()
    assert deployed["versions"]["k3s"] == "v1.34.2+k3s1"
    older = copy.deepcopy(deployed)
    older["versions"]["k3s"] = "v1.33.6+k3s1"
    assert skipped_releases(deployed, older, "lab") == [
        "regions.lab.versions.k3s: v1.34.2+k3s1 -> v1.33.6+k3s1 is a downgrade of k3s: Kubernetes supports no "
        "downgrade of a minor release (its version skew policy), and a k3s downgrade stops at the first node, left "
        "NotReady (rancher/system-upgrade-controller#212); keep versions.k3s at a 1.34 release or later"
    ]
    older["versions"]["k3s"] = "v1.32.9+k3s1"  # two minors back: the downgrade line only, not a skip line too
    (line,) = skipped_releases(deployed, older, "lab")
    assert " is a downgrade of k3s: " in line
    patch = copy.deepcopy(deployed)
    patch["versions"]["k3s"] = "v1.34.1+k3s1"
    assert skipped_releases(deployed, patch, "lab") == []
    assert skipped_releases(older, older, "lab") == []
