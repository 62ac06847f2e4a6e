"""The ACL 1.0 keys a tool signs with, found as RocketMQ's tools find them.

    configured_credentials("ak", "sk")                    # given on the command line
    configured_credentials(None, None, Path("keys.yml"))  # accessKey/secretKey of a YAML file
    configured_credentials(None, None)                    # $ROCKETMQ_HOME/conf/tools.yml, or None

A file keeps the secret out of the process list, where command-line options show.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from sidewinder.protocol.acl import Credentials, credentials


class KeysFileError(ValueError):
    """A keys file that was named but cannot be read or holds no accessKey and secretKey."""


def read_keys_file(path: Path) -> Credentials | None:
    """accessKey and secretKey of a YAML file (RocketMQ's conf/tools.yml form); None when the
    file names neither."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise KeysFileError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise KeysFileError(f"{path}: expected accessKey and secretKey, got {type(data).__name__}")
    ak, sk = data.get("accessKey"), data.get("secretKey")
    if not ak and not sk:
        return None
    if not ak or not sk:
        raise KeysFileError(f"{path}: accessKey and secretKey go together")
    return credentials(str(ak), str(sk))


def configured_credentials(
    access_key: str | None, secret_key: str | None, keys_file: Path | None = None
) -> Credentials | None:
    """The options, else `keys_file` (which must hold both keys), else
    `$ROCKETMQ_HOME/conf/tools.yml` when there is one, else None."""
    given = credentials(access_key, secret_key)
    if given is not None:
        return given
    if keys_file is not None:
        found = read_keys_file(keys_file)
        if found is None:
            raise KeysFileError(f"{keys_file}: no accessKey and secretKey")
        return found
    home = os.environ.get("ROCKETMQ_HOME")
    tools = Path(home) / "conf" / "tools.yml" if home else None
    if tools is None or not tools.is_file():
        return None
    return read_keys_file(tools)
