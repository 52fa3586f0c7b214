"""A VM's own cloud-init: user data (``#cloud-config`` YAML) and network data, and how gpucell's parts merge in.

gpucell writes part of every VM's user data itself (:func:`merge_user_data`): the VM's user with its SSH keys
(``users``), password and root SSH logins off (``ssh_pwauth: false``, ``disable_root: true``) and, on a VM with
part of an HGX board, the modprobe file turning NVLink off (``write_files``). A tenant's user data is merged with
them, never replaced: its ``users`` and ``write_files`` keep their entries and gain gpucell's, every other key is
the tenant's. A key both set differently is a conflict, refused with one line naming both keys.

Only cloud-config is accepted (cloud-init "User data formats": ``#cloud-config``): a shell script (``#!``), an
``#include`` list, a Jinja template (``## template: jinja``) or MIME multi-part user data cannot be merged, so they
are refused rather than silently shadowing gpucell's users and keys. The structure is checked here, where the plan
and ``pulumi up`` always can; the keys themselves are checked against cloud-init's own JSON schema
(``cloudinit/config/schemas/schema-cloud-config-v1.json`` of canonical/cloud-init) by ``gpucell plan --check``,
from the schema directory ``gpucell schemas fetch`` fills (:mod:`gpucell.stacks.conformance.cloud_init`).

Network data is a cloud-init network config, version 1 or 2 (cloud-init "Network configuration"), given to the
guest as the NoCloud ``network-config`` through the same Secret (KubeVirt reads the key ``networkdata``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml
from pydantic import ValidationInfo, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key

__all__ = [
    "CLOUD_CONFIG_HEADER",
    "MAX_CLOUD_INIT_BYTES",
    "MAX_CLOUD_INIT_DEPTH",
    "NVLINK_DISABLE_OPTION",
    "NVLINK_MODPROBE_PATH",
    "PLAN_STAND_IN_PREFIX",
    "CloudInitSpec",
    "GpucellUserData",
    "UserDataError",
    "merge_user_data",
    "parse_cloud_config",
    "parse_network_config",
    "render_cloud_config",
    "secret_user_data",
]

CLOUD_CONFIG_HEADER = "#cloud-config"
"""The first line of cloud-config user data (cloud-init "User data formats")."""
MAX_CLOUD_INIT_BYTES = 65536
"""The most bytes of user data or network data gpucell accepts (64 KiB): a Kubernetes Secret holds up to 1 MiB, but
a cloud-config that size is a mistake, and a bound keeps a pull request's YAML from costing the plan."""
MAX_CLOUD_INIT_DEPTH = 64
"""The most levels of mappings and lists user data or network data may nest (the stack file's own bound,
:data:`gpucell.stacks.plan.MAX_DEPTH`): rendering, merging and checking a document walk it recursively, and ~330
levels of ``[[[...]]]`` in 1 KiB would exhaust Python's recursion limit (a RecursionError instead of one line)."""
NVLINK_MODPROBE_PATH = "/etc/modprobe.d/gpucell-nvlink.conf"
"""Where a partial-board VM's cloud-init puts the ``nvidia`` module option turning NVLink off."""
NVLINK_DISABLE_OPTION = "options nvidia NVreg_NvLinkDisable=1"
"""The modprobe line; ``NVreg_NvLinkDisable=1`` flips the fabric state to N/A so CUDA initialises without NVSwitches
(cozystack/cozystack ``docs/changelogs/v1.5.0.md``, PR #2780)."""
_NVLINK_NOTE = (
    "# gpucell: this VM holds part of an HGX board and none of its NVSwitches; with NVLink on, the "
    "driver waits forever for the NVLink fabric.\n"
)
_OTHER_FORMATS = (
    ("#!", "a shell script"),
    ("#include", "an #include list"),
    ("## template:", "a Jinja template"),
    ("content-type:", "MIME multi-part user data"),
    ("mime-version:", "MIME multi-part user data"),
    ("#cloud-boothook", "a cloud boothook"),
    ("#part-handler", "a part handler"),
)
_NOT_MERGEABLE = (
    "gpucell merges its users and SSH keys into cloud-config user data only; write it as #cloud-config "
    "(a script goes under runcmd)"
)


