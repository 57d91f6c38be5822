"""`linux.libc`: the C library is loaded once, for every caller, and answers."""

from __future__ import annotations

import os

from lanewatch.linux import fanotify_abi, reaper
from lanewatch.linux.libc import libc


def test_one_c_library_for_every_caller() -> None:
    lib = libc()
    assert lib is not None and lib is libc()
    assert lib.getpid() == os.getpid()
    assert reaper._libc() is lib
    assert fanotify_abi._libc() in (lib, None)  # None: a libc without fanotify
