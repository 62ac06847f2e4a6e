"""RocketMQ 4.9's plain ACL files: `conf/plain_acl.yml` and every `*.yml` under `conf/acl/`.

    files = PlainAclFiles(Path(rocketmq_home))
    snapshot = files.load()                # accounts, global white list, each file's version
    files.update_account(config, snapshot) # updateAclConfig: written back atomically
    all_acl_config(snapshot.files)         # every account as the files hold it (code 54)

The files live under the RocketMQ home (broker.conf's `rocketmqHome`, else $ROCKETMQ_HOME): the
default file is `conf/plain_acl.yml` (RocketMQ's `-Drocketmq.acl.plain.file`, here
$ROCKETMQ_ACL_PLAIN_FILE, relative to the home), and every `.yml`/`.yaml` file below `conf/acl`
adds its accounts and white addresses. An access key defined in two files counts in the first.
Each file keeps its own `dataVersion`, bumped by every write the admin codes make.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from sidewinder.acl.addresses import AddressMatcher, address_matcher
from sidewinder.acl.errors import AclConfigError
from sidewinder.acl.permission import (
    check_resource_perms,
    parse_perm,
    resource_perms,
)
from sidewinder.common.fileio import write_atomic
from sidewinder.protocol.data_version import DataVersion

log = structlog.get_logger(__name__)

DEFAULT_PLAIN_FILE = "conf/plain_acl.yml"
PLAIN_FILE_ENV = "ROCKETMQ_ACL_PLAIN_FILE"
KEY_MIN_LENGTH = 6  # a key must be longer than this


@dataclass(frozen=True)
class PlainAccessConfig:
    """One account as the file (or updateAclConfig) states it."""

    access_key: str | None
    secret_key: str | None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    @classmethod
    def from_yaml(cls, entry: Mapping[str, Any]) -> PlainAccessConfig:
        def text(key: str) -> str | None:
            return _java_text(entry.get(key))

        def texts(key: str) -> list[str] | None:
            value = entry.get(key)
            return None if value is None else [str(_java_text(v)) for v in value]

        admin = entry.get("admin")
        return cls(
            access_key=text("accessKey"),
            secret_key=text("secretKey"),
            white_remote_address=text("whiteRemoteAddress"),
            admin=admin is True or str(admin).lower() == "true",
            default_topic_perm=text("defaultTopicPerm"),
            default_group_perm=text("defaultGroupPerm"),
            topic_perms=texts("topicPerms"),
            group_perms=texts("groupPerms"),
        )

    def to_json(self) -> dict[str, Any]:
        """As fastjson writes a PlainAccessConfig: null fields left out, `admin` always."""
        fields = {
            "accessKey": self.access_key,
            "secretKey": self.secret_key,
            "whiteRemoteAddress": self.white_remote_address,
            "admin": self.admin,
            "defaultTopicPerm": self.default_topic_perm,
            "defaultGroupPerm": self.default_group_perm,
            "topicPerms": self.topic_perms,
            "groupPerms": self.group_perms,
        }
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True)
class Account:
    """An account ready to check requests against (PlainAccessResource)."""

    access_key: str
    secret_key: str
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int]  # topic, or %RETRY%group -> permission
    white: AddressMatcher


@dataclass
class AclSnapshot:
    """What one load of the files found; replaced whole on reload, never changed after."""

    files: list[Path] = field(default_factory=list)
    accounts: dict[str, Account] = field(default_factory=dict)
    account_files: dict[str, Path] = field(default_factory=dict)
    global_white: list[AddressMatcher] = field(default_factory=list)
    versions: dict[Path, DataVersion] = field(default_factory=dict)
    default_version: DataVersion = field(default_factory=DataVersion)


def check_keys(config: PlainAccessConfig) -> None:
    ak, sk = config.access_key, config.secret_key
    if ak is None or sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
        raise AclConfigError(
            f"The accessKey={_java(ak)} and secretKey={_java(sk)} cannot be null "
            "and length should longer than 6"
        )


def build_account(config: PlainAccessConfig) -> Account:
    check_keys(config)
    assert config.access_key is not None and config.secret_key is not None
    return Account(
        access_key=config.access_key,
        secret_key=config.secret_key,
        admin=config.admin,
        default_topic_perm=parse_perm(config.default_topic_perm),
        default_group_perm=parse_perm(config.default_group_perm),
        perms={
            **resource_perms(config.group_perms, group=True),
            **resource_perms(config.topic_perms, group=False),
        },
        white=address_matcher(config.white_remote_address),
    )


def _java(value: object) -> str:
    return "null" if value is None else str(value)


def _java_text(value: object) -> str | None:
    """A YAML scalar as fastjson casts it to a String: booleans in lower case."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _read(path: Path) -> dict[str, Any] | None:
    """The file's mapping; None for a missing or empty file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AclConfigError(f"{path}: {exc}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: not a mapping of ACL settings")
    return data


def _version_of(data: Mapping[str, Any]) -> DataVersion:
    versions = data.get("dataVersion")
    if versions:
        first = versions[0] or {}
        return DataVersion(int(first.get("timestamp", 0)), int(first.get("counter", 0)))
    return DataVersion()


class PlainAclFiles:
    def __init__(self, home: Path | None, plain_file: str | None = None) -> None:
        self.home = home
        relative = plain_file or os.environ.get(PLAIN_FILE_ENV) or DEFAULT_PLAIN_FILE
        self.default_file = home / relative if home is not None else None
        self.acl_dir = home / "conf" / "acl" if home is not None else None

    def files(self) -> list[Path]:
        """Every ACL file, those under conf/acl first (sorted), then the default file."""
        found: list[Path] = []
        if self.acl_dir is not None and self.acl_dir.is_dir():
            for path in sorted(self.acl_dir.rglob("*")):
                if path == self.acl_dir / "tools.yml" or not path.is_file():
                    continue
                if path.suffix in (".yml", ".yaml"):
                    found.append(path)
        default = self.default_file
        if default is not None and default.is_file() and default not in found:
            found.append(default)
        return found

    def stamps(self) -> dict[Path, int]:
        """Each file's modification time, for the watcher."""
        out: dict[Path, int] = {}
        for path in self.files():
            try:
                out[path] = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
        return out

    def load(self) -> AclSnapshot:
        """Read every file (creating an empty default file first, as RocketMQ does)."""
        if self.default_file is None:
            return AclSnapshot()
        if not self.default_file.exists():
            self.default_file.parent.mkdir(parents=True, exist_ok=True)
            self.default_file.touch()
        snapshot = AclSnapshot(files=self.files())
        for path in snapshot.files:
            data = _read(path)
            if not data:
                log.warning("acl.file_empty", file=str(path))
                continue
            for pattern in data.get("globalWhiteRemoteAddresses") or []:
                snapshot.global_white.append(address_matcher(str(pattern)))
            for entry in data.get("accounts") or []:
                account = build_account(PlainAccessConfig.from_yaml(entry))
                if account.access_key in snapshot.accounts:
                    log.warning("acl.access_key_repeated", access_key=account.access_key)
                    continue
                snapshot.accounts[account.access_key] = account
                snapshot.account_files[account.access_key] = path
            snapshot.versions[path] = _version_of(data)
        if self.default_file in snapshot.versions:
            snapshot.default_version = snapshot.versions[self.default_file]
        return snapshot

    # -- the admin codes' writes ----------------------------------------------------------------
    def _write(self, path: Path, data: dict[str, Any]) -> None:
        """Bump the file's dataVersion and write it whole, atomically."""
        version = _version_of(data) if data.get("dataVersion") else DataVersion()
        version.bump()
        data["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        write_atomic(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))

    def update_account(self, config: PlainAccessConfig, snapshot: AclSnapshot) -> bool:
        """Create or change an account (UPDATE_AND_CREATE_ACL_CONFIG), in the file that holds
        it, else in the default file."""
        check_keys(config)
        check_resource_perms(config.topic_perms)
        check_resource_perms(config.group_perms)
        build_account(config)  # its patterns must parse before anything is written
        path = snapshot.account_files.get(config.access_key or "")
        if path is None:
            path = self.default_file
            if path is None:
                return False
            data = _read(path) or {"accounts": []}
            accounts = data.get("accounts") or []
            accounts.append(_account_entry(None, config))
            data["accounts"] = accounts
        else:
            data = _read(path) or {}
            accounts = data.get("accounts")
            if accounts is None:
                data["accounts"] = [_account_entry(None, config)]
            else:
                for entry in accounts:
                    if str(entry.get("accessKey")) == config.access_key:
                        accounts.remove(entry)  # and back at the end, as RocketMQ does
                        accounts.append(_account_entry(entry, config))
                        break
        self._write(path, data)
        return True

    def delete_account(self, access_key: str, snapshot: AclSnapshot) -> bool:
        path = snapshot.account_files.get(access_key) if access_key else None
        if path is None:
            return False
        data = _read(path)
        if not data:
            return True
        accounts = data.get("accounts") or []
        for entry in accounts:
            if str(entry.get("accessKey")) == access_key:
                accounts.remove(entry)
                data["accounts"] = accounts
                self._write(path, data)
                return True
        return False

    def update_global_white(self, addresses: list[str], file_name: str | None) -> bool:
        """Replace a file's globalWhiteRemoteAddresses (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG); the
        file must exist under the RocketMQ home."""
        if self.home is None or self.default_file is None:
            return False
        path = Path(file_name) if file_name else self.default_file
        if not path.is_file() or not str(path).startswith(str(self.home)):
            log.warning("acl.white_addrs_file_refused", file=str(path))
            return False
        data = _read(path) or {}
        data["globalWhiteRemoteAddresses"] = list(addresses)
        self._write(path, data)
        return True


def all_acl_config(files: list[Path]) -> dict[str, Any]:
    """PlainPermissionManager.getAllAclConfig (GET_BROKER_CLUSTER_ACL_CONFIG): the files
    the last load found, read again from disk; every file's global white addresses, in
    file order, and each access key's first account as written (secret key included)."""
    white: list[str | None] = []
    accounts: list[dict[str, Any]] = []
    seen: set[str | None] = set()
    for path in files:
        data = _read(path)
        if not data:
            continue
        white.extend(_java_text(a) for a in data.get("globalWhiteRemoteAddresses") or [])
        for entry in data.get("accounts") or []:
            config = PlainAccessConfig.from_yaml(entry)
            if config.access_key not in seen:
                seen.add(config.access_key)
                accounts.append(config.to_json())
    return {"globalWhiteAddrs": white, "plainAccessConfigs": accounts}


def _account_entry(existing: dict[str, Any] | None, config: PlainAccessConfig) -> dict[str, Any]:
    """PlainPermissionManager.createAclAccessConfigMap: what updateAclConfig writes; keys it
    was not given keep their old values."""
    entry: dict[str, Any] = existing if existing is not None else {}
    entry["accessKey"] = config.access_key
    if config.secret_key:
        entry["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        entry["whiteRemoteAddress"] = config.white_remote_address
    entry["admin"] = config.admin
    if config.default_topic_perm:
        entry["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        entry["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms is not None:
        entry["topicPerms"] = list(config.topic_perms)
    if config.group_perms is not None:
        entry["groupPerms"] = list(config.group_perms)
    return entry
