"""The first picture: list each root, read each stamp, then walk each namespace.

Two phases, so states show before sizes: `list_root` + `read_stamp` per namespace is a few
reads per namespace; `scan_namespace` then walks it with `os.scandir` (one `lstat` per file,
none per folder) and reads its ledger and receipts. Nothing here follows a symlink.

Everything may vanish under us: a namespace removed mid-walk comes back `vanished`, a
subfolder removed mid-walk is skipped, a permission error is recorded, never raised.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lanewatch.files.usage import BLOCK, Usage
from lanewatch.lanes.fsutil import NotAFile, UnsafePath, open_regular, read_nofollow, walk_files
from lanewatch.lanes.roots import ROOT_META
from lanewatch.lanes.stamp import (
    LEDGER_FILE,
    MAX_STAMP_BYTES,
    META_DIR,
    STAMP_FILE,
    StampRead,
    StampStatus,
    folder_uid,
    not_a_file,
    parse_stamp,
)

RECEIPTS = "receipts"
MAX_RECEIPT = 256 * 1024
MAX_LEDGER_READ = 4 * 1024 * 1024  # a ledger larger than this is read from its tail
LEDGER_EVENTS = (b'"claim-refused"', b'"released"', b'"spawn-failed"', b'"cleared"', b'"killed"')


@dataclass(frozen=True, slots=True)
class RootListing:
    root: str
    names: tuple[str, ...]  # namespace folder names
    error: str | None = None  # why it could not be listed
    missing: bool = False
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the root folder


def list_root(root: str) -> RootListing:
    """Every folder directly under `root` except its own meta folder. Never raises."""
    try:
        st = os.stat(root)
        if not stat.S_ISDIR(st.st_mode):
            return RootListing(root, (), error="not a folder")
        with os.scandir(root) as it:
            names = tuple(
                e.name for e in it if e.name != ROOT_META and e.is_dir(follow_symlinks=False)
            )
    except FileNotFoundError:
        return RootListing(root, (), error="the root does not exist", missing=True)
    except OSError as exc:
        return RootListing(root, (), error=f"cannot list the root: {exc.strerror or exc}")
    return RootListing(root, names, identity=(st.st_dev, st.st_ino))


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def read_stamp_at(namespace: str) -> StampRead:
    """`lanes.stamp.read_stamp` for a path string, the same answers (`test_walk.py` holds
    them side by side), without building five `Path`s per stamp: the first picture reads
    every stamp before it can show a state. Neither `.lanewatch/` nor `owner.json` may be a
    symlink; a non-regular file is refused; nothing is read past the size limit."""
    path = f"{namespace}/{META_DIR}/{STAMP_FILE}"
    try:
        dir_fd = os.open(f"{namespace}/{META_DIR}", _DIR_FLAGS)
        try:
            fd = open_regular(STAMP_FILE, os.O_RDONLY, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        try:
            st = os.fstat(fd)
            data = os.read(fd, MAX_STAMP_BYTES + 1)
            if len(data) <= MAX_STAMP_BYTES and len(data) < st.st_size:  # grew: read on
                data += os.read(fd, MAX_STAMP_BYTES + 1 - len(data))
        finally:
            os.close(fd)
    except FileNotFoundError:
        return StampRead(StampStatus.MISSING, detail="no owner stamp")
    except NotAFile as exc:
        return not_a_file(exc)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a symlink
            return StampRead(StampStatus.SYMLINK, detail=f"{path} or its folder is a symlink")
        return StampRead(StampStatus.UNREADABLE, detail=f"{exc.strerror} reading {path}")
    return replace(
        parse_stamp(data),
        mtime=st.st_mtime,
        file_uid=st.st_uid,
        folder_uid=folder_uid(namespace),
        data=data if len(data) <= MAX_STAMP_BYTES else None,
    )


@dataclass(slots=True)
class LedgerRead:
    offset: int  # where the next incremental read starts (after the last full line)
    inode: int | None
    lines: list[dict[str, Any]] = field(default_factory=list)  # only the events we act on


def read_ledger(path: str, offset: int = 0, inode: int | None = None) -> LedgerRead:
    """New lines of a ledger since `offset` (from 0 if the file was replaced or truncated)."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError:  # NotAFile too: a FIFO at the ledger's name is never read
        return LedgerRead(0, None)
    try:
        st = os.fstat(fd)
        if st.st_ino != inode or st.st_size < offset:
            offset = 0
        start = max(offset, st.st_size - MAX_LEDGER_READ)
        if st.st_size <= start:
            return LedgerRead(start, st.st_ino)
        data = os.pread(fd, st.st_size - start, start)
    except OSError:
        return LedgerRead(offset, inode)
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1  # a partial last line is read next time
    result = LedgerRead(start + end, st.st_ino)
    for raw in data[:end].splitlines():
        if not any(marker in raw for marker in LEDGER_EVENTS):
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            result.lines.append(obj)
    return result


