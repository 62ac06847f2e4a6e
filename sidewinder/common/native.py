"""The optional Rust extension `sidewinder._native` and the one table of what it replaces.

    from sidewinder.common.native import implementation

    def scan_segment_py(data, position, stop, readable, max_records, rules): ...  # reference
    scan_segment = implementation("scan_segment", scan_segment_py)  # what callers import

Every export of the extension is a faster drop-in for one pure-Python reference, and
REFERENCES lists them all: the reference by "module:attribute", and the attribute of that
module its call sites import (where `implementation` binds the one in use). A call site passes
its reference, which must be the table's, and gets the extension's object (through `adapt`
when the export takes other arguments than the reference) or the reference.

The reference is in use when the extension is absent, was built for another API_VERSION (a
stale .so left in the source tree), or the environment says SIDEWINDER_NATIVE=0 (benchmarks
compare both that way). SIDEWINDER_NATIVE=1 insists on the extension: importing this module
then fails without it. The choice is made once, at import: set the variable before starting
the process. Tests compare both legs in one process: `use("python")` rebinds every call site
(and every module's copy imported by the site's name) to the references, `use("native")`
back; tests/test_native.py checks that the table is complete and each leg binds what it says.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from types import MappingProxyType, ModuleType
from typing import Any, Final, Literal, NamedTuple, TypeVar

# The API_VERSION of native/src/lib.rs this Python code calls.
API_VERSION = 15
ENV = "SIDEWINDER_NATIVE"
Leg = Literal["native", "python"]
T = TypeVar("T")


class Reference(NamedTuple):
    python: str  # "module:attribute" of the pure-Python reference
    site: str  # the attribute of that module bound to the implementation in use


# Each export of sidewinder._native (but API_VERSION): its reference, and where it is bound.
REFERENCES: Final[Mapping[str, Reference]] = MappingProxyType(
    {
        "java_string_hash": Reference(
            "sidewinder.protocol.message:java_string_hash_py", "java_string_hash"
        ),
        "encode_record": Reference("sidewinder.protocol.record:encode_record_py", "encode_record"),
        "batch_sizes": Reference("sidewinder.protocol.batch_record:batch_sizes_py", "batch_sizes"),
        "encode_batch": Reference(
            "sidewinder.protocol.batch_record:encode_batch_py", "encode_batch"
        ),
        "scan_segment": Reference("sidewinder.store.dispatch_scan:scan_segment_py", "scan_segment"),
        "gather_run": Reference("sidewinder.store.get_message:gather_run_py", "gather_run"),
        "pull_fields": Reference(
            "sidewinder.broker.processors.pull_lane:pull_fields_py", "pull_fields"
        ),
        "ascii_hash": Reference("sidewinder.store.index_file:ascii_hash_py", "ascii_hash"),
        "put_keys": Reference("sidewinder.store.index_file:put_keys_py", "put_keys"),
        "Syncer": Reference("sidewinder.store.flush:ThreadSyncer", "default_syncer"),
        "send_v2_fields": Reference(
            "sidewinder.broker.send.header:send_v2_fields_py", "send_v2_fields"
        ),
        "send_batch_fields": Reference(
            "sidewinder.broker.send.header:send_batch_fields_py", "send_batch_fields"
        ),
        "SendLane": Reference("sidewinder.broker.send.lane:SendLanePy", "SendLane"),
        "GrpcServer": Reference("sidewinder.proxy.grpc_server:GrpcioTransport", "Transport"),
    }
)


def load(setting: str | None = None) -> ModuleType | None:
    """The extension module, or None when the Python reference is to be used."""
    setting = os.environ.get(ENV, "") if setting is None else setting
    if setting == "0":
        return None
    try:
        # importlib: the extension is a leaf module, not one of the subpackages that the
        # dependency direction (tests/test_repository.py) orders.
        module = importlib.import_module("sidewinder._native")
    except ImportError:
        if setting == "1":
            raise
        return None
    found = getattr(module, "API_VERSION", None)
    if found != API_VERSION:
        where = getattr(module, "__file__", module.__name__)
        reason = f"{where} has API_VERSION {found}, this code wants {API_VERSION}"
        if setting == "1":
            raise ImportError(f"stale sidewinder._native: {reason}; reinstall to rebuild it")
        warnings.warn(
            f"ignoring a stale sidewinder._native ({reason}); reinstall to rebuild it",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return module


NATIVE: ModuleType | None = load()


class _Bound(NamedTuple):
    python: object  # the reference
    native: object | None  # what sites bind of the extension (adapted), None without it


_bound: dict[str, _Bound] = {}  # filled by implementation() as call sites are imported
_leg: Leg = "python" if NATIVE is None else "native"


def implementation(name: str, reference: T, adapt: Callable[[Any], T] | None = None) -> T:
    """What the call site of extension export `name` binds: the export (or `adapt(export)`,
    taking the reference's arguments) while the native leg is in use, else `reference`."""
    given = f"{getattr(reference, '__module__', '?')}:{getattr(reference, '__qualname__', '?')}"
    if given != _entry(name).python:
        raise ValueError(f"{name}'s reference is {REFERENCES[name].python}, not {given}")
    native: object | None = None
    if NATIVE is not None:
        export = getattr(NATIVE, name)
        native = export
        if adapt is not None:
            native = adapt(export)
            native.__wrapped__ = export  # type: ignore[attr-defined]  # for inspect.unwrap
    _bound[name] = _Bound(reference, native)
    chosen = native if _leg == "native" else reference
    return chosen  # type: ignore[return-value]  # the reference's type, or adapted to it


def is_native(name: str) -> bool:
    """Whether the call sites of export `name` are bound to the extension's object."""
    _entry(name)
    return _leg == "native"


def _entry(name: str) -> Reference:
    if name not in REFERENCES:
        raise KeyError(f"sidewinder._native.{name} is not in common/native.py's REFERENCES")
    return REFERENCES[name]


def use(leg: Leg) -> Leg:
    """Bind every call site to one leg ("python": the references), for tests that compare
    both in one process; returns the leg in use before. The copies other modules imported by
    a site's name (tests' too) are rebound with it: every loaded module is looked at."""
    global _leg
    if leg == "native" and NATIVE is None:
        raise RuntimeError("sidewinder._native is not loaded (SIDEWINDER_NATIVE=0?)")
    previous, _leg = _leg, leg
    swaps: dict[str, tuple[object, object]] = {}
    for name, bound in _bound.items():
        if bound.native is not None:  # else the references are all there is
            pair = (bound.native, bound.python) if leg == "python" else (bound.python, bound.native)
            swaps[REFERENCES[name].site] = pair
    for namespace, held in _holders(frozenset(swaps)):
        for attribute in held:
            was, now = swaps[attribute]
            if namespace.get(attribute) is was:
                namespace[attribute] = now
    return previous


# module name -> (the module, the site names it held when looked at, the sites then known)
_seen: dict[str, tuple[object, tuple[str, ...], frozenset[str]]] = {}


def _holders(sites: frozenset[str]) -> list[tuple[dict[str, object], tuple[str, ...]]]:
    """The namespaces of loaded modules that hold a site's name, and which; each module is
    looked into once (a module gets its copies when it is imported, at the top)."""
    found = []
    for name, module in list(sys.modules.items()):
        seen = _seen.get(name)
        if seen is None or seen[0] is not module or seen[2] != sites:
            held: tuple[str, ...] = ()
            if isinstance(module, ModuleType) and module is not NATIVE:
                held = tuple(site for site in sites if site in vars(module))
            seen = _seen[name] = (module, held, sites)
        if seen[1]:
            found.append((vars(module), seen[1]))
    return found
