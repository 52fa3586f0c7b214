"""From stack config to validated specs: the one place config is read, for ``pulumi up`` and the offline plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from gpucell.components.backups import BackupCredentials
from gpucell.components.disk_import import import_secret_data
from gpucell.components.metrics import remote_write_secret_data
from gpucell.day2.disruption import Acknowledgement, Change, StackAcknowledgements
from gpucell.errors import TOO_MANY_PROBLEMS, ConfigError, join_path
from gpucell.spec import CellSpec, GpuVirtualMachineSpec, StackSpec
from gpucell.spec.cloud_init import GpucellUserData, UserDataError, merge_user_data, secret_user_data
from gpucell.workloads.model_endpoint import credentials_secret_data, storage_scheme

__all__ = ["PROJECT", "StackConfig", "ValueFreeError", "load_stack_config", "shown_error", "stack_spec_input"]

PROJECT = "gpucell"
"""The Pulumi project name, and so the config namespace (``gpucell:regions``)."""
_SPEC_KEYS = ("regions", "gpuModels", "production", "otherCells")
"""The ``gpucell:*`` keys :class:`~gpucell.spec.StackSpec` reads; ``acknowledge`` and the secrets are read apart."""


@dataclass(frozen=True)
class StackConfig:
    """A validated stack: the regions' specs and each region's SSH private key (a secret Output)."""

    spec: StackSpec
    """The validated regions."""
    ssh_private_keys: dict[str, pulumi.Output[str]]
    """Region name -> the secret config value named by that region's ``ssh.privateKeyConfigKey``."""
    credentials: dict[str, pulumi.Output[str]]
    """Config key -> secret value, for every secret a tenant's or the cell's field names: endpoints'
    ``credentialsConfigKey`` and ``env[].secretConfigKey``, import credentials, VM user data, etcd S3, remote write and
    backup credentials."""
    acknowledgements: list[Acknowledgement] = field(default_factory=list)
    """``gpucell:acknowledge``: the disruptive changes the next ``pulumi up`` may apply (see
    :mod:`gpucell.stacks.guard`)."""

    def remote_write_credentials(self, region: str) -> pulumi.Output[str] | None:
        """The secret named by ``regions.<region>.metrics.remoteWrite.credentialsConfigKey``, or ``None``."""
        metrics = self.spec.regions[region].metrics
        remote = metrics.remote_write if metrics.enabled else None
        return (
            None
            if remote is None or remote.credentials_config_key is None
            else self.credentials[remote.credentials_config_key]
        )

    def backup_credentials(self, region: str) -> BackupCredentials | None:
        """The secrets ``regions.<region>.backups`` names, or ``None`` without ``backups``."""
        backups = self.spec.regions[region].backups
        if backups is None:
            return None
        bucket, password = backups.storage.credentials_config_key, backups.repository_password_config_key
        assert bucket is not None  # the spec requires both
        assert password is not None
        return BackupCredentials(self.credentials[bucket], self.credentials[password])

    def etcd_s3_credentials(self, region: str) -> pulumi.Output[str] | None:
        """The secret named by ``regions.<region>.etcd.snapshots.s3.credentialsConfigKey``, or ``None``."""
        s3 = self.spec.regions[region].etcd.snapshots.s3
        return None if s3 is None else self.credentials[s3.credentials_config_key]


def _spec_input(config: pulumi.Config) -> dict[str, Any]:
    """``gpucell:regions`` and, when given, ``gpucell:gpuModels``, as :class:`StackSpec` takes them."""
    values: dict[str, Any] = {}
    for key in _SPEC_KEYS:
        try:
            value = config.get_object(key)
        except pulumi.config.ConfigTypeError:
            raise ValueFreeError.at((key,), _not_json(key, "a YAML/JSON object")) from None
        if value is not None:
            values[key] = value
    if "regions" not in values:
        raise ValueFreeError.at(
            ("regions",), "is missing; add gpucell:regions to Pulumi.<stack>.yaml (see docs/config.md)"
        )
    return values


