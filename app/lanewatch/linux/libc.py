"""The C library, loaded once for every caller in this process.

The running program's own symbols include libc's, so `CDLL(None)` needs no search; where it
fails, `libc.so.6`, then `find_library` (which runs a subprocess: only as a last resort). Loaded
with `use_errno`, so `ctypes.get_errno()` (`errno_text()`) says why a call failed. A caller that
sets `argtypes` sets them for everyone: only the one module that binds a call does.
"""

from __future__ import annotations

import ctypes
import functools
import os


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The process's libc, or None where it has none (not Linux, a static interpreter)."""
    for name in (None, "libc.so.6", "find"):
        if name == "find":
            from ctypes.util import find_library  # only here: it runs a subprocess to search

            name = find_library("c")
            if name is None:
                return None
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(lib, "getpid"):
            return lib
    return None


def errno_text() -> str:
    """Why the last call through `libc()` failed, in the C library's words."""
    return os.strerror(ctypes.get_errno())
