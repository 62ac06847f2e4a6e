"""The store facade: nothing outside sidewinder/store/ reaches past MessageStore.

Every module of the package outside store/ is read with `ast`; an expression whose type is
MessageStore (a parameter or field annotated so, an attribute assigned one, a local taken from
one) may only be followed by a public member of the class: `store.commit_log.files` or
`self.store.queues.queues` fail here. The types are followed the plain way: annotations on
parameters and class fields, `self.x = <typed>` assignments, and locals assigned a typed value.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidewinder.protocol.record import Host, MessageSysFlag, MessageToStore
from sidewinder.store.commit_log import END_FILE_MIN_BLANK_LENGTH, CommitLog
from sidewinder.store.config import StoreConfig
from sidewinder.store.message_store import MessageStore, PutStatus

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sidewinder"
FACADE = "MessageStore"
ClassFields = dict[str, dict[str, str]]
HOST = Host(b"\x7f\x00\x00\x01", 10911)


def facade_members() -> set[str]:
    """Public names defined on MessageStore: methods, properties, attributes it assigns."""
    tree = ast.parse((PACKAGE / "store" / "message_store.py").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == FACADE]
    names = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return {name for name in names if not name.startswith("_")}


def type_name(annotation: ast.expr | None) -> str | None:
    """The class an annotation names (`X`, `"X"`, `mod.X`, `X | None`), else None."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return "None"
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return type_name(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Attribute):
        return annotation.attr
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = type_name(annotation.left), type_name(annotation.right)
        return left if right == "None" else right if left == "None" else None
    return None


def outside_modules() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] != "store":
            yield path