def stack_spec_input(config: Mapping[str, Any], project: str = PROJECT) -> dict[str, Any]:
    """What :class:`StackSpec` takes from a stack file's config (full keys, ``gpucell:regions`` -> value):
    ``regions`` and ``gpuModels``, each only when the file has it."""
    return {key: config[f"{project}:{key}"] for key in _SPEC_KEYS if config.get(f"{project}:{key}") is not None}


def _not_json(key: str, what: str) -> str:
    """Why ``gpucell:<key>`` could not be read as JSON, without its text: pulumi's ``ConfigTypeError`` quotes the
    whole value, which for a ``secure:`` value is the decrypted secret."""
    if _is_secret(f"{PROJECT}:{key}"):
        return (
            f"is a secure: value that does not decrypt to {what} (its text is not shown); store it as plain "
            f"YAML in the stack file, or encrypt JSON text"
        )
    return f"is not {what}; write it as a YAML mapping or list under {PROJECT}:{key} in the stack file"


class ValueFreeError(ConfigError):
    """A :class:`ConfigError` whose lines quote no value of ``gpucell:regions`` or ``gpucell:gpuModels`` (key names
    and gpucell's own words only: a secret that is missing or malformed, a key that is not JSON): :func:`shown_error`
    passes it on whole."""


def shown_error(error: ConfigError) -> ConfigError:
    """``error`` as the program may show it. When ``gpucell:regions`` or ``gpucell:gpuModels`` is a ``secure:`` value
    (Pulumi hands it over decrypted: JSON text is read like the plain value), every line keeps its key path and
    loses its message, which may quote the value (``'10.0.0.0/33' is invalid``, shortened or not), unless the error
    is a :class:`ValueFreeError`. The keys of a config are its structure and are shown; no value is."""
    secret = [f"{PROJECT}:{key}" for key in _SPEC_KEYS if _is_secret(f"{PROJECT}:{key}")]
    if not secret or isinstance(error, ValueFreeError):
        return error
    why = (
        f"is refused ({' and '.join(secret)} {'is a secure: value' if len(secret) == 1 else 'are secure: values'}, so "
        "the reason, which may quote it, is not shown; plan the decrypted value as plain YAML in a scratch stack to "
        "see it)"
    )
    return ConfigError([line if line == TOO_MANY_PROBLEMS else f"{_path_of(line)}: {why}" for line in error.lines])


def _path_of(line: str) -> str:
    """The key path a problem line starts with (:func:`gpucell.errors.join_path`: a key holding spaces, quotes or
    brackets is in ``[...]``, so the path ends at the first ``": "`` outside brackets)."""
    depth = 0
    for index, char in enumerate(line):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth == 0 and line.startswith(": ", index):
            return line[:index]
    return "gpucell"


def _config_keys() -> set[str]:
    """Every config key the engine handed the program (``project:key``)."""
    return set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.config.get_config_env())


def _is_secret(full_key: str) -> bool:
    return pulumi.runtime.config.is_config_secret(full_key) or (
        full_key in pulumi.runtime.config.get_config_secret_keys_env()
    )


def _check_top_level_keys(secret_keys: set[str]) -> None:
    """Reject ``gpucell:*`` keys the program does not read, all in one run: a typo there would otherwise be
    ignored."""
    accepted = {*_SPEC_KEYS, "acknowledge", *secret_keys}
    unknown = [
        key
        for full_key in sorted(_config_keys())
        for namespace, _, key in [full_key.partition(":")]
        if namespace == PROJECT and key not in accepted
    ]
    if unknown:
        raise ValueFreeError(
            [
                f"{join_path((key,))}: unknown key in the {PROJECT} namespace; accepted keys are "
                f"{', '.join(sorted(accepted))}"
                for key in unknown
            ]
        )


def _require_secret(config: pulumi.Config, key: str, used_by: str, how: str) -> pulumi.Output[str]:
    """The secret config value ``key``; a :class:`ConfigError` when it is missing or stored in plain text."""
    if key in (*_SPEC_KEYS, "acknowledge"):
        raise ConfigError.at((key,), f"names a gpucell config key, not a secret ({used_by})")
    secret = config.get_secret(key)
    if secret is None:
        raise ConfigError.at((key,), f"secret is missing ({used_by}); set it with `pulumi config set --secret {how}`")
    if not _is_secret(f"{PROJECT}:{key}"):
        raise ConfigError.at(
            (key,),
            f"is stored in plain text in the stack file; store it encrypted with `pulumi config set --secret {how}`",
        )
    return secret


