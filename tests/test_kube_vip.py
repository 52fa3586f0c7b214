"""network.apiVip: the API VIP from the cell's own servers (kube-vip static pods), decision 0020."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.k3s import _scripts as scripts
from gpucell.k3s import kube_vip
from gpucell.spec import NodeRole
from tests.conftest import cell, violations
from tests.test_k3s import SHELLCHECK, _into, _run, _sandbox, build, ha_config
from tests.test_spec import errors_of

ARP = {"provider": "kube-vip", "mode": "arp", "interface": "bond0"}


def vip_config(**vip: Any) -> dict[str, Any]:
    config = ha_config()
    config["network"]["apiVip"] = {**ARP, **vip}
    return config


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "<ref>") for e in pod["spec"]["containers"][0]["env"]}


def test_arp_manifest_follows_kube_vips_static_pod() -> None:
    pod = kube_vip.static_pod(cell(vip_config()))
    assert env_of(pod) == {
        "vip_nodename": "<ref>",
        "vip_arp": "true",
        "port": "6443",
        "vip_interface": "bond0",
        "vip_subnet": "32",
        "cp_enable": "true",
        "cp_namespace": "kube-system",
        "svc_enable": "false",
        "vip_leaderelection": "true",
        "vip_leaseduration": "5",
        "vip_renewdeadline": "3",
        "vip_retryperiod": "1",
        "vip_preserve_on_leadership_loss": "true",
        "address": "10.20.0.5",
    }
    container = pod["spec"]["containers"][0]
    assert container["image"] == (
        "ghcr.io/kube-vip/kube-vip:v1.0.4@sha256:5e0d817bfa35f922e7ca5cf5fa88f30b71a88ab4837e550185b1c97bcef818c2"
    )
    assert container["volumeMounts"] == [
        {"name": "kubeconfig", "mountPath": "/etc/kubernetes/admin.conf", "readOnly": True}
    ]
    assert pod["spec"]["volumes"] == [
        {"name": "kubeconfig", "hostPath": {"path": "/etc/rancher/k3s/k3s.yaml", "type": "File"}}
    ]
    assert pod["spec"]["hostNetwork"] is True
    assert violations(pod) == []


def test_the_vip_prefix_is_the_variable_kube_vip_reads() -> None:
    """kube-vip v1.0.4 reads the VIP's prefix from ``vip_subnet`` (pkg/kubevip/config_envvar.go line 46, read at
    pkg/kubevip/config_environment.go line 239) and knows no ``vip_cidr``."""
    env = env_of(kube_vip.static_pod(cell(vip_config())))
    assert env["vip_subnet"] == "32"
    assert "vip_cidr" not in env


def test_a_lease_renewal_timeout_does_not_drop_the_api_vip() -> None:
    """kube-vip/kube-vip#282, #1377: an ARP leader whose renewal times out deletes the VIP at once; PR #1306's
    ``vip_preserve_on_leadership_loss`` (v1.0.4 pkg/kubevip/config_envvar.go line 13, read at
    pkg/kubevip/config_environment.go line 298, default false) keeps it until another server leads. BGP has no
    election, so no variable."""
    assert env_of(kube_vip.static_pod(cell(vip_config())))["vip_preserve_on_leadership_loss"] == "true"
    bgp = vip_config(mode="bgp", bgp={"asn": 65010, "peers": [{"address": "10.20.0.1", "asn": 65000}]})
    assert "vip_preserve_on_leadership_loss" not in env_of(kube_vip.static_pod(cell(bgp)))


def test_bgp_manifest_advertises_to_the_peers_without_election() -> None:
    pod = kube_vip.static_pod(
        cell(
            vip_config(
                mode="bgp",
                bgp={
                    "asn": 65010,
                    "peers": [{"address": "10.20.0.1", "asn": 65000}, {"address": "10.20.0.2", "asn": 65000}],
                },
            )
        )
    )
    env = env_of(pod)
    assert (env["vip_arp"], env["vip_leaderelection"], env["bgp_enable"], env["bgp_as"]) == (
        "false",
        "false",
        "true",
        "65010",
    )
    assert env["bgp_peers"] == "10.20.0.1:65000::false,10.20.0.2:65000::false"
    assert env["bgp_routerinterface"] == "bond0"
    assert "vip_leaseduration" not in env
    assert violations(pod) == []


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            {"apiEndpoint": "api.lab.example"},
            "regions.fra1.network.apiVip: needs network.apiEndpoint to be the VIP's "
            "IPv4 address, not 'api.lab.example'; set apiEndpoint to an unused address of network.nodeCidr",
        ),
        (
            {"apiEndpoint": "10.99.0.5"},
            "regions.fra1.network.apiEndpoint: '10.99.0.5' is outside network.nodeCidr "
            "10.20.0.0/24; an ARP VIP must be on the servers' own segment (or use apiVip.mode: bgp)",
        ),
        (
            {"apiPort": 443},
            "regions.fra1.network.apiPort: 443 with apiVip: the VIP reaches the API servers on their "
            "own port; use 6443 or an external load balancer",
        ),
        (
            {"apiEndpoint": "10.20.0.12"},
            "regions.fra1.network.apiEndpoint: '10.20.0.12' is the address of lab-srv-2 "
            "(nodePools.servers.hosts[1]); with apiVip it must be an unused address kube-vip can move between the "
            "servers",
        ),
        (
            {"apiVip": {**ARP, "interface": "eth0; reboot"}},
            "regions.fra1.network.apiVip.interface: 'eth0; reboot' "
            "is not a network interface name (letters, digits, '_', '.', '-'; at most 15 characters), "
            "e.g. eth0 or bond0.100",
        ),
        (
            {"apiVip": {**ARP, "mode": "bgp"}},
            "regions.fra1.network.apiVip.bgp: is required with mode bgp: the servers' asn and the peers",
        ),
        (
            {"apiVip": {**ARP, "bgp": {"asn": 1, "peers": [{"address": "10.20.0.1", "asn": 2}]}}},
            "regions.fra1.network.apiVip.bgp: is set but mode is arp; remove it or use mode: bgp",
        ),
        (
            {"apiVip": {**ARP, "provider": "keepalived"}},
            "regions.fra1.network.apiVip.provider: 'keepalived' is not a supported VIP provider; use kube-vip",
        ),
    ],
)
def test_bad_vip_is_one_line(change: dict[str, Any], line: str) -> None:
    config = vip_config()
    config["network"].update(change)
    assert errors_of(config) == [line]


def test_one_server_may_serve_a_vip() -> None:
    config = vip_config()
    config["nodePools"]["servers"]["hosts"] = config["nodePools"]["servers"]["hosts"][:1]
    config.pop("etcd")
    assert cell(config).network.api_vip is not None


def test_the_vip_is_in_every_servers_tls_san() -> None:
    _, cluster = build(vip_config())
    for host in ("lab-srv-1", "lab-srv-2", "lab-srv-3"):
        assert yaml.safe_load(cluster.node_files[host].config_yaml)["tls-san"][0] == "10.20.0.5"


def test_the_manifest_is_no_restart() -> None:
    """A static pod change reaches the kubelet without a k3s restart: the digest (and so the -prepare drain)
    stays; only the install script, which writes the file, changes."""
    on, off = cell(vip_config()), cell(ha_config())
    _, host = on.servers[0]
    pool = on.node_pools["servers"]
    config = scripts.node_config(on, "servers", pool, host)
    assert config == scripts.node_config(off, "servers", pool, host)
    assert scripts.restart_digest(on, NodeRole.SERVER, config) == scripts.restart_digest(off, NodeRole.SERVER, config)


def test_scripts_write_or_remove_the_manifest_and_pass_shellcheck(tmp_path: Path) -> None:
    _, on = build(vip_config())
    _, off = build(ha_config())
    server = on.node_files["lab-srv-2"].install_script
    assert kube_vip.manifest(cell(vip_config())) in server
    assert "kube-vip static pod removed (network.apiVip is not set)" in off.node_files["lab-srv-2"].install_script
    assert "kube-vip" not in off.node_files["lab-cpu-1"].install_script
    assert "wait_vip  # joins through the VIP" in on.node_files["lab-cpu-1"].install_script
    assert "wait_vip  # joins through the VIP" not in on.node_files["lab-srv-1"].install_script
    paths = []
    for name, files in {**on.node_files, "off": off.node_files["lab-srv-2"]}.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(files.install_script)
        paths.append(str(path))
    run = subprocess.run([str(SHELLCHECK), "--shell=bash", *paths], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_joining_server_waits_for_the_vip_and_changes_nothing_without_it(tmp_path: Path) -> None:
    _, cluster = build(vip_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-srv-2"].install_script)
    failed = _run(script, env)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        "gpucell: API VIP https://10.20.0.5:6443 does not answer after 300 s; see the kube-vip pod on the servers "
        "(crictl logs, network.apiVip.interface bond0), or remove network.apiVip and put a load balancer at "
        "network.apiEndpoint"
    )
    assert not (root / "installs").exists()
    (root / "api-answers").touch()
    joined = _run(script, env)
    assert joined.returncode == 0, joined.stderr
    assert (root / "installs").read_text() == "v1.34.2+k3s1 server\n"
    manifest = root / "rancher" / "agent" / "pod-manifests" / "kube-vip.yaml"
    assert yaml.safe_load(manifest.read_text())["metadata"]["name"] == "kube-vip"


def test_the_first_server_is_done_only_when_its_vip_answers(tmp_path: Path) -> None:
    _, cluster = build(vip_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-srv-1"].install_script)
    result = _run(script, env)
    assert result.returncode == 1
    assert "gpucell: API server ready" in result.stdout
    assert "API VIP https://10.20.0.5:6443 does not answer after 300 s" in result.stderr
    assert (root / "installs").read_text() == "v1.34.2+k3s1 server\n"  # k3s itself did start


def test_turning_the_vip_off_removes_the_static_pod(tmp_path: Path) -> None:
    _, on = build(vip_config())
    root, env, script = _sandbox(tmp_path, on.node_files["lab-srv-2"].install_script)
    (root / "api-answers").touch()
    assert _run(script, env).returncode == 0
    manifest = root / "rancher" / "agent" / "pod-manifests" / "kube-vip.yaml"
    assert manifest.exists()
    _, off = build(ha_config())
    result = _run(_into(root, off.node_files["lab-srv-2"].install_script), env)
    assert result.returncode == 0, result.stderr
    assert "gpucell: kube-vip static pod removed (network.apiVip is not set)" in result.stdout
    assert not manifest.exists()
    assert "nothing to do" in result.stdout  # k3s not restarted
    assert (root / "installs").read_text() == "v1.34.2+k3s1 server\n"
