"""Run a module with every Python thread's name handed to the kernel, for CPU by thread.

    python -m tests.bench.named_threads MODULE [ARG ...]     (as `python -m MODULE ARG ...`)

Python before 3.14 leaves a thread's kernel name (`/proc/PID/task/TID/comm`) at the process's,
so another process reading `/proc/PID/task/*/stat` cannot tell `lanewatch-prober` from
`lanewatch-fanotify`. Here each thread, as it starts, names itself (prctl `PR_SET_NAME`, 15
bytes: the `lanewatch-` prefix dropped, so `prober`, `fanotify`...) before it runs; the main
thread keeps the process's name (renaming it would rename the process in `ps`), and
`common.thread_comms` calls it `main`. The code measured is the same; starting a thread costs one
prctl more.
"""

from __future__ import annotations

import ctypes
import runpy
import sys
import threading
from typing import Any

PR_SET_NAME = 15
PREFIX = "lanewatch-"


def kernel_name(name: str) -> bytes:
    """The 15 bytes the kernel keeps of a thread name, without the project's prefix."""
    return name.removeprefix(PREFIX).encode(errors="replace")[:15]


def install() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def bootstrap_inner(self: threading.Thread) -> None:
        libc.prctl(PR_SET_NAME, ctypes.c_char_p(kernel_name(self.name)), 0, 0, 0)
        original(self)

    threading.Thread._bootstrap_inner = bootstrap_inner  # type: ignore[attr-defined]


def main(argv: list[str]) -> Any:
    install()
    sys.argv = list(argv)
    return runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