def _read_secret(
    config: pulumi.Config, credentials: dict[str, pulumi.Output[str]], key: str, used_by: str, how: str
) -> list[str]:
    """Read the secret config value ``key`` into ``credentials``; its problem lines (:func:`_require_secret`) when
    it is missing or stored in plain text, else none."""
    try:
        credentials[key] = _require_secret(config, key, used_by, how)
    except ConfigError as exc:
        return exc.lines
    return []


def _acknowledgements(config: pulumi.Config, regions: list[str]) -> list[Acknowledgement]:
    """``gpucell:acknowledge``, validated; every region it names (but for ``regionRemoved``) must be in the stack."""
    try:
        raw = config.get_object("acknowledge")
    except pulumi.config.ConfigTypeError:
        raise ConfigError.at(("acknowledge",), _not_json("acknowledge", "a YAML/JSON list")) from None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError.at(
            ("acknowledge",),
            "must be a list of {change, region, reason} entries, e.g. "
            '[{change: podCidr, region: fra1, reason: "maintenance window CHG-1234"}]',
        )
    acknowledgements = StackAcknowledgements.model_validate({"acknowledge": raw}).acknowledge
    for index, entry in enumerate(acknowledgements):
        if entry.change is not Change.REGION_REMOVED and entry.region not in regions:
            raise ConfigError.at(
                ("acknowledge", index, "region"),
                f"{entry.region!r} is not a region of this stack; regions: {', '.join(regions)}",
            )
    return acknowledgements


def _credentials_problem(key: str, scheme: str, used_by: str) -> str | None:
    """A line when the secret ``key`` holds no valid credentials for ``scheme``; it never shows the value.

    Checked here, before anything is registered, so that ``pulumi up`` stops with this line instead of failing
    inside the Secret's ``apply`` (the value is known to the program: Pulumi hands config to it decrypted).
    """
    value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
    if value is None:
        return None
    try:
        credentials_secret_data(scheme, value)
    except ValueError as exc:
        example = "'<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>'" if scheme == "s3" else "<token>"
        return (
            f"{key}: {exc} ({used_by} reads it for {scheme}:// storage); set it with "
            f"`pulumi config set --secret {key} -- {example}`"
        )
    return None


def _etcd_credentials_problem(key: str, region: str) -> str | None:
    """A line when the etcd S3 secret ``key`` is not ``<access key id>:<secret access key>``; never the value.

    Checked before anything is registered, as :func:`_credentials_problem` is, so that ``pulumi up`` stops with
    this line and not inside the kube-system Secret's ``apply``.
    """
    value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
    if value is None:
        return None
    key_id, sep, secret = value.partition(":")
    if sep and key_id and secret:
        return None
    return (
        f"{key}: is not '<access key id>:<secret access key>' (regions.{region}.etcd.snapshots.s3."
        f"credentialsConfigKey names it; the value is not shown); set it with "
        f"`pulumi config set --secret {key} -- '<access key id>:<secret access key>'`"
    )


def _read_remote_write_credentials(
    config: pulumi.Config, region: str, cell: CellSpec, credentials: dict[str, pulumi.Output[str]]
) -> list[str]:
    """Read the secret ``metrics.remoteWrite.credentialsConfigKey`` names into ``credentials`` (once per key);
    the problem line when it is missing, not a secret or not ``<user>:<password>`` (never its value).

    Its shape is checked here, as the etcd and backup credentials are, so that ``pulumi up`` stops with this line
    and not inside the ``monitoring`` Secret's ``apply``
    (:func:`gpucell.components.metrics.remote_write_secret_data`)."""
    remote = cell.metrics.remote_write if cell.metrics.enabled else None
    key = None if remote is None else remote.credentials_config_key
    if key is None or key in credentials:
        return []
    used_by = f"regions.{region}.metrics.remoteWrite.credentialsConfigKey names it"
    missing = _read_secret(config, credentials, key, used_by, f"{key} -- '<user>:<password>'")
    if missing:
        return missing
    value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
    if value is None:
        return []
    try:
        remote_write_secret_data(value)
    except ValueError:
        return [
            f"{key}: is not '<user>:<password>' ({used_by}; the value is not shown); set it with "
            f"`pulumi config set --secret {key} -- '<user>:<password>'`"
        ]
    return []


