"""The keys a tool signs with: options, a keys file, or RocketMQ's conf/tools.yml."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidewinder.client.keys import KeysFileError, configured_credentials
from sidewinder.protocol.acl import Credentials


def test_options_then_the_file_then_tools_yml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = tmp_path / "keys.yml"
    keys.write_text("accessKey: fileKey1\nsecretKey: 12345678\n")  # a number reads as text
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: toolsKey\nsecretKey: toolsSecret\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    assert configured_credentials("cliKey1", "cliSecret", keys) == Credentials(
        "cliKey1", "cliSecret"
    )
    assert configured_credentials(None, None, keys) == Credentials("fileKey1", "12345678")
    assert configured_credentials(None, None) == Credentials("toolsKey", "toolsSecret")
    monkeypatch.delenv("ROCKETMQ_HOME")
    assert configured_credentials(None, None) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("accessKey: onlyKey1\n", "go together"),
        ("- a list\n", "expected accessKey and secretKey"),
        ("other: 1\n", "no accessKey and secretKey"),
        ("accessKey: [unclosed\n", "keys.yml"),
    ],
)
def test_a_named_file_without_both_keys_is_an_error(tmp_path: Path, text: str, says: str) -> None:
    keys = tmp_path / "keys.yml"
    keys.write_text(text)
    with pytest.raises(KeysFileError, match=r"keys\.yml") as refused:
        configured_credentials(None, None, keys)
    assert says in str(refused.value)
    with pytest.raises(KeysFileError, match="No such file"):
        configured_credentials(None, None, tmp_path / "missing.yml")
