"""The first picture's counts of a root's namespaces, walked by `find` on another core.

The first picture waits for two things in series on the engine's thread: every stamp read
(the states), then every file counted (the counts). GNU `find` walks in C, in a process of its
own: started when the root is listed, it counts on the machine's other core while the engine
reads the stamps, and the engine then reads its answer with a few C-level passes over numbers
per namespace, no Python loop per file (docs/perf-notes/first-picture-find.md measured it).

The answers are `walk.count_namespace`'s, to the file (tests hold them side by side): no
symlink followed (`-P`), mounts crossed as the walk crosses them, a hard-linked file's blocks
once per namespace, the files directly in `.lanewatch/` (counted here by `walk.count_tree`,
since find prunes that folder) no write. A namespace find could not count as the walk would (an
error under it, a namespace that was no folder when find reached it) is left out of the
answer, and so is every namespace when find is missing, is not GNU find, or fails: the engine
walks those as before. Memory stays bounded: find writes into a pipe read chunk by chunk.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import shutil
import stat
import subprocess
import threading
from dataclasses import dataclass, field

from lanewatch.files.usage import BLOCK
from lanewatch.files.walk import NamespaceCount, count_tree
from lanewatch.lanes.stamp import META_DIR
from lanewatch.linux.userns import fd_path

CHUNK = 1 << 20  # bytes read from find's pipe at a time
BUFFERED = 16  # chunks read ahead while the engine reads the stamps; then find waits
PIPE_SIZE = 1 << 20  # find's pipe, if the kernel allows (an unprivileged maximum by default)
MAX_ARGS = 512 * 1024  # bytes of namespace names given to one find; the rest is walked
MAX_ERRORS = 1 << 20  # bytes of find's complaints read; more and every namespace is walked

# Per namespace (a starting point `./NAME`): a marker `\0NAME\0`, then one record per entry,
# `\n<size> <blocks> <mtime>`. A folder's record is `\n0 <blocks> 0` (its size is not counted,
# nor its mtime: ` 0\n` ends no file's record, whose mtime always has a fraction). Hard-linked
# files go to a second stream with their identity; `.lanewatch/` is pruned (walked apart).
_DIR = r"\n0 %b 0"
_EXPR = (
    *("(", "-type", "d", "("),
    *("(", "!", "-path", "./*/*", "-printf", r"\0%f\0" + _DIR, ")", "-o"),
    *("(", "-name", META_DIR, "!", "-path", "./*/*/*", "-prune", ")", "-o"),  # walked apart
    *("-printf", _DIR, ")", ")", "-o"),
)
_FILE = ("-printf", r"\n%s %b %T@")
_LINKED = r"%D:%i %b %s %T@ %p\0"


@dataclass(slots=True)
class _Tally:
    files: int = 0
    bytes: int = 0
    blocks: int = 0
    newest: tuple[int, bytes] = (0, b"")  # the longest, then greatest, mtime as find wrote it
    linked: set[tuple[int, int]] = field(default_factory=set)


class TreeCount:
    """One `find` over the namespaces `names` of `root`, started now; `counts()` reads it."""

    def __init__(self, root: str, names: list[str] | tuple[str, ...]) -> None:
        self.root = root
        self.names: list[str] = []
        size = 0
        for name in names:  # names past the budget are walked by the engine instead
            size += len(os.fsencode(name)) + 3
            if size > MAX_ARGS:
                break
            self.names.append(name)
        self._proc: subprocess.Popen[bytes] | None = None
        self._out = self._linked = self._errors = -1
        self._result: dict[str, NamespaceCount] | None = None
        self._cancelled = False
        self._chunks: queue.Queue[bytes] = queue.Queue(BUFFERED)
        self._reader: threading.Thread | None = None
        find = shutil.which("find")
        if find is None or not self.names:
            self._result = {}
            return
        try:
            self._start(find)
        except OSError:
            self.close()
            self._result = {}

    def _start(self, find: str) -> None:
        self._linked = os.memfd_create("lanewatch-linked", os.MFD_CLOEXEC)
        self._errors = os.memfd_create("lanewatch-find-errors", os.MFD_CLOEXEC)
        read, write = os.pipe2(os.O_CLOEXEC)
        self._out = read
        with contextlib.suppress(OSError):
            fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        linked = ("-links", "+1", "-fprintf", fd_path(self._linked), _LINKED)  # find's own fd
        argv = ["find", "-P", *(f"./{n}" for n in self.names), *_EXPR]  # says "find: ..."
        argv += ["(", *linked, ")", "-o", *_FILE]
        try:
            self._proc = subprocess.Popen(
                argv,
                executable=find,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=write,
                stderr=self._errors,
                pass_fds=(self._linked,),
                env={"LC_ALL": "C"},
            )
        finally:
            os.close(write)
        reader = threading.Thread(target=self._read_ahead, name="lanewatch-count", daemon=True)
        self._reader = reader
        reader.start()

    def _read_ahead(self) -> None:
        """On a thread of its own: find's pipe into `_chunks`, so find never waits for the
        engine's thread while that reads the stamps (up to BUFFERED chunks); b"" ends it."""
        try:
            while chunk := os.read(self._out, CHUNK):
                self._chunks.put(chunk)
        except OSError:
            pass
        finally:
            self._chunks.put(b"")

    def counts(self) -> dict[str, NamespaceCount]:
        """Name -> count, for every namespace find counted as the walk would. Waits for find
        (it ran meanwhile); once read, the same answer. Never raises."""
        if self._result is None:
            try:
                self._result = {} if self._cancelled else self._read()
            except (OSError, ValueError):
                self._result = {}
            finally:
                self.close()
        return self._result

    def cancel(self) -> None:
        """Stop find if it still runs (from any thread): `counts()` then answers at once, and
        with nothing, whether find had ended or not (the engine stops: no count is used)."""
        self._cancelled = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()

    def close(self) -> None:
        """Stop find if it still runs; release the pipe and streams. Idempotent; the thread
        that reads `counts()` only."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
        reader = self._reader
        if reader is not None:  # find is gone, so its pipe ends: let the reader see that
            while reader.is_alive() or not self._chunks.empty():
                with contextlib.suppress(queue.Empty):
                    self._chunks.get(timeout=0.1)
            self._reader = None
        for fd in (self._out, self._linked, self._errors):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._out = self._linked = self._errors = -1
        if self._result is None:
            self._result = {}

    # -- reading -------------------------------------------------------------------------------
    def _read(self) -> dict[str, NamespaceCount]:
        tallies = self._stream()
        proc = self._proc
        if proc is None or proc.wait() not in (0, 1):  # 1: some entries could not be read
            return {}
        doubtful = self._doubtful(tallies)
        if doubtful is None:
            return {}
        self._add_linked(tallies)
        out: dict[str, NamespaceCount] = {}
        for name, t in tallies.items():
            if name in doubtful:
                continue
            key = f"{self.root}/{name}"
            c = NamespaceCount(key, files=t.files, bytes=t.bytes, allocated=t.blocks * BLOCK)
            c.last_write = _mtime(t.newest[1]) if t.newest[0] else None
            meta = f"{key}/{META_DIR}"
            if _is_folder(meta):  # else find counted it as a file (a symlink: never followed)
                count_tree(meta, meta, c, t.linked)
            if c.errors:  # the meta folder, or a folder in it, is unreadable: walk it all
                continue
            c.vanished = False  # the meta folder went meanwhile: as if find had not seen it
            out[name] = c
        return out

    def _stream(self) -> dict[str, _Tally]:
        """Find's main stream, read as it comes: markers and records, per namespace."""
        tallies: dict[str, _Tally] = {}
        current: _Tally | None = None
        in_name = False  # the stream is inside a marker's name
        pending = b""
        while True:
            chunk = self._chunks.get()
            data = pending + chunk
            parts = data.split(b"\0")
            last = parts.pop()
            for part in parts:
                if in_name:
                    current = tallies.setdefault(os.fsdecode(part), _Tally())
                elif current is not None:
                    _add(current, part)
                in_name = not in_name
            if not chunk:
                if not in_name and current is not None:
                    _add(current, last)
                return tallies
            if in_name:
                pending = last
            else:
                cut = last.rfind(b"\n")
                if cut > 0 and current is not None:
                    _add(current, last[:cut])
                pending = last[cut:] if cut >= 0 else last

    def _doubtful(self, tallies: dict[str, _Tally]) -> set[str] | None:
        """Namespaces whose counts may not be the walk's; None if that cannot be told."""
        size = os.fstat(self._errors).st_size
        if size > MAX_ERRORS:
            return None
        doubtful: set[str] = set()
        names = set(self.names)
        for line in os.pread(self._errors, size, 0).splitlines():
            if not line.startswith(b"find: './"):
                return None
            rest = line[9:]
            raw = rest.split(b"/", 1)[0].split(b"'", 1)[0]
            name = os.fsdecode(raw)
            if name not in names or not rest.startswith((raw + b"/", raw + b"':")):
                return None  # quoted otherwise (an odd character): whose, we cannot say
            doubtful.add(name)
        # A starting point that was no folder when find reached it printed no marker, and
        # its record went to the namespace before it; one that was gone printed only that.
        erred = set(doubtful)
        last = None
        for name in self.names:
            if name in tallies:
                last = name
            elif last is not None and name not in erred:
                doubtful.add(last)
        return doubtful

    def _add_linked(self, tallies: dict[str, _Tally]) -> None:
        size = os.fstat(self._linked).st_size
        data = os.pread(self._linked, size, 0)
        for rec in data.split(b"\0"):
            if not rec:
                continue
            ident, blocks, size_, mtime, path = rec.split(b" ", 4)
            t = tallies.get(os.fsdecode(path[2:].split(b"/", 1)[0]))
            if t is None:
                continue
            dev, _, ino = ident.partition(b":")
            inode = (int(dev), int(ino))
            t.files += 1
            t.bytes += int(size_)
            if inode not in t.linked:
                t.linked.add(inode)
                t.blocks += int(blocks)
            t.newest = max(t.newest, _newest([mtime], signed=mtime.startswith(b"-")))