def _user_password_problem(key: str, used_by: str) -> str | None:
    """A line when the secret ``key`` is not ``<user>:<password>`` (import credentials); never the value."""
    value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
    if value is None:
        return None
    try:
        import_secret_data(value)
    except ValueError:
        return (
            f"{key}: is not '<user>:<password>' ({used_by} names it; the value is not shown); set it with "
            f"`pulumi config set --secret {key} -- '<user>:<password>'`"
        )
    return None


def _user_data_problem(key: str, where: str, vm: GpuVirtualMachineSpec) -> str | None:
    """A line when the secret user data ``key`` is not cloud-config or conflicts with gpucell's parts of ``vm``'s
    (:func:`gpucell.spec.cloud_init.merge_user_data`), naming keys only, never the value. Checked here, before
    anything is registered, since the program knows the decrypted value."""
    value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
    if value is None:
        return None
    try:
        ours = GpucellUserData(vm.user, vm.ssh_keys)
        merge_user_data(secret_user_data(value), ours, where=where.rsplit(".cloudInit", 1)[0])
    except UserDataError as exc:
        inner = join_path(exc.rel_path)
        at = f", at {inner}," if inner else ""
        return f"{where}: the user data in secret {key!r}{at} {exc.message} (the value is not shown)"
    return None


def _read_vm_secrets(config: pulumi.Config, spec: StackSpec, credentials: dict[str, pulumi.Output[str]]) -> list[str]:
    """Read every secret a VM or an image catalog names (user data, import credentials) into ``credentials``, once
    per key; the problem lines when one is missing, in plain text, or not what its field needs."""
    wanted: list[tuple[str, str, str, GpuVirtualMachineSpec | None]] = []
    for key, region, tenant, where, _ in spec.tenant_secrets():
        path = join_path(where)
        if where[-1] == "userDataConfigKey":
            wanted.append(
                (key, path, "user-data", spec.regions[region].tenants[tenant].virtual_machines[str(where[5])])
            )
        elif "virtualMachines" in where:
            wanted.append((key, path, "import", None))
    for region, cell in spec.regions.items():
        for catalog, entry in cell.image_catalogs.items():
            for image, item in entry.images.items():
                if item.source.credentials_config_key is not None:
                    path = f"regions.{region}.imageCatalogs.{catalog}.images.{image}.source.credentialsConfigKey"
                    wanted.append((item.source.credentials_config_key, path, "import", None))
    problems: list[str] = []
    for key, path, kind, vm in wanted:
        if key not in credentials:
            how = f"{key} < user-data.yaml" if kind == "user-data" else f"{key} -- '<user>:<password>'"
            missing = _read_secret(config, credentials, key, f"{path} names it", how)
            if missing:
                problems += missing
                continue
        problem = _user_data_problem(key, path, vm) if vm is not None else _user_password_problem(key, path)
        if problem is not None:
            problems.append(problem)
    return problems


def _read_backup_secrets(
    config: pulumi.Config, region: str, cell: CellSpec, credentials: dict[str, pulumi.Output[str]]
) -> list[str]:
    """Read the two secrets ``backups`` names into ``credentials``; the problem lines when one is missing, stored in
    plain text, or (the bucket's) not ``<access key id>:<secret access key>``, never showing a value."""
    backups = cell.backups
    if backups is None:
        return []
    problems: list[str] = []
    for key, used_by, how in (
        (
            backups.storage.credentials_config_key,
            "backups.storage.credentialsConfigKey",
            "'<access key id>:<secret access key>'",
        ),
        (backups.repository_password_config_key, "backups.repositoryPasswordConfigKey", '"$(openssl rand -base64 32)"'),
    ):
        if key is None or key in credentials:
            continue
        missing = _read_secret(config, credentials, key, f"regions.{region}.{used_by} names it", f"{key} -- {how}")
        if missing:
            problems += missing
            continue
        value = pulumi.runtime.config.get_config(f"{PROJECT}:{key}")
        if value is None:
            continue
        if used_by.startswith("backups.storage"):
            key_id, sep, secret = value.partition(":")
            wrong = not (sep and key_id and secret)
        else:
            wrong = len(value.strip()) < 16
        if wrong:
            what = how if used_by.startswith("backups.storage") else "a password of at least 16 characters"
            problems.append(
                f"{key}: is not {what} (regions.{region}.{used_by} names it; the value is not shown); set it with "
                f"`pulumi config set --secret {key} -- {how}`"
            )
    return problems