PLAN_STAND_IN_PREFIX = "PLACEHOLDER-SECRET"
"""How the offline plan's stand-ins for encrypted config values start (:func:`gpucell.stacks.plan.placeholder`, which
decrypts nothing). A user-data secret's stand-in is not cloud-config, so :func:`secret_user_data` reads it as empty
user data: the plan renders gpucell's parts, and ``pulumi up``, which has the real value, checks and merges it."""


def secret_user_data(text: str) -> dict[str, Any]:
    """The cloud-config of user data held in a secret: :func:`parse_cloud_config` (``secret=True``: a refusal shows
    nothing of the text), or nothing for the offline plan's stand-in (:data:`PLAN_STAND_IN_PREFIX`)."""
    return {} if text.startswith(PLAN_STAND_IN_PREFIX) else parse_cloud_config(text, secret=True)


class UserDataError(ValueError):
    """User or network data gpucell refuses: ``rel_path`` is the key below ``userData``/``networkData`` (empty for
    the whole document), ``message`` the rest of the line."""

    def __init__(self, rel_path: Sequence[str | int], message: str) -> None:
        super().__init__(message)
        self.rel_path = tuple(rel_path)
        self.message = message


class _CheckedLoader(yaml.CSafeLoader):
    """PyYAML's safe loader that refuses a key twice in one mapping: YAML keeps the last silently (and so does
    cloud-init, which loads user data the same way), so a second ``runcmd:`` would drop the first without a word."""

    secret = False
    """Set per load: the user data is a secret, so a refusal names lines, never keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            line, identity = key_node.start_mark.line + 1, (key_node.tag, key_node.value)
            if identity in seen:
                key = "a key" if self.secret else f"key {shown(key_node.value)}"
                raise UserDataError(
                    (),
                    f"holds {key} twice in one mapping (lines {seen[identity]} and {line}): YAML keeps only the "
                    "last, so the first would be dropped; write it once",
                )
            seen[identity] = line
        return super().construct_mapping(node, deep)


def _load(text: str, what: str, *, secret: bool = False) -> Any:
    """The YAML document ``text`` (``what``: "user data" or "network data"); ``secret``: name lines only, never a value
    or key of it. Raises :class:`UserDataError`."""
    size = len(text.encode())
    if size > MAX_CLOUD_INIT_BYTES:
        raise UserDataError((), f"is {size} bytes; gpucell accepts {what} of at most {MAX_CLOUD_INIT_BYTES} bytes")
    try:
        # Aliases refused first: without them a document holds at most as many values as it has bytes, so the size
        # bound above bounds what loading expands ("billion laughs" cannot grow it). Depth is bounded from the same
        # events, before anything is built: constructing, merging and dumping recurse once per level.
        depth = 0
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                raise UserDataError((), f"holds a YAML alias (line {line}); write the value out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_CLOUD_INIT_DEPTH:
                    raise UserDataError(
                        (),
                        f"nests mappings and lists more than {MAX_CLOUD_INIT_DEPTH} levels deep (line {line}); "
                        f"gpucell accepts {what} of at most {MAX_CLOUD_INIT_DEPTH} levels",
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        loader = _CheckedLoader(text)
        loader.secret = secret
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except UserDataError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserDataError((), f"is not valid YAML{where}" + ("" if secret else f": {problem}")) from None
    except (ValueError, TypeError, OverflowError):
        # A plain scalar that YAML resolves to a date, or a !!int/!!float tag, that does not construct (2024-13-45):
        # PyYAML raises the constructor's own error, whose text may hold the value.
        raise UserDataError(
            (),
            "is not valid YAML: a value reads as a date or a tagged number that does not exist (2024-13-45, "
            "!!int abc); quote it to keep it a string",
        ) from None


def parse_cloud_config(text: str, *, secret: bool = False) -> dict[str, Any]:
    """The cloud-config mapping of user data ``text``; ``secret`` (user data from a secret config key): a refusal
    names lines and keys of gpucell's, never the text's own.

    Raises :class:`UserDataError` when ``text`` does not start with the line ``#cloud-config``, names another user
    data format (script, ``#include``, Jinja, MIME), is not YAML (without aliases, without a key twice in one
    mapping), is not a mapping with string keys, or is larger than :data:`MAX_CLOUD_INIT_BYTES`.
    """
    first = text.lstrip("\ufeff").split("\n", 1)[0].rstrip()
    if first != CLOUD_CONFIG_HEADER:
        lowered = first.lower()
        named = next((what for prefix, what in _OTHER_FORMATS if lowered.startswith(prefix)), None)
        if named is not None:
            raise UserDataError((), f"is {named}, not cloud-config; {_NOT_MERGEABLE}")
        found = "" if secret else f" (it is {shown(first, 40)})"
        raise UserDataError((), f"is not cloud-config: its first line must be {CLOUD_CONFIG_HEADER}{found}")
    document = _load(text, "user data", secret=secret)
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise UserDataError((), f"is not cloud-config: a YAML mapping of cloud-init modules, not a {_kind(document)}")
    for key in document:
        if not isinstance(key, str):
            shown_key = "a key" if secret else f"key {shown(key)}"
            raise UserDataError((), f"is not cloud-config: {shown_key} is not a string")
    return document


def parse_network_config(text: str) -> dict[str, Any]:
    """The network config of network data ``text``: a YAML mapping with ``version: 1`` or ``version: 2``, at the
    top or under ``network:`` (both forms cloud-init reads). Raises :class:`UserDataError` otherwise."""
    document = _load(text, "network data")
    if not isinstance(document, dict):
        raise UserDataError((), f"is not a network config: a YAML mapping with version 1 or 2, not a {_kind(document)}")
    network = document.get("network")
    inner: dict[str, Any] = network if isinstance(network, dict) else document
    if inner.get("version") not in (1, 2):
        raise UserDataError(
            ("version",),
            f"{shown(inner.get('version'))} is not a cloud-init network config version; use 1 or 2 (version 2 is "
            "netplan's format)",
        )
    return document


def _kind(value: object) -> str:
    kinds = {list: "list", dict: "mapping", str: "string", int: "number", float: "number", bool: "boolean"}
    return kinds.get(type(value), "value")


class CloudInitSpec(SpecModel):
    """A VM's own cloud-init, merged with what gpucell writes (its user, SSH keys, NVLink setting)."""

    user_data: str | None = None
    """Cloud-config user data (``#cloud-config`` first, then YAML: ``packages``, ``runcmd``, ``write_files``...),
    stored in the VM's cloud-init Secret. For user data that holds secrets, use ``userDataConfigKey``."""
    user_data_config_key: str | None = None
    """Secret stack config key holding the cloud-config user data instead (``pulumi config set --secret KEY <
    user-data.yaml``), owned by the VM's tenant (docs/security.md, "Who owns a secret"): checked and merged when
    ``pulumi up`` runs, never shown."""
    network_data: str | None = None
    """Cloud-init network config, version 1 or 2 (netplan's format), given to the guest as NoCloud
    ``network-config``. None: the guest configures its interface by DHCP, which KubeVirt's masquerade binding
    answers."""

    @field_validator("user_data", "network_data")
    @classmethod
    def _parses(cls, value: str | None, info: ValidationInfo) -> str | None:
        parse = parse_cloud_config if info.field_name == "user_data" else parse_network_config
        if value is not None:
            try:
                parse(value)
            except UserDataError as exc:
                raise SpecError(exc.rel_path, exc.message) from None
        return value

    @field_validator("user_data_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @model_validator(mode="after")
    def _one_source(self) -> CloudInitSpec:
        if self.user_data is not None and self.user_data_config_key is not None:
            raise SpecError(
                ("userDataConfigKey",), "and userData both give the user data; keep one (the config key for secrets)"
            )
        return self


class GpucellUserData:
    """What gpucell writes into a VM's user data: the login user and, for part of an HGX board, NVLink off."""

    def __init__(self, user: str, ssh_keys: Sequence[str], *, nvlink_disabled: bool = False) -> None:
        self.user = user
        self.ssh_keys = list(ssh_keys)
        self.nvlink_disabled = nvlink_disabled

    def user_entry(self) -> dict[str, Any]:
        """The ``users`` entry: passwordless sudo, locked password, bash, the SSH keys (left out when there are none:
        cloud-init's schema wants at least one, ``minItems: 1`` in ``schema-cloud-config-v1.json``)."""
        entry: dict[str, Any] = {
            "name": self.user,
            "lock_passwd": True,
            "shell": "/bin/bash",
            "sudo": "ALL=(ALL) NOPASSWD:ALL",
        }
        if self.ssh_keys:
            entry["ssh_authorized_keys"] = list(self.ssh_keys)
        return entry

    def files(self) -> list[dict[str, Any]]:
        """``write_files`` entries gpucell adds (the NVLink modprobe file, or none)."""
        if not self.nvlink_disabled:
            return []
        content = _NVLINK_NOTE + NVLINK_DISABLE_OPTION + "\n"
        return [{"path": NVLINK_MODPROBE_PATH, "permissions": "0644", "content": content}]


_FIXED: dict[str, Any] = {"ssh_pwauth": False, "disable_root": True}
"""Top-level keys gpucell sets to exactly this value: the user's password is locked, and root logs in by no means."""
_RESERVED_PATH = re.compile(re.escape(NVLINK_MODPROBE_PATH) + r"/?")


def merge_user_data(user_data: Mapping[str, Any], ours: GpucellUserData, *, where: str) -> dict[str, Any]:
    """``user_data`` (a parsed cloud-config) with gpucell's parts merged in: its keys in its order, ``users`` = the
    tenant's entries then gpucell's user, then ``ssh_pwauth: false`` and ``disable_root: true`` where absent,
    ``write_files`` = the tenant's then gpucell's (for empty user data exactly gpucell's own cloud-config).
    ``where`` names gpucell's side in conflict lines (``virtualMachines.train-01``).

    Raises :class:`UserDataError` (key below the user data) on a conflict: a ``users`` entry named like the VM's
    ``user``, ``ssh_pwauth``/``disable_root`` set otherwise than gpucell sets them, a ``write_files`` entry at
    :data:`NVLINK_MODPROBE_PATH`, a ``users``/``write_files`` that is not a list; or on a key that would do nothing
    or undo gpucell's lock: top-level ``password`` or ``ssh_authorized_keys`` with no ``default`` user, a
    ``chpasswd`` entry for the VM's user. Its message names gpucell's key
    and never repeats the tenant's values (user data may come from a secret).
    """
    merged = dict(user_data)
    for key, value in _FIXED.items():
        if key in merged and merged[key] != value:
            raise UserDataError(
                (key,),
                f"conflicts with gpucell's {key}: {str(value).lower()} ({where}: password and root SSH logins stay "
                "off, the VM's user has a locked password and its sshKeys); remove it",
            )
    users = _user_entries(merged.get("users"))
    for path, name in _user_names(users):
        if name == ours.user:
            raise UserDataError(
                ("users", *path),
                f"names the VM's own user {shown(ours.user)} ({where}.user), whom gpucell creates with "
                f"{where}.sshKeys; drop the entry, or set {where}.user to another name",
            )
    if "default" not in {name for _, name in _user_names(users)}:
        _no_default_user(merged, where)
    _chpasswd_of_the_user(merged.get("chpasswd"), ours.user, where)
    merged["users"] = [*(entry for _, entry in users), ours.user_entry()]
    merged.update(_FIXED)  # a key the tenant set keeps its place; gpucell's go after users
    files = _list_of(merged, "write_files")
    for index, entry in enumerate(files):
        if isinstance(entry, dict) and _RESERVED_PATH.fullmatch(str(entry.get("path", ""))):
            raise UserDataError(
                ("write_files", index, "path"),
                f"is {NVLINK_MODPROBE_PATH}, which gpucell writes ({where}: NVLink off for part of an HGX board); "
                "use another path",
            )
    written = ours.files()
    if files or written:
        merged["write_files"] = [*files, *written]
    return merged


def _no_default_user(user_data: Mapping[str, Any], where: str) -> None:
    """Refuse the keys that act on cloud-init's default user when the merged ``users`` has none (gpucell's list
    never does, unless the tenant's entries name ``default``): top-level ``password`` sets the default user's
    password alone (``cc_set_passwords``), and top-level ``ssh_authorized_keys`` go to the default user and to root
    behind ``disable_root``'s refusal prefix (``cc_ssh`` ``apply_credentials``): accepted, they would do nothing."""
    if "password" in user_data:
        raise UserDataError(
            ("password",),
            f"sets the password of cloud-init's default user, which this VM does not have ({where}: its users are "
            "the tenant's entries and gpucell's, and no entry is 'default'); remove it (gpucell's user logs in with "
            "its sshKeys), or set hashed_passwd on a users entry of your own",
        )
    if "ssh_authorized_keys" in user_data:
        raise UserDataError(
            ("ssh_authorized_keys",),
            f"go to cloud-init's default user, which this VM does not have ({where}: no users entry is 'default'), "
            f"and to root behind disable_root's refusal: they let nobody in; put the keys in {where}.sshKeys "
            "(gpucell's user) or in a users entry's ssh_authorized_keys",
        )


def _chpasswd_of_the_user(chpasswd: object, user: str, where: str) -> None:
    """Refuse ``chpasswd`` setting the password of the VM's own user, which gpucell keeps locked (``lock_passwd``):
    ``chpasswd.users[].name`` and the deprecated ``chpasswd.list`` (``name:password`` lines or list items)."""
    if not isinstance(chpasswd, dict):
        return
    named: list[tuple[tuple[str | int, ...], str]] = []
    for index, entry in enumerate(chpasswd.get("users") or []):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            named.append((("users", index, "name"), entry["name"]))
    listed = chpasswd.get("list")
    lines = listed.splitlines() if isinstance(listed, str) else listed if isinstance(listed, list) else []
    named += [(("list", index), str(line).partition(":")[0]) for index, line in enumerate(lines)]
    for path, name in named:
        if name.strip() == user:
            raise UserDataError(
                ("chpasswd", *path),
                f"sets a password for the VM's own user {shown(user)} ({where}.user), whose password gpucell keeps "
                f"locked (it logs in with {where}.sshKeys); drop the entry, or set {where}.user to another name",
            )


def _user_entries(value: object) -> list[tuple[tuple[str | int, ...], Any]]:
    """``(path below users, entry)`` of the ``users`` of user data, the forms cloud-init takes turned into the list
    entries it normalises them to (``_normalize_users`` in ``cloudinit/distros/ug_util.py`` of canonical/cloud-init
    26.2): a string (``default, ops``: comma-separated names) is one entry; a mapping of name -> config gives a
    ``{name, **config}`` entry per name, name -> true the name alone, name -> false nothing. Raises
    :class:`UserDataError` for anything else."""
    if value is None:
        return []
    if isinstance(value, str):
        return [((), value)]
    if isinstance(value, list):
        return [((index,), entry) for index, entry in enumerate(value)]
    if not isinstance(value, dict):
        raise UserDataError(
            ("users",), f"is a {_kind(value)}; cloud-init takes a list, a mapping or a comma-separated string here"
        )
    entries: list[tuple[tuple[str | int, ...], Any]] = []
    for name, config in value.items():
        if isinstance(config, dict):
            entries.append(((str(name),), {"name": name, **config}))
        elif isinstance(config, bool | int | float | str):
            if config is True or str(config).lower().strip() in ("true", "1", "on", "yes"):  # util.is_true
                entries.append(((str(name),), str(name)))
        else:
            raise UserDataError(
                ("users", str(name)), f"is a {_kind(config)}; cloud-init takes a user's config (a mapping) here"
            )
    return entries


def _user_names(entries: Sequence[tuple[tuple[str | int, ...], Any]]) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """``(path below users, name)`` of every user ``entries`` name: an entry's ``name`` (none: the default user), a
    string's comma-separated names, a nested list's (cloud-init's ``uniq_merge``)."""
    for path, entry in entries:
        if isinstance(entry, dict):
            if isinstance(entry.get("name"), str):
                yield (*path, "name") if isinstance(path[-1], int) else path, entry["name"].strip()
        elif isinstance(entry, str | list):
            for part in [entry] if isinstance(entry, str) else entry:
                for name in str(part).split(","):
                    yield path, name.strip()


def _list_of(merged: Mapping[str, Any], key: str) -> list[Any]:
    value = merged.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserDataError(
            (key,), f"is a {_kind(value)}; cloud-init takes a list here, and gpucell adds its own entry"
        )
    return list(value)


def render_cloud_config(config: Mapping[str, Any]) -> str:
    """``#cloud-config`` and ``config`` as block YAML, keys in their order (what the Secret holds)."""
    return CLOUD_CONFIG_HEADER + "\n" + yaml.dump(dict(config), Dumper=yaml.CSafeDumper, sort_keys=False, width=4096)
