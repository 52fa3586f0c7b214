"""The k3s CIS profile, the pinned installer and sign-in: config options, node files and what the script does."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.k3s.hardening import (
    admission_configuration,
    audit_policy,
    authentication_configuration,
    node_files,
)
from gpucell.spec import CellSpec
from gpucell.spec.k3s import EMPTY_SHA256, INSTALLER_SHA256, installer_url
from gpucell.spec.tenancy import CLUSTER_API_NAMESPACES
from tests.conftest import ProdPlans, cell, minimal_cell_config
from tests.test_k3s import CIS_AGENT, CIS_SERVER, _run, _sandbox, build, ha_config, node_config

PSA = "/var/lib/rancher/k3s/server/psa.yaml"
AUDIT = "/var/lib/rancher/k3s/server/audit.yaml"
AUTHN = "/var/lib/rancher/k3s/server/authentication-config.yaml"
SYSCTL = "/etc/sysctl.d/90-kubelet.conf"
OIDC = {"issuerUrl": "https://idp.example.net/realms/gpucell", "clientId": "kubernetes"}


def with_k3s(**k3s: Any) -> dict[str, Any]:
    config = minimal_cell_config()
    config["k3s"] = k3s
    return config


# -- the prod stacks -----------------------------------------------------------------------------------------


def test_every_prod_server_carries_the_cis_options_and_every_node_the_kubelet_ones() -> None:
    plan = ProdPlans()
    for region in ("fra1", "iad1"):
        cluster = plan.cells[region].k3s
        for host, files in cluster.node_files.items():
            config = yaml.safe_load(files.config_yaml)
            assert config["protect-kernel-defaults"] is True, host
            assert config["kubelet-arg"][-2:] == CIS_AGENT["kubelet-arg"], host
            assert files.files[SYSCTL].endswith(
                "vm.panic_on_oom=0\nvm.overcommit_memory=1\nkernel.panic=10\nkernel.panic_on_oops=1\n"
            ), host
            if "-srv-" in host:
                assert {k: config[k] for k in CIS_SERVER} == {
                    **CIS_SERVER,  # and prod's OIDC sign-in
                    "kube-apiserver-arg": [*CIS_SERVER["kube-apiserver-arg"], f"authentication-config={AUTHN}"],
                }, host
                assert set(files.files) == {SYSCTL, PSA, AUDIT, AUTHN}, host  # prod signs tenants in with OIDC
            else:
                assert not set(CIS_SERVER) & set(config), host
                assert set(files.files) == {SYSCTL}, host


# -- the options and files -----------------------------------------------------------------------------------


def test_admission_configuration_defaults_to_restricted_and_exempts_the_platform_namespaces() -> None:
    assert admission_configuration(cell(minimal_cell_config())) == {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": "PodSecurity",
                "configuration": {
                    "apiVersion": "pod-security.admission.config.k8s.io/v1",
                    "kind": "PodSecurityConfiguration",
                    "defaults": {
                        "enforce": "restricted",
                        "enforce-version": "v1.34",
                        "audit": "restricted",
                        "audit-version": "v1.34",
                        "warn": "restricted",
                        "warn-version": "v1.34",
                    },
                    "exemptions": {
                        "usernames": [],
                        "runtimeClasses": [],
                        "namespaces": [
                            "cdi",
                            "cert-manager",
                            "dra-driver-nvidia-gpu",
                            "gpu-operator",
                            "kserve",
                            "kube-system",
                            "kubevirt",
                            "longhorn-system",
                            "nvidia-network-operator",
                        ],
                    },
                },
            },
            {
                "name": "EventRateLimit",
                "configuration": {
                    "apiVersion": "eventratelimit.admission.k8s.io/v1alpha1",
                    "kind": "Configuration",
                    "limits": [
                        {"type": "Namespace", "qps": 50, "burst": 100, "cacheSize": 2000},
                        {"type": "User", "qps": 10, "burst": 50},
                    ],
                },
            },
        ],
    }


def test_every_platform_namespace_is_exempted() -> None:
    """Every namespace a component installs into (a module constant ``NAMESPACE`` or ``*_NAMESPACE``, found by
    importing every gpucell module) is exempted: a new one that is not would have its pods meet restricted."""
    import importlib
    import pkgutil

    import gpucell

    found: set[str] = {"cdi"}  # created by CDI's operator manifest, named by no constant
    for module_info in pkgutil.walk_packages(gpucell.__path__, "gpucell."):
        if ".stacks" in module_info.name or module_info.name.endswith("testing"):
            continue
        module = importlib.import_module(module_info.name)
        found |= {
            value
            for key, value in vars(module).items()
            if (key == "NAMESPACE" or key.endswith("_NAMESPACE"))
            and isinstance(value, str)
            and not key.startswith("TENANT")
        }
    assert {"dra-driver-nvidia-gpu", "gpu-operator", "kube-system", "longhorn-system"} <= found
    # Runs only cert-manager's ACME solver pods, which are restricted by cert-manager itself: no exemption on purpose.
    found.remove("gpucell-gateway")
    exempt = admission_configuration(cell(minimal_cell_config()))["plugins"][0]["configuration"]["exemptions"]
    # The metrics stack's, KEDA's and Velero's Namespaces are created by their components with their own Pod
    # Security labels. Cluster API's controllers meet restricted (decision 0024): exempting them would also restart
    # every server.
    assert "capi-operator-system" in found
    assert found - {"monitoring", "keda", "velero", *CLUSTER_API_NAMESPACES} <= set(exempt["namespaces"])
    assert not set(CLUSTER_API_NAMESPACES) & set(exempt["namespaces"])


def test_the_audit_policy_logs_metadata_only() -> None:
    policy = audit_policy()
    assert policy["rules"][-1] == {"level": "Metadata"}
    assert {rule["level"] for rule in policy["rules"]} == {"None", "Metadata"}  # never Request/RequestResponse
    assert policy["omitStages"] == ["RequestReceived"]


def test_profile_none_renders_no_cis_option_and_no_file() -> None:
    _, cluster = build(with_k3s(profile="none"))
    for host in ("lab-srv-1", "lab-gpu-1"):
        config = node_config(cluster, host)
        assert not {"protect-kernel-defaults", "kubelet-arg", *CIS_SERVER} & set(config), host
        assert cluster.node_files[host].files == {}
    assert "sysctl" not in cluster.node_files["lab-gpu-1"].install_script
    assert "WANT_SECRETS_ENCRYPTION=false" in cluster.node_files["lab-srv-1"].install_script


def test_secrets_encryption_follows_the_profile_unless_set() -> None:
    for k3s, expected in (
        ({}, True),
        ({"profile": "none"}, False),
        ({"secretsEncryption": False}, False),
        ({"profile": "none", "secretsEncryption": True}, True),
    ):
        _, cluster = build(with_k3s(**k3s))
        assert node_config(cluster, "lab-srv-1").get("secrets-encryption", False) is expected, k3s
        assert f"WANT_SECRETS_ENCRYPTION={str(expected).lower()}\n" in cluster.node_files["lab-srv-1"].install_script


# -- the pinned installer ------------------------------------------------------------------------------------


def test_installer_is_fetched_by_tag_and_pinned() -> None:
    assert installer_url("v1.34.2+k3s1") == "https://raw.githubusercontent.com/k3s-io/k3s/v1.34.2%2Bk3s1/install.sh"
    _, cluster = build(minimal_cell_config())
    script = cluster.node_files["lab-gpu-1"].install_script
    assert f"readonly INSTALLER_URL={installer_url('v1.34.2+k3s1')}\n" in script
    assert f"readonly INSTALLER_SHA256={INSTALLER_SHA256['v1.34.2+k3s1']}\n" in script
    assert "get.k3s.io" not in script
    _, pinned = build({**with_k3s(installerSha256="0" * 64), "versions": {"k3s": "v1.35.0+k3s1"}})
    assert f"readonly INSTALLER_SHA256={'0' * 64}\n" in pinned.node_files["lab-gpu-1"].install_script


def test_a_release_without_a_reviewed_installer_checksum_is_a_config_error() -> None:
    config = minimal_cell_config()
    config["versions"] = {"k3s": "v1.35.0+k3s1"}
    with pytest.raises(ConfigError) as info:
        CellSpec.model_validate(config)
    assert info.value.lines == [
        "k3s.installerSha256: is required for versions.k3s 'v1.35.0+k3s1': gpucell has reviewed the install.sh of "
        "v1.34.2+k3s1 only; read https://raw.githubusercontent.com/k3s-io/k3s/v1.35.0%2Bk3s1/install.sh and set its "
        "checksum (curl -sfL <that URL> | sha256sum)"
    ]


@pytest.mark.parametrize("value", ["ABC", "a" * 63, "g" * 64, "a" * 64 + "\n", "A" * 64])
def test_installer_sha256_is_64_lower_case_hex_digits(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        CellSpec.model_validate(with_k3s(installerSha256=value))
    assert info.value.lines[0].startswith("k3s.installerSha256: ")
    assert info.value.lines[0].endswith("is not a sha256 checksum (64 lower-case hex digits, as sha256sum prints it)")


def test_the_checksum_of_an_empty_download_is_refused() -> None:
    """The new-user trial: `curl -sfL <wrong URL> | sha256sum` prints the hash of nothing, which was accepted; every
    install would then fail on the host."""
    with pytest.raises(ConfigError) as info:
        CellSpec.model_validate(with_k3s(installerSha256=EMPTY_SHA256))
    assert info.value.lines == [
        f"k3s.installerSha256: '{EMPTY_SHA256[:56]}...' is the sha256 of an empty file: the download failed (curl -f "
        "prints nothing on an HTTP error); check the tag in the URL (+ as %2B) and hash the installer again"
    ]


def test_an_installer_with_another_checksum_is_never_run(tmp_path: Path) -> None:
    _, cluster = build(minimal_cell_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-cpu-1"].install_script)
    (tmp_path / "installer.sh").write_text("echo tampered\n")  # what the URL serves now
    run = _run(script, env)
    assert run.returncode == 1
    assert "not the pinned" in run.stderr
    assert "set k3s.installerSha256" in run.stderr
    assert not (root / "installs").exists()
    assert not (root / "etc" / "config.yaml").exists()  # nothing was changed


# -- the script writes the files ----------------------------------------------------------------------------


def test_server_script_writes_the_cis_files_applies_the_sysctls_and_makes_the_audit_log_dir(tmp_path: Path) -> None:
    config = ha_config()
    config["oidc"] = OIDC
    _, cluster = build(config)
    files = cluster.node_files["lab-srv-1"]
    assert set(files.files) == {SYSCTL, PSA, AUDIT, AUTHN}
    root, env, script = _sandbox(tmp_path, files.install_script)
    run = _run(script, env)
    assert run.returncode == 0, run.stderr
    for path, content in files.files.items():
        written = root / (
            "sysctl.d/90-kubelet.conf" if path == SYSCTL else path.replace("/var/lib/rancher/k3s/", "rancher/")
        )
        assert written.read_text() == content, path
        assert stat.S_IMODE(written.stat().st_mode) == (0o644 if path == SYSCTL else 0o600), path
    assert (root / "sysctl").read_text() == f"sysctl -p {root}/sysctl.d/90-kubelet.conf\n"
    assert stat.S_IMODE((root / "rancher" / "server" / "logs").stat().st_mode) == 0o700
    # A changed file alone (a new issuer) reinstalls, i.e. restarts k3s, which rereads it.
    assert "nothing to do" in _run(script, env).stdout
    moved = script.replace("https://idp.example.net/realms/gpucell", "https://idp.example.net/realms/other")
    assert "installed" in _run(moved, env).stdout
    assert "realms/other" in (root / "rancher" / "server" / "authentication-config.yaml").read_text()


def _etcd(root: Path, *, encrypted: bool) -> None:
    """What an initialised k3s server has on disk: its etcd, and with secrets-encryption its encryption config."""
    (root / "rancher" / "server" / "db" / "etcd").mkdir(parents=True)
    if encrypted:
        (root / "rancher" / "server" / "cred").mkdir(parents=True)
        (root / "rancher" / "server" / "cred" / "encryption-config.json").write_text("{}")


@pytest.mark.parametrize(
    ("k3s", "encrypted", "have"), [({}, False, "false"), ({"secretsEncryption": False}, True, "true")]
)
def test_a_running_cluster_refuses_a_secrets_encryption_change(
    tmp_path: Path, k3s: dict[str, Any], encrypted: bool, have: str
) -> None:
    _, cluster = build(with_k3s(**k3s))
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-srv-1"].install_script)
    _etcd(root, encrypted=encrypted)
    run = _run(script, env)
    assert run.returncode == 1
    assert run.stderr == (
        f"gpucell: this server's cluster runs with secrets-encryption {have}, which k3s cannot "
        f"change on a running cluster; set k3s.secretsEncryption to {have} (nothing was changed)\n"
    )
    assert not (root / "installs").exists()
    assert not (root / "etc" / "config.yaml").exists()


def test_a_running_cluster_with_the_same_setting_proceeds(tmp_path: Path) -> None:
    _, cluster = build(minimal_cell_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-srv-1"].install_script)
    _etcd(root, encrypted=True)
    run = _run(script, env)
    assert run.returncode == 0, run.stderr
    assert (root / "installs").read_text() == "v1.34.2+k3s1 server\n"


# -- sign-in -------------------------------------------------------------------------------------------------


def test_oidc_renders_a_structured_authentication_configuration_on_every_server() -> None:
    config = ha_config()
    config["oidc"] = {
        **OIDC,
        "usernameClaim": "email",
        "groupsPrefix": "idp:",
        "certificateAuthority": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    }
    spec = cell(config)
    assert authentication_configuration(spec) == {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AuthenticationConfiguration",
        "jwt": [
            {
                "issuer": {
                    "url": "https://idp.example.net/realms/gpucell",
                    "audiences": ["kubernetes"],
                    "certificateAuthority": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
                },
                "claimMappings": {
                    "username": {"claim": "email", "prefix": "oidc:"},
                    "groups": {"claim": "groups", "prefix": "idp:"},
                },
                "userValidationRules": [
                    {
                        "expression": "!user.username.startsWith('system:')",
                        "message": "username cannot use the reserved system: prefix",
                    },
                    {
                        "expression": "user.groups.all(group, !group.startsWith('system:'))",
                        "message": "groups cannot use the reserved system: prefix",
                    },
                ],
            }
        ],
    }
    _, cluster = build(config)
    for host in ("lab-srv-1", "lab-srv-2", "lab-srv-3"):
        assert node_config(cluster, host)["kube-apiserver-arg"][-1] == f"authentication-config={AUTHN}"
        assert yaml.safe_load(cluster.node_files[host].files[AUTHN]) == authentication_configuration(spec)
    assert AUTHN not in cluster.node_files["lab-cpu-1"].files
    assert not [f for f in node_files(spec, server=False) if f.path == AUTHN]


def test_oidc_before_kubernetes_1_34_uses_v1beta1() -> None:
    config = {
        **minimal_cell_config(),
        "oidc": OIDC,
        "versions": {"k3s": "v1.33.5+k3s1"},
        "k3s": {"installerSha256": "1" * 64},
    }
    authn = authentication_configuration(cell(config))
    assert authn is not None
    assert authn["apiVersion"] == "apiserver.config.k8s.io/v1beta1"
