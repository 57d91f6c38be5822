"""A namespace's files and one file's content, as the files view shows them. Blocking file I/O
(call from a thread worker); no Textual here.

Never follows a symlink (listed as a link, with its target as text), never opens anything but a
regular file (a FIFO is listed, never opened: no hang), never reads more than `MAX_VIEW`
bytes, and checks that the file it opened is still inside the namespace."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.lanes.fsutil import open_regular
from lanewatch.linux.paths import is_under
from lanewatch.linux.proc import readlink
from lanewatch.model import units
from lanewatch.model.nsfiles import NsFile, NsListing
from lanewatch.records import report, writes

MAX_FILES = 2000  # entries listed (the walk stops there and says so)
MAX_VIEW = 64 * 1024  # bytes of a file shown
MAX_HASH = 16 * 1024 * 1024  # a larger file is named by its size only (hashing it costs seconds)


@dataclass(frozen=True, slots=True)
class FileContent:
    path: str
    size: int | None
    sha256: str | None
    text: str | None  # None: not shown (see `why`)
    why: str = ""


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def last_writers(roots: Sequence[str], under: str) -> dict[str, str]:
    """The last recorded writer of each path under `under`."""
    out: dict[str, str] = {}
    for e in writes.entries(roots):
        if is_under(e.path, under):
            out[e.path] = (
                report.who({"lane": e.lane, "pid": e.pid})
                if e.identified
                else (f"pid {e.pid} (not identified)")
            )
    return out


def list_files(namespace: Path, roots: Sequence[str], limit: int = MAX_FILES) -> NsListing:
    """Every entry under `namespace` but directories (its meta folder included: the stamp and
    ledger are files too), newest first, without following symlinks."""
    found: list[NsFile] = []
    writers = last_writers(roots, str(namespace))
    stack = [""]
    truncated = False
    while stack and not truncated:
        rel = stack.pop()
        try:
            entries = os.scandir(namespace / rel if rel else namespace)
        except OSError as exc:
            if not rel:
                return NsListing(str(namespace), (), False, f"{exc.strerror or exc}")
            continue
        with entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(name)
                    continue
                if len(found) >= limit:
                    truncated = True
                    break
                kind = _kind(st.st_mode)
                target = None
                if kind == "link":
                    try:
                        target = os.readlink(entry.path)
                    except OSError:
                        target = "?"
                full = str(namespace / name)
                found.append(NsFile(name, kind, st.st_size, st.st_mtime, writers.get(full), target))
    found.sort(key=lambda f: f.mtime, reverse=True)
    return NsListing(str(namespace), tuple(found), truncated)


def read_file(namespace: Path, rel: str, limit: int = MAX_VIEW) -> FileContent:
    """A small file's content as text; a FIFO, a symlink, a device or a file that left the
    namespace is refused with a reason, a large or binary one named by size and sha256."""
    path = namespace / rel
    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError as exc:  # NotAFile too: "x is a FIFO, not a file"
        return FileContent(str(path), None, None, None, str(exc))
    try:
        where = readlink("self", f"fd/{fd}")
        if not is_under(where, os.path.realpath(namespace)):
            return FileContent(str(path), None, None, None, f"{where} is outside the namespace")
        size = os.fstat(fd).st_size
        if size > MAX_HASH:
            return FileContent(str(path), size, None, None, f"larger than {units.size(limit)}")
        digest = hashlib.sha256()
        head = b""
        while chunk := os.read(fd, 1024 * 1024):
            if len(head) <= limit:
                head += chunk[: limit + 1 - len(head)]
            digest.update(chunk)
    except OSError as exc:
        return FileContent(str(path), None, None, None, str(exc))
    finally:
        os.close(fd)
    sha = digest.hexdigest()
    if len(head) > limit:
        return FileContent(str(path), size, sha, None, f"larger than {units.size(limit)}")
    if b"\0" in head:
        return FileContent(str(path), size, sha, None, "binary")
    try:
        return FileContent(str(path), size, sha, head.decode("utf-8"))
    except UnicodeDecodeError:
        return FileContent(str(path), size, sha, None, "not UTF-8 text")