def _is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _add(t: _Tally, body: bytes) -> None:
    """Records `<size> <blocks> <mtime>` (a folder's `0 <blocks> 0`), in C-level passes."""
    vals = body.split()
    if not vals:
        return
    sizes = vals[0::3]
    t.files += len(sizes) - (body + b"\n").count(b" 0\n")
    t.bytes += sum(map(int, sizes))
    t.blocks += sum(map(int, vals[1::3]))
    t.newest = max(t.newest, _newest(vals[2::3], signed=b"-" in body))


def _newest(mtimes: list[bytes], *, signed: bool) -> tuple[int, bytes]:
    """The greatest mtime after 1970 as (length, text): find writes every one with the same
    ten digits of fraction, so the longer is the later and, as long, the text orders them.
    The walk counts no mtime at or before 1970 (`signed`: some are), nor a folder's `0`."""
    if signed:
        mtimes = [m for m in mtimes if not m.startswith(b"-")]
    best = max(zip(map(len, mtimes), mtimes, strict=True), default=(0, b""))
    return (0, b"") if best[0] <= 1 or _mtime(best[1]) <= 0 else best


def _mtime(text: bytes) -> float:
    """As `os.stat` computes `st_mtime` (seconds plus nanoseconds times 1e-9), exactly."""
    sec, _, frac = text.partition(b".")
    return int(sec) + int(frac[:9].ljust(9, b"0")) * 1e-9