@dataclass(frozen=True, slots=True)
class ReceiptRead:
    path: str
    data: object  # parsed JSON, or None when unreadable / not JSON
    mtime: float
    size: int
    sha256: str


def is_receipt(namespace: str, path: str) -> bool:
    """`<namespace>/receipts/<step>.json`, directly in the receipts folder."""
    folder = f"{namespace}/{RECEIPTS}/"
    return path.startswith(folder) and path.endswith(".json") and "/" not in path[len(folder) :]


def read_receipt(path: str) -> ReceiptRead | None:
    """One receipt file, read without following symlinks; None if gone or not a file."""
    try:
        st = os.lstat(path)
        data = read_nofollow(Path(path), MAX_RECEIPT)
    except (OSError, UnsafePath):
        return None
    digest = hashlib.sha256(data).hexdigest()
    parsed: object = None
    if len(data) <= MAX_RECEIPT:
        with contextlib.suppress(ValueError, RecursionError):
            parsed = json.loads(data)
    return ReceiptRead(path, parsed, st.st_mtime, len(data), digest)


@dataclass(slots=True)
class NamespaceScan:
    key: str
    vanished: bool = False
    sizes: dict[str, int] = field(default_factory=dict)  # absolute path -> size, non-folders
    bytes: int = 0  # apparent: the sum of the sizes
    usage: Usage = field(default_factory=Usage)  # allocated, as `du` counts (folders too)
    last_write: float | None = None  # newest mtime outside .lanewatch/
    stamp_mtime: float | None = None  # of .lanewatch/owner.json, as the walk saw it
    receipt_paths: list[str] = field(default_factory=list)
    ledger: LedgerRead | None = None
    receipts: list[ReceiptRead] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def files(self) -> int:
        return len(self.sizes)

    @property
    def allocated(self) -> int:
        return self.usage.allocated


def scan_namespace(key: str) -> NamespaceScan:
    """Walk one namespace: sizes of every file, newest write, ledger and receipts."""
    out = NamespaceScan(key)
    try:
        walk(key, out)
    except FileNotFoundError:
        out.vanished = True
        return out
    ledger = os.path.join(key, META_DIR, LEDGER_FILE)
    if out.sizes.get(ledger):
        out.ledger = read_ledger(ledger)
    for path in out.receipt_paths:
        r = read_receipt(path)
        if r is not None:
            out.receipts.append(r)
    return out