class Checker(ast.NodeVisitor):
    """Walks one module with the names in scope typed, noting every bad reach."""

    def __init__(self, fields: ClassFields, members: set[str], where: str) -> None:
        self.fields, self.members, self.where = fields, members, where
        self.scopes: list[dict[str, str]] = [{}]
        self.classes: list[str] = []
        self.offences: list[str] = []

    def typeof(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            if node.id == "self" and self.classes:
                return self.classes[-1]
            for scope in reversed(self.scopes):
                if node.id in scope:
                    return scope[node.id]
            return None
        if isinstance(node, ast.Attribute):
            owner = self.typeof(node.value)
            return self.fields.get(owner or "", {}).get(node.attr)
        if isinstance(node, ast.Call):
            return type_name(node.func) if type_name(node.func) == FACADE else None
        return None

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        scope = {a.arg: t for a in args if (t := type_name(a.annotation)) is not None}
        self.scopes.append(scope)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        typed = self.typeof(node.value)
        if typed is None:
            return
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.scopes[-1][target.id] = typed
            elif (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and self.classes
            ):  # `self.store = other.store`: the attribute is typed from here on
                self.fields.setdefault(self.classes[-1], {}).setdefault(target.attr, typed)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if self.typeof(node.value) == FACADE and node.attr not in self.members:
            self.offences.append(f"{self.where}:{node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


def class_fields(trees: list[ast.Module]) -> ClassFields:
    """Each class's typed attributes: annotated fields, `self.x = <annotated parameter>`,
    `self.x: T`, `self.x = T(...)`."""
    fields: ClassFields = {}
    for tree in trees:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            own = fields.setdefault(cls.name, {})
            for node in cls.body:
                if (
                    isinstance(node, ast.AnnAssign)
                    and isinstance(node.target, ast.Name)
                    and (t := type_name(node.annotation)) is not None
                ):
                    own[node.target.id] = t
            for method in cls.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                args = [*method.args.posonlyargs, *method.args.args, *method.args.kwonlyargs]
                params = {a.arg: type_name(a.annotation) for a in args}
                for node in ast.walk(method):
                    target, typed = None, None
                    if isinstance(node, ast.Assign) and len(node.targets) == 1:
                        target, value = node.targets[0], node.value
                        if isinstance(value, ast.Name):
                            typed = params.get(value.id)
                        elif isinstance(value, ast.Call):
                            typed = type_name(value.func)
                    elif isinstance(node, ast.AnnAssign):
                        target, typed = node.target, type_name(node.annotation)
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        and typed is not None
                    ):
                        own.setdefault(target.attr, typed)
    return fields


def reaches_into_the_store() -> list[str]:
    modules = list(outside_modules())
    trees = [ast.parse(path.read_text(), str(path)) for path in modules]
    fields, members = class_fields(trees), facade_members()
    offences: list[str] = []
    for _ in range(2):  # the first round types the attributes assigned from typed values
        offences = []
        for path, tree in zip(modules, trees, strict=True):
            checker = Checker(fields, members, str(path.relative_to(ROOT)))
            checker.visit(tree)
            offences += checker.offences
    return offences


def test_no_module_outside_the_store_reaches_past_the_facade() -> None:
    offences = reaches_into_the_store()
    assert not offences, "reaches past MessageStore:\n" + "\n".join(offences)


def test_the_checker_sees_a_reach(tmp_path: Path) -> None:
    """The check itself: the shapes the broker used to write are caught."""
    source = (
        "class Holder:\n"
        "    def __init__(self, store: MessageStore) -> None:\n"
        "        self.store = store\n"
        "    def reach(self) -> None:\n"
        "        self.store.commit_log.files.last_file\n"
        "        store = self.store\n"
        "        store.queues.queues\n"
        "        self.store.get_messages\n"
        "def free(store: 'MessageStore | None') -> None:\n"
        "    store.index\n"
    )
    tree = ast.parse(source)
    checker = Checker(class_fields([tree]), facade_members(), "x")
    checker.visit(tree)
    found = [offence.split(": ", 1)[1] for offence in checker.offences]
    assert found == ["self.store.commit_log", "store.queues", "store.index"]


def test_the_parts_are_private() -> None:
    members = facade_members()
    for part in ("commit_log", "queues", "index", "group_commit", "reput", "checkpoint"):
        assert part not in members


async def test_segment_room_follows_the_appends(tmp_path: Path) -> None:
    config = StoreConfig(
        store_path_root_dir=tmp_path,
        store_path_commit_log=tmp_path / "commitlog",
        mapped_file_size_commit_log=4096,
        max_message_size=1024,
    )
    store = MessageStore(config, store_host=HOST)
    await store.start()
    try:
        assert store.max_message_size == 1024
        # A record may be 64 KiB more than maxMessageSize (the body's limit): here the segment
        # is the smaller limit.
        assert store.largest_record() == min(1024 + (64 << 10), 4096 - END_FILE_MIN_BLANK_LENGTH)
        assert store.segment_room() == 4096  # no segment yet: the next one is whole
        message = MessageToStore(
            topic=b"T",
            queue_id=0,
            body=b"x" * 200,
            properties=b"",
            born_host=HOST,
            store_host=HOST,
        )
        appended = store.append_many([message])
        assert store.segment_room() == 4096 - appended.end_offset
        while store.segment_room() >= message.record_size + END_FILE_MIN_BLANK_LENGTH:
            store.append_many([message])
        assert store.segment_room() > 0
        store.append_many([message])  # closes the segment with a blank, starts the next
        assert store.segment_room() == 4096 - message.record_size
    finally:
        await store.shutdown()


def batch_of(n: int, body: int, *, queue: int = 1, sys_flag: int = 0) -> list[MessageToStore]:
    return [
        MessageToStore(
            topic=b"T",
            queue_id=queue,
            body=bytes(body),
            properties=f"UNIQ_KEY\x01{i:032X}\x02".encode(),
            born_host=HOST,
            store_host=HOST,
            sys_flag=sys_flag,
        )
        for i in range(n)
    ]


async def test_put_messages_writes_what_put_batch_wrote(tmp_path: Path) -> None:
    """put_messages goes through append_many's route (a MessageRun item) and must answer and
    write as CommitLog.put_batch did: one segment, consecutive queue offsets, same bytes; half
    messages take queue offset 0; an illegal batch is MESSAGE_ILLEGAL with put_batch's remark."""
    segment = 16 << 10
    config = StoreConfig(
        store_path_root_dir=tmp_path / "store",
        store_path_commit_log=tmp_path / "store" / "commitlog",
        mapped_file_size_commit_log=segment,
        max_message_size=8 << 10,
    )
    store = MessageStore(config, store_host=HOST, clock=lambda: 1_700_000_000_000)
    reference = CommitLog(
        tmp_path / "reference", segment_size=segment, max_message_size=8 << 10, store_host=HOST
    )
    half = int(MessageSysFlag.TRANSACTION_PREPARED)
    # The third batch does not fit the first segment's tail: it goes whole to the next one.
    rounds = [
        batch_of(2, 3000),
        batch_of(5, 500),
        batch_of(3, 2200),
        batch_of(2, 100, sys_flag=half),
    ]
    await store.start()
    try:
        for batch in rounds:
            got = await store.put_messages(batch)
            want = reference.put_batch(batch, 1_700_000_000_000)
            assert got.status is PutStatus.PUT_OK and got.append == want
        assert got.append is not None and got.append.phy_offset >= segment  # the second one
        assert got.append is not None and got.append.queue_offset == 0  # half messages
        too_big = batch_of(9, 1900)  # more than a segment
        refused = await store.put_messages(too_big)
        assert refused.status is PutStatus.MESSAGE_ILLEGAL
        assert refused.remark == reference.put_batch(too_big).remark
        with pytest.raises(ValueError, match="one topic and queue"):
            await store.put_messages([*batch_of(1, 1), *batch_of(1, 1, queue=2)])
        assert store.segment_room() == reference.files.last_file.remaining  # type: ignore[union-attr]
    finally:
        await store.shutdown()
    ours = (tmp_path / "store" / "commitlog").iterdir()
    for path in sorted(ours):
        assert path.read_bytes() == (tmp_path / "reference" / path.name).read_bytes()
    reference.close()