def _read_env_secrets(
    config: pulumi.Config, region: str, cell: CellSpec, credentials: dict[str, pulumi.Output[str]]
) -> list[str]:
    """Read the secrets endpoints' ``env[].secretConfigKey`` name into ``credentials``; the problem lines when one
    is missing or stored in plain text."""
    problems: list[str] = []
    for tenant_name, tenant in cell.tenants.items():
        for name, endpoint in tenant.model_endpoints.items():
            for index, var in enumerate(endpoint.env):
                key = var.secret_config_key
                if key is None or key in credentials:
                    continue
                used_by = f"regions.{region}.tenants.{tenant_name}.modelEndpoints.{name}.env[{index}]"
                problems += _read_secret(
                    config, credentials, key, f"{used_by}.secretConfigKey names it", f"{key} -- <value of {var.name}>"
                )
    return problems


def load_stack_config(config: pulumi.Config | None = None) -> StackConfig:
    """Read and validate ``gpucell:*`` config. Registers nothing.

    Raises :class:`ConfigError` with one ``key.path: message`` line per problem (unknown key, bad value,
    cross-field rule, missing SSH key or credentials secret, credentials that are not what their storage needs,
    malformed ``gpucell:acknowledge``).
    """
    config = config or pulumi.Config(PROJECT)
    spec = StackSpec.model_validate(_spec_input(config))  # raises ConfigError
    keys: dict[str, pulumi.Output[str]] = {}
    credentials: dict[str, pulumi.Output[str]] = {}
    problems: list[str] = []
    for region, cell in spec.regions.items():
        key_name = cell.ssh.private_key_config_key
        try:
            keys[region] = _require_secret(
                config,
                key_name,
                f"region {region} uses it for SSH, see regions.{region}.ssh.privateKeyConfigKey",
                f"{key_name} < ~/.ssh/id_ed25519",
            )
        except ConfigError as exc:
            problems += exc.lines
        s3 = cell.etcd.snapshots.s3
        if s3 is not None and s3.credentials_config_key not in credentials:
            missing = _read_secret(
                config,
                credentials,
                s3.credentials_config_key,
                f"regions.{region}.etcd.snapshots.s3.credentialsConfigKey names it",
                f"{s3.credentials_config_key} -- '<access key id>:<secret access key>'",
            )
            problems += missing
            problem = None if missing else _etcd_credentials_problem(s3.credentials_config_key, region)
            if problem is not None:
                problems.append(problem)
        problems += _read_remote_write_credentials(config, region, cell, credentials)
        problems += _read_backup_secrets(config, region, cell, credentials)
        problems += _read_env_secrets(config, region, cell, credentials)
        for tenant_name, tenant in cell.tenants.items():
            for name, endpoint in tenant.model_endpoints.items():
                key = endpoint.credentials_config_key
                if key is None or key in credentials:
                    continue
                used_by = f"regions.{region}.tenants.{tenant_name}.modelEndpoints.{name}"
                missing = _read_secret(
                    config, credentials, key, f"{used_by}.credentialsConfigKey names it", f"{key} -- <token>"
                )
                if missing:
                    problems += missing
                    continue
                problem = _credentials_problem(key, storage_scheme(endpoint.storage_uri), used_by)
                if problem is not None:
                    problems.append(problem)
    problems += _read_vm_secrets(config, spec, credentials)
    if problems:
        raise ValueFreeError(problems)
    acknowledgements = _acknowledgements(config, list(spec.regions))
    _check_top_level_keys({c.ssh.private_key_config_key for c in spec.regions.values()} | set(credentials))
    return StackConfig(spec=spec, ssh_private_keys=keys, credentials=credentials, acknowledgements=acknowledgements)