def walk(top: str, out: NamespaceScan) -> None:
    """Fill `out` from the tree under `top`. Raises FileNotFoundError only if `top` is gone.

    One `lstat` per file and per folder (folders are told apart by the directory entry's
    type; their own `lstat` is for their blocks), so this costs about what a bare scandir +
    stat walk costs."""
    sizes = out.sizes
    usage = out.usage
    folders: list[tuple[str, os.stat_result]] = []
    meta = os.path.join(top, META_DIR)
    receipts = os.path.join(top, RECEIPTS)
    newest = out.last_write or 0.0
    last: str | None = None
    own = receipt = False
    for folder, entry, st in walk_files(top, out.errors, folders):  # once per file: tight
        sizes[entry.path] = st.st_size
        usage.set(entry.path, st)
        if folder is not last:  # a new folder: is it lanewatch's own or the receipts?
            last, own, receipt = folder, folder == meta, folder == receipts
        if own:  # `.lanewatch/`: not a write; note the stamp
            if entry.name == STAMP_FILE:
                out.stamp_mtime = st.st_mtime
            continue
        if st.st_mtime > newest:
            newest = st.st_mtime
        if receipt and entry.name.endswith(".json"):
            out.receipt_paths.append(entry.path)
    for path, st in folders:
        usage.set(path, st)
    out.bytes = sum(sizes.values())
    out.last_write = newest or None


@dataclass(slots=True)
class NamespaceCount:
    """What the first picture needs of a namespace: how many files, how many bytes."""

    key: str
    vanished: bool = False
    files: int = 0
    bytes: int = 0  # apparent
    allocated: int = 0  # as `du` counts: blocks of files and folders, hard links once
    last_write: float | None = None  # newest mtime outside .lanewatch/
    stamp_mtime: float | None = None  # of .lanewatch/owner.json, as the walk saw it
    errors: list[str] = field(default_factory=list)


def count_namespace(key: str) -> NamespaceCount:
    """`scan_namespace` without a size per path, a ledger or receipts: the first picture's
    walk, a tenth cheaper per file (no dict of 100,000 paths that the walk after the
    watches replaces anyway). The same files and bytes as `walk` (a test holds them).

    `fsutil.walk_files`'s walk written out here, with the same answers (a vanished top, a
    subfolder or file removed mid-walk skipped, any other error in `errors`, one `lstat` per
    folder for its blocks): its generator's yield and the tuple it builds per file were ~5 %
    of the first picture, which runs this once per file of every namespace."""
    out = NamespaceCount(key)
    count_tree(key, f"{key}/{META_DIR}", out, set())
    return out


def count_tree(top: str, meta: str, out: NamespaceCount, linked: set[tuple[int, int]]) -> None:
    """`count_namespace`'s walk of `top` into `out`: files directly in `meta` are lanewatch's
    own (their mtimes are no write; the stamp's is noted). `linked`: the (device, inode) of
    hard-linked files already counted, whose blocks count once."""
    errors = out.errors
    files = size = blocks = 0
    newest = 0.0
    stack = [top]
    pop, push = stack.pop, stack.append
    while stack:
        folder = pop()
        try:
            it = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            if folder == top:
                out.vanished = True
                return
            continue  # a subfolder removed (or replaced by a file) mid-walk
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            continue
        own = folder == meta
        with it:
            with contextlib.suppress(OSError):  # removed meanwhile: its files are gone too
                blocks += os.lstat(folder).st_blocks
            for entry in it:  # runs once per file: kept tight
                try:
                    if entry.is_dir(follow_symlinks=False):
                        push(entry.path)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    errors.append(f"{entry.path}: {exc.strerror or exc}")
                    continue
                files += 1
                size += st.st_size
                if st.st_nlink < 2:
                    blocks += st.st_blocks
                elif (st.st_dev, st.st_ino) not in linked:
                    linked.add((st.st_dev, st.st_ino))
                    blocks += st.st_blocks
                if own:
                    if entry.name == STAMP_FILE:
                        out.stamp_mtime = st.st_mtime
                elif st.st_mtime > newest:
                    newest = st.st_mtime
    out.files += files
    out.bytes += size
    out.allocated += blocks * BLOCK
    if newest and newest > (out.last_write or 0.0):
        out.last_write = newest


def floor_walk(top: str) -> tuple[int, int]:
    """The benchmark's floor: bare scandir recursion with a stat of every entry."""
    files = size = 0
    stack = [top]
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
                else:
                    files += 1
                    size += st.st_size
    return files, size
