"""The heap of a process that runs for days (the recorder, the dashboard's engine): glibc's
arenas, and Python's cyclic collector.

What the soak found (docs/engine.md): the recorder's Python objects stayed near 35 MiB while
its RSS rose past 200 MiB, almost all of it in glibc's per-thread malloc arenas (64 MiB-aligned
anonymous regions, one per thread that ever called malloc: up to 8 per core). Python hands
every block over 512 bytes to malloc (file contents read for hashing, /proc reads, event
buffers, lists and dicts past a few entries); threads free them in another order than they
were made, and glibc returns a non-main arena's free pages only from its top. So:

- `cap_arenas()`: at most ARENAS arenas (mallopt M_ARENA_MAX, as `MALLOC_ARENA_MAX=2` does);
  call it before the threads start. Threads then share arenas, freed space is reused across
  them.
- `trim()`: `malloc_trim(0)`, which since glibc 2.8 gives every arena's free pages back to the
  kernel (madvise), not only the top of the main heap. A few milliseconds; the recorder calls
  it every TRIM_EVERY seconds.

Both are no-ops where libc is not glibc (musl has no arenas to cap and trims by itself).

The collector: a full collection walks every object that can hold a reference. An engine on
1,000 lanes holds ~93,000 of them (its modules, watchdog's watches, the picture), and walking
them took 31-47 ms on the bench machine, about once in ten seconds under a write load: every
thread of the process stops meanwhile, so each write in flight waited that long
(docs/perf-notes/collector-freeze.md). So:

- `freeze()`: once the first picture is whole, collect, then move what survived out of the
  collector's sight (`gc.freeze`). Later full collections walk only what came after. Objects
  moved there are still freed by their reference counts; only garbage in cycles among them
  waits for the next `refreeze()`.
- `refreeze()`: every REFREEZE_EVERY seconds, one whole collection (the same pause, once in ten
  minutes), then freeze again.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging

from lanewatch.linux.libc import libc as shared_libc

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # malloc.h
ARENAS = 2
TRIM_EVERY = 60.0  # seconds
REFREEZE_EVERY = 600.0  # seconds


@functools.cache
def _libc() -> ctypes.CDLL | None:
    libc = shared_libc()
    if libc is None:
        return None
    try:
        libc.mallopt  # noqa: B018 (glibc only: AttributeError elsewhere)
        libc.malloc_trim  # noqa: B018
    except AttributeError:
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.malloc_trim.restype = ctypes.c_int
    return libc


def cap_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas for this process; whether glibc took it."""
    libc = _libc()
    if libc is None:
        return False
    ok = bool(libc.mallopt(M_ARENA_MAX, arenas))
    if not ok:
        log.debug("mallopt(M_ARENA_MAX, %d) refused", arenas)
    return ok


def trim() -> bool:
    """Give the free pages of every arena back to the kernel; whether any were."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def freeze() -> int:
    """Collect, then keep every object alive now out of later full collections; how many."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def refreeze() -> int:
    """What was frozen is collected again once (its cyclic garbage freed), then frozen."""
    gc.unfreeze()
    return freeze()
