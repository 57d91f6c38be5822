"""The evidence store: what small files held when a writer closed them, kept in the root.

`<root>/.lanewatch-root/evidence/` holds pack files: each engine appends the contents it keeps
to a pack of its own (`<time ns>-<pid>-<random>.pack`) and a line per content to the pack's index
(`.idx`: `{"sha256", "offset", "size"}`). Keeping a content costs an append, not a file
create: at a thousand writes a second that is the difference between a quiet disk and a busy
one. Content-addressed: a content already kept (by this engine, or found in the indexes when
it started) is not kept twice, and a reader checks the hash of what it reads.

Only files of at most `SMALL_FILE` bytes (receipts, stamps, JSON) are kept. Bounded: a pack is
closed at `PACK_BYTES`; when all packs of the root pass `max_bytes`, the oldest packs are
removed whole (their contents are forgotten; a content written again is kept again). Another
engine's packs count toward the cap and may be removed by this one, except its open pack.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from lanewatch.lanes.fsutil import open_regular
from lanewatch.lanes.roots import ROOT_META
from lanewatch.records.ownership import give_fd, give_path, root_owner

log = logging.getLogger(__name__)

EVIDENCE_DIR = "evidence"
SMALL_FILE = 64 * 1024  # bytes: larger files are hashed, never kept
MAX_BYTES = 64 * 1024 * 1024  # all packs of a root
PACK_BYTES = 4 * 1024 * 1024  # one pack
OPEN_PACK_GRACE = 600.0  # seconds: another engine's pack written this recently is never removed
_SHA = re.compile(r"^[0-9a-f]{64}$")


def store_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / ROOT_META / EVIDENCE_DIR


def _index_lines(idx: Path) -> Iterator[tuple[str, int, int]]:
    try:
        with os.fdopen(open_regular(idx, os.O_RDONLY), "rb") as f:
            for raw in f:
                try:
                    obj = json.loads(raw)
                    sha, offset, size = obj["sha256"], int(obj["offset"]), int(obj["size"])
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(sha, str) and _SHA.match(sha) and 0 <= size <= SMALL_FILE:
                    yield sha, offset, size
    except OSError:
        return


def _ours(pack: Path) -> bool:
    return pack.name.split("-")[1:2] == [str(os.getpid())]


def _packs(base: Path) -> list[Path]:
    """Pack files of a store, oldest first (their names start with the time they opened)."""
    try:
        return sorted(p for p in base.iterdir() if p.suffix == ".pack")
    except OSError:
        return []


class EvidenceStore:
    """One root's store, as one engine uses it (one thread)."""

    def __init__(
        self, root: str, *, max_bytes: int = MAX_BYTES, pack_bytes: int = PACK_BYTES
    ) -> None:
        self.base = store_dir(root)
        self.max_bytes = max_bytes
        self.pack_bytes = pack_bytes
        self._known: set[str] | None = None  # contents kept in this root, as far as we know
        self._pack: Path | None = None
        self._pack_size = 0
        self.evicted = 0  # packs removed
        self._owner = root_owner(root)  # a privileged recorder's files are the root owner's

    def put(self, data: bytes, sha256: str | None = None) -> str | None:
        """Keep one content; its sha256, or None if not kept."""
        return self.put_many([(data, sha256)]).get(0)

    def put_many(self, items: Sequence[tuple[bytes, str | None]]) -> dict[int, str]:
        """Keep several contents with one append; {index in `items`: sha256} of those kept.
        Each item is (bytes, their sha256 if already computed over exactly those bytes)."""
        known = self._load()
        kept: dict[int, str] = {}
        body = bytearray()
        lines: list[str] = []
        try:
            if self._pack is None or self._pack_size >= self.pack_bytes:
                self._open_pack()  # before the offsets are counted: they are the new pack's
        except OSError as exc:
            log.warning("cannot keep evidence in %s: %s", self.base, exc)
            return {}
        offset = self._pack_size
        for i, (data, claimed) in enumerate(items):
            if len(data) > SMALL_FILE:
                continue
            # `claimed`: the hash of exactly these bytes, computed as they were read (the
            # attribution reads a small file once); otherwise hash them here.
            digest = claimed if claimed is not None else hashlib.sha256(data).hexdigest()
            if digest not in known:
                lines.append(json.dumps({"sha256": digest, "offset": offset, "size": len(data)}))
                body += data
                offset += len(data)
                known.add(digest)
            kept[i] = digest
        # `lines`, not `body`: an empty content has an index line and no bytes; it was counted
        # kept without being written before.
        if lines and not self._append(bytes(body), lines):
            for line in lines:
                known.discard(json.loads(line)["sha256"])
            return {}
        return kept

    def _append(self, body: bytes, lines: list[str]) -> bool:
        try:
            assert self._pack is not None
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            fd = open_regular(self._pack, flags)
            try:
                give_fd(fd, self._owner)
                os.write(fd, body)
            finally:
                os.close(fd)
            fd = open_regular(self._pack.with_suffix(".idx"), flags)
            try:
                give_fd(fd, self._owner)
                os.write(fd, ("\n".join(lines) + "\n").encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("cannot keep evidence in %s: %s", self.base, exc)
            self._pack = None
            return False
        self._pack_size += len(body)
        if self._pack_size >= self.pack_bytes:
            self._evict()
        return True

    def _open_pack(self) -> None:
        self.base.parent.mkdir(exist_ok=True)  # not parents: a root that is gone stays gone
        give_path(self.base.parent, self._owner)
        self.base.mkdir(exist_ok=True)
        give_path(self.base, self._owner)
        opened = f"{time.time_ns():020d}"  # names sort oldest first
        self._pack = self.base / f"{opened}-{os.getpid()}-{os.urandom(4).hex()}.pack"
        self._pack_size = 0
        self._evict()

    def _load(self) -> set[str]:
        if self._known is None:
            self._known = set()
            for pack in _packs(self.base):
                self._known.update(sha for sha, _, _ in _index_lines(pack.with_suffix(".idx")))
        return self._known

    def _evict(self) -> None:
        packs = _packs(self.base)
        sizes = {}
        for p in packs:
            with contextlib.suppress(OSError):
                sizes[p] = p.stat().st_size
        packs = [p for p in packs if p in sizes]
        total = sum(sizes.values())
        now = time.time()
        for p in packs:
            if total <= self.max_bytes:
                break
            if p == self._pack:
                continue
            if not _ours(p) and now - p.stat().st_mtime < OPEN_PACK_GRACE:
                continue  # another engine may still be appending to it
            gone = {sha for sha, _, _ in _index_lines(p.with_suffix(".idx"))}
            for path in (p, p.with_suffix(".idx")):
                with contextlib.suppress(OSError):  # gone, or a mount point (EBUSY): left
                    path.unlink()
            total -= sizes.get(p, 0)
            self.evicted += 1
            if self._known is not None:
                self._known -= gone

    @property
    def bytes(self) -> int:
        total = 0
        for p in _packs(self.base):
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def __len__(self) -> int:
        return len(self._load())


def load(roots: Iterable[str], sha256: str) -> bytes | None:
    """The kept content with this hash from any root's store, verified; None if not kept."""
    if not _SHA.match(sha256):
        return None
    for root in roots:
        for pack in _packs(store_dir(root)):
            for sha, offset, size in _index_lines(pack.with_suffix(".idx")):
                if sha != sha256:
                    continue
                try:
                    with os.fdopen(open_regular(pack, os.O_RDONLY), "rb") as f:
                        f.seek(offset)
                        data = f.read(size)
                except OSError:
                    continue
                if hashlib.sha256(data).hexdigest() == sha256:
                    return data
    return None
