"""The optional Rust extension `sidewinder._native` (built from native/ by `pip install`).

    from sidewinder.common.native import NATIVE
    if NATIVE is not None:
        java_string_hash = NATIVE.java_string_hash   # else the Python reference stays

Every native function has a pure-Python reference beside its caller; the reference is used when
the extension is absent, was built for another API_VERSION (a stale .so left in the source tree),
or the environment says SIDEWINDER_NATIVE=0 (benchmarks and tests compare both that way).
SIDEWINDER_NATIVE=1 insists on the extension: importing this module then fails without it.
The choice is made once, at import: set the variable before starting the process.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

# The API_VERSION of native/src/lib.rs this Python code calls.
API_VERSION = 9
ENV = "SIDEWINDER_NATIVE"


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
