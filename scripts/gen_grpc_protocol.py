"""Make `sidewinder/proxy/grpc_protocol/descriptors.py`: RocketMQ 5's gRPC protocol (protos
`apache/rocketmq/v2/{definition,service,admin}.proto`) as the serialized FileDescriptorProto of
each file, taken from the published artifact `org.apache.rocketmq:rocketmq-proto:2.0.4`
(sources jar, Maven Central), which RocketMQ 5.3.x builds against.

    .venv/bin/python scripts/gen_grpc_protocol.py            # rewrite the module
    .venv/bin/python scripts/gen_grpc_protocol.py --check    # exit 1 if it differs

The jar carries no .proto files, but protoc's Java output embeds each file's descriptor as
Java string literals (`descriptorData`); those bytes are what protoc would compile the .proto
into, so no protoc and no generated Python code are needed: `grpc_protocol` builds the message
classes from them at import time in a descriptor pool of its own.
"""

from __future__ import annotations

import argparse
import base64
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "sidewinder" / "proxy" / "grpc_protocol" / "descriptors.py"
GROUP, ARTIFACT, VERSION = "org.apache.rocketmq", "rocketmq-proto", "2.0.4"
# Java outer class -> the name the module gives the file's descriptor, in dependency order.
FILES = (("MQDomain", "DEFINITION"), ("MQService", "SERVICE"), ("MQAdmin", "ADMIN"))
_ARRAY = re.compile(r"descriptorData = \{(.*?)\};", re.S)
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[0-7]{1,3}|.)")
_SIMPLE = {"n": "\n", "t": "\t", "b": "\b", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def sources_jar(into: Path) -> Path:
    """The sources jar, copied into `into` by Maven (from its local repository, or fetched)."""
    coordinates = f"{GROUP}:{ARTIFACT}:{VERSION}:jar:sources"
    subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "dependency:copy",
            f"-Dartifact={coordinates}",
            f"-DoutputDirectory={into}",
        ],
        check=True,
    )
    return into / f"{ARTIFACT}-{VERSION}-sources.jar"


def java_string(literal: str) -> str:
    """A Java string literal's value (its escapes, including unicode ones, undone)."""

    def undo(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape[0] == "u" and len(escape) == 5:
            return chr(int(escape[1:], 16))
        if escape[0] in "01234567":
            return chr(int(escape, 8))
        return _SIMPLE[escape]

    return _ESCAPE.sub(undo, literal)


def descriptor_bytes(java_source: str) -> bytes:
    """The FileDescriptorProto a protoc-generated Java outer class embeds: its `descriptorData`
    strings joined, one char per byte (protobuf-java reads them as ISO-8859-1)."""
    found = _ARRAY.search(java_source)
    if found is None:
        raise ValueError("no descriptorData array")
    text = "".join(java_string(part) for part in _LITERAL.findall(found.group(1)))
    data = text.encode("latin-1")
    descriptor_pb2.FileDescriptorProto.FromString(data)  # it parses, or this raises
    return data


def render(descriptors: dict[str, bytes]) -> str:
    lines = [
        '"""RocketMQ 5\'s gRPC protocol: the serialized FileDescriptorProto of each file, base64.',
        "",
        f"Made by scripts/gen_grpc_protocol.py from {GROUP}:{ARTIFACT}:{VERSION}",
        "(Maven Central); do not edit.",
        '"""',
        "",
        f'PROTO_VERSION = "{VERSION}"',
    ]
    for name, data in descriptors.items():
        text = base64.b64encode(data).decode()
        lines += ["", f"{name} = ("]
        lines += [f'    "{text[at : at + 88]}"' for at in range(0, len(text), 88)]
        lines.append(")")
    return "\n".join(lines) + "\n"


def generate() -> str:
    with tempfile.TemporaryDirectory() as folder, zipfile.ZipFile(sources_jar(Path(folder))) as jar:
        descriptors = {
            name: descriptor_bytes(jar.read(f"apache/rocketmq/v2/{outer}.java").decode())
            for outer, name in FILES
        }
    return render(descriptors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the module differs")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        same = OUTPUT.exists() and OUTPUT.read_text() == text
        print(f"{OUTPUT.relative_to(ROOT)}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(text):,} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
