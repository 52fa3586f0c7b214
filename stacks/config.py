"""From stack config to validated specs: the one place config is read, for ``pulumi up`` and the offline plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gpucell.errors import ConfigError
from gpucell.spec import StackSpec

__all__ = ["PROJECT", "StackConfig", "load_stack_config"]

PROJECT = "gpucell"
"""The Pulumi project name, and so the config namespace (``gpucell:regions``)."""


@dataclass(frozen=True)
class StackConfig:
    """A validated stack: the regions' specs and each region's SSH private key (a secret Output)."""

    spec: StackSpec
    """The validated regions."""
    ssh_private_keys: dict[str, pulumi.Output[str]]
    """Region name -> the secret config value named by that region's ``ssh.privateKeyConfigKey``."""
    credentials: dict[str, pulumi.Output[str]]
    """Config key -> secret value, for every ``credentialsConfigKey`` a model endpoint or an etcd S3 target names."""

    def etcd_s3_credentials(self, region: str) -> pulumi.Output[str] | None:
        """The secret named by ``regions.<region>.etcd.snapshots.s3.credentialsConfigKey``, or ``None``."""
        s3 = self.spec.regions[region].etcd.snapshots.s3
        return None if s3 is None else self.credentials[s3.credentials_config_key]


def _regions_object(config: pulumi.Config) -> Any:
    try:
        regions = config.get_object("regions")
    except pulumi.config.ConfigTypeError as exc:
        raise ConfigError.at(("regions",), f"is not a YAML/JSON object ({exc})") from None
    if regions is None:
        raise ConfigError.at(
            ("regions",), "is missing; add gpucell:regions to Pulumi.<stack>.yaml (see docs/config.md)"
        )
    return regions


def _config_keys() -> set[str]:
    """Every config key the engine handed the program (``project:key``)."""
    return set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.config.get_config_env())


def _is_secret(full_key: str) -> bool:
    return pulumi.runtime.config.is_config_secret(full_key) or (
        full_key in pulumi.runtime.config.get_config_secret_keys_env()
    )


def _check_top_level_keys(secret_keys: set[str]) -> None:
    """Reject ``gpucell:*`` keys the program does not read: a typo there would otherwise be ignored."""
    accepted = {"regions", *secret_keys}
    for full_key in sorted(_config_keys()):
        namespace, _, key = full_key.partition(":")
        if namespace == PROJECT and key not in accepted:
            raise ConfigError.at(
                (key,), f"unknown key in the {PROJECT} namespace; accepted keys are {', '.join(sorted(accepted))}"
            )


def _require_secret(config: pulumi.Config, key: str, used_by: str, how: str) -> pulumi.Output[str]:
    """The secret config value ``key``; a :class:`ConfigError` when it is missing or stored in plain text."""
    if key == "regions":
        raise ConfigError.at((key,), f"names the region config, not a secret ({used_by})")
    secret = config.get_secret(key)
    if secret is None:
        raise ConfigError.at((key,), f"secret is missing ({used_by}); set it with `pulumi config set --secret {how}`")
    if not _is_secret(f"{PROJECT}:{key}"):
        raise ConfigError.at((key,), f"is stored in plain text in the stack file; store it encrypted with "
                             f"`pulumi config set --secret {how}`")
    return secret


def load_stack_config(config: pulumi.Config | None = None) -> StackConfig:
    """Read and validate ``gpucell:*`` config. Registers nothing.

    Raises :class:`ConfigError` with one ``key.path: message`` line per problem (unknown key, bad value,
    cross-field rule, missing SSH key secret).
    """
    config = config or pulumi.Config(PROJECT)
    spec = StackSpec.model_validate({"regions": _regions_object(config)})  # raises ConfigError
    keys: dict[str, pulumi.Output[str]] = {}
    credentials: dict[str, pulumi.Output[str]] = {}
    for region, cell in spec.regions.items():
        key_name = cell.ssh.private_key_config_key
        keys[region] = _require_secret(
            config, key_name,
            f"region {region} uses it for SSH, see regions.{region}.ssh.privateKeyConfigKey",
            f"{key_name} < ~/.ssh/id_ed25519",
        )
        s3 = cell.etcd.snapshots.s3
        if s3 is not None and s3.credentials_config_key not in credentials:
            credentials[s3.credentials_config_key] = _require_secret(
                config, s3.credentials_config_key,
                f"regions.{region}.etcd.snapshots.s3.credentialsConfigKey names it",
                f"{s3.credentials_config_key} -- '<access key id>:<secret access key>'",
            )
        for tenant_name, tenant in cell.tenants.items():
            for name, endpoint in tenant.model_endpoints.items():
                key = endpoint.credentials_config_key
                if key is not None and key not in credentials:
                    credentials[key] = _require_secret(
                        config, key,
                        f"regions.{region}.tenants.{tenant_name}.modelEndpoints.{name}.credentialsConfigKey names it",
                        f"{key} -- <token>",
                    )
    _check_top_level_keys({c.ssh.private_key_config_key for c in spec.regions.values()} | set(credentials))
    return StackConfig(spec=spec, ssh_private_keys=keys, credentials=credentials)
