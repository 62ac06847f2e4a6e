"""Cluster targets with ACL 1.0 on and the ACL files a test gives them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import yaml

from interop.target import ClusterTarget, create_target


def rocketmq_home(workdir: Path) -> Path:
    return workdir / "rocketmq-home"


def acl_cluster(kind: str, workdir: Path, files: Mapping[str, object]) -> Iterator[ClusterTarget]:
    """A started target with aclEnable=true and these ACL files (paths under its RocketMQ
    home, e.g. conf/plain_acl.yml), killed after: nothing reads its store afterwards."""
    home = rocketmq_home(workdir)
    for name, data in files.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(yaml.safe_dump(data, sort_keys=False))
    target = create_target(kind, workdir, {"aclEnable": "true", "rocketmqHome": str(home)})
    target.start()
    try:
        yield target
    finally:
        target.kill()
