"""What one read of a fanotify group returns, and who owns its descriptors.

`events_from_buffer()` parses a read(2) buffer (`parse_metadata()` for the bare records) into
`FanEvent`s, closing at once the descriptors of events it drops (our own writes, paths the
caller rejects); an `EventBatch` owns the rest and closes them exactly once. `read_content()`
reads a written file through its event's descriptor (pread only, never reopened by path).
See docs/fanotify.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import struct
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from lanewatch.linux.fanotify_abi import (
    EVENT_METADATA,
    FAN_CLOSE_WRITE,
    FAN_EVENT_INFO_TYPE_PIDFD,
    FAN_MODIFY,
    FAN_NOFD,
    FAN_NOPIDFD,
    FAN_Q_OVERFLOW,
    FANOTIFY_METADATA_VERSION,
    INFO_HEADER,
    INFO_PIDFD,
    mask_names,
)
from lanewatch.linux.mountview import Rehome
from lanewatch.linux.proc import fd_path
from lanewatch.processes.ownpids import own_pids

log = logging.getLogger(__name__)

# What `read_content` reads of a file: a prefix kept, the whole hashed up to a limit.
DEFAULT_PREFIX_LIMIT = 64 * 1024
DEFAULT_HASH_LIMIT = 64 * 1024 * 1024
_CHUNK = 1024 * 1024

# --- content through the event descriptor ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContentSample:
    """What a file held when we read it through the event's descriptor.

    `sha256` covers the whole content (None if larger than the hash limit); `size` is the
    number of bytes hashed, or the fstat size when not hashed; `prefix` is at most the
    prefix limit.
    """

    size: int
    sha256: str | None
    prefix: bytes

    @property
    def complete(self) -> bool:
        """The prefix is the whole content."""
        return self.sha256 is not None and len(self.prefix) == self.size


def read_content(
    fd: int,
    *,
    prefix_limit: int = DEFAULT_PREFIX_LIMIT,
    hash_limit: int = DEFAULT_HASH_LIMIT,
) -> ContentSample | None:
    """Size, sha256 and a bounded prefix of the file behind `fd`; None if not a regular file.

    Reads with pread only: never reopens by path (the path may already name another file)
    and never moves the descriptor's offset.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_size > hash_limit:
        return ContentSample(st.st_size, None, os.pread(fd, prefix_limit, 0))
    digest = hashlib.sha256()
    prefix = bytearray()
    offset = 0
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            break
        if offset == 0 and len(chunk) == st.st_size < _CHUNK:
            # The whole (small) file in one read, as fstat said: no second read for EOF.
            digest.update(chunk)
            return ContentSample(len(chunk), digest.hexdigest(), chunk[:prefix_limit])
        if len(prefix) < prefix_limit:
            prefix += chunk[: prefix_limit - len(prefix)]
        digest.update(chunk)
        offset += len(chunk)
        if offset > hash_limit:  # it grew while we read: give up the hash, keep the prefix
            return ContentSample(os.fstat(fd).st_size, None, bytes(prefix))
    return ContentSample(offset, digest.hexdigest(), bytes(prefix))


# --- events ----------------------------------------------------------------------------------


class _Lease:
    """Shared by the events of one batch: False once their descriptors are closed."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


@dataclass(frozen=True, slots=True)
class FanEvent:
    """One fanotify event.

    `pid` is the writer's process id as seen from our pid namespace (0 if invisible or for
    an overflow). `fd` is a read-only descriptor to the written file, owned by the batch it
    came in and valid only until that batch is closed (for `FanotifyWatcher`: until the
    callback returns); FAN_NOFD for an overflow; below -1 it is -errno when the kernel could
    not open the file. `path` is readlink of that descriptor at read time: if the file was
    renamed it is the new name, if unlinked it ends in " (deleted)"; None when unknown.
    `pidfd` (groups opened with `pidfds=True`, Linux 5.15+) is a pidfd for the writer, owned
    and closed like `fd`: while it is open the writer's pid cannot be reused, so /proc/PID is
    the writer. Negative when the writer had already been reaped when we read the event (or
    when the group does not report pidfds).
    """

    pid: int
    mask: int
    path: str | None
    fd: int
    _lease: _Lease | None = field(default=None, compare=False, repr=False)
    pidfd: int = FAN_NOPIDFD
    note: str | None = None  # for a loss we report ourselves (an overflow's mask): why
    # `path` came through a mount of another namespace and could not be renamed: it is in the
    # writer's words, not ours (`linux/mountview.py`). False: ours, as everything else is.
    theirs: bool = False

    @property
    def is_overflow(self) -> bool:
        """The kernel's queue overflowed: events were lost, rescan what is watched."""
        return bool(self.mask & FAN_Q_OVERFLOW)

    @property
    def is_close_write(self) -> bool:
        return bool(self.mask & FAN_CLOSE_WRITE)

    @property
    def is_modify(self) -> bool:
        return bool(self.mask & FAN_MODIFY)

    @property
    def fd_error(self) -> int | None:
        """The errno the kernel met opening the file for us, if it could not."""
        return -self.fd if self.fd < FAN_NOFD else None

    @property
    def names(self) -> tuple[str, ...]:
        return mask_names(self.mask)

    def read_content(
        self, *, prefix_limit: int = DEFAULT_PREFIX_LIMIT, hash_limit: int = DEFAULT_HASH_LIMIT
    ) -> ContentSample | None:
        """`read_content()` through this event's descriptor, while its batch is open."""
        if self.fd < 0:
            raise ValueError(f"event has no file descriptor ({', '.join(self.names)})")
        if self._lease is not None and not self._lease.open:
            # The number may already name another file of ours: refuse rather than misread.
            raise ValueError("event descriptor already closed: read content inside the callback")
        return read_content(self.fd, prefix_limit=prefix_limit, hash_limit=hash_limit)


@dataclass(frozen=True, slots=True)
class RawEvent:
    """One fanotify_event_metadata record as the kernel wrote it (and its pidfd, if any)."""

    mask: int
    fd: int
    pid: int
    version: int
    pidfd: int = FAN_NOPIDFD


def _pidfd_of(buf: bytes, start: int, end: int) -> int:
    """The pidfd in the info records of one event (between `start` and `end`), if any."""
    offset = start
    while offset + INFO_HEADER.size <= end:
        info_type, _pad, length = INFO_HEADER.unpack_from(buf, offset)
        if length < INFO_HEADER.size or offset + length > end:
            break  # malformed: stop rather than guess
        if info_type == FAN_EVENT_INFO_TYPE_PIDFD and length >= INFO_HEADER.size + 4:
            return int(INFO_PIDFD.unpack_from(buf, offset + INFO_HEADER.size)[0])
        offset += length
    return FAN_NOPIDFD


# The usual record of a pidfd group: the metadata, then one pidfd info record.
_WITH_PIDFD = struct.Struct("=IBBHQiiBBHi")
_PIDFD_RECORD_LEN = EVENT_METADATA.size + INFO_HEADER.size + INFO_PIDFD.size


def _records(buf: bytes) -> list[tuple[int, int, int, int, int]]:
    """(mask, fd, pid, version, pidfd) of each record in a read(2) buffer; stops at a truncated
    or malformed record. Plain tuples: this runs for every write on the filesystem."""
    records: list[tuple[int, int, int, int, int]] = []
    offset, size, end = 0, EVENT_METADATA.size, len(buf)
    while offset + size <= end:
        if offset + _PIDFD_RECORD_LEN <= end:
            rec = _WITH_PIDFD.unpack_from(buf, offset)
            if (
                rec[0] == _PIDFD_RECORD_LEN
                and rec[3] == size
                and rec[7] == FAN_EVENT_INFO_TYPE_PIDFD
                and rec[9] == INFO_HEADER.size + INFO_PIDFD.size
            ):
                records.append((rec[4], rec[5], rec[6], rec[1], rec[10]))
                offset += _PIDFD_RECORD_LEN
                continue
        event_len, vers, _reserved, meta_len, mask, fd, pid = EVENT_METADATA.unpack_from(
            buf, offset
        )
        if event_len < size or offset + event_len > end:
            break
        pidfd = _pidfd_of(buf, offset + max(meta_len, size), offset + event_len)
        records.append((mask, fd, pid, vers, pidfd))
        offset += event_len  # event_len also covers any info records after the metadata
    return records


def parse_metadata(buf: bytes) -> list[RawEvent]:
    """The records in a read(2) buffer; stops at a truncated or malformed record."""
    return [RawEvent(mask, fd, pid, vers, pidfd) for mask, fd, pid, vers, pidfd in _records(buf)]


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError as exc:  # EBADF would mean a double close somewhere: say so
        log.warning("closing fanotify event fd %d: %s", fd, exc)


_SHARED = ("/tmp/", "/var/tmp/", "/dev/shm/")  # where a fenced lane has mounts of its own


def events_from_buffer(
    buf: bytes,
    *,
    own: frozenset[int] | None = None,
    accept: Callable[[str], bool] | None = None,
    lease: _Lease | None = None,
    rehome: Rehome | None = None,
) -> tuple[list[FanEvent], int]:
    """Turn a read(2) buffer into events, and how many records it held.

    The descriptors (and pidfds) of events dropped here are closed at once: those written by
    `own` (default: `ownpids.own_pids()`; our own writes are never anyone's collision), those
    whose path `accept` rejects, and those of an unknown metadata version. The caller owns the
    rest. Overflow events and events without a path are always kept. `rehome` renames the
    events, in shared temp or rejected, that came through a mount of another namespace (a
    fenced lane's: `linux/mountview.py`), before `accept` judges them; one it cannot rename
    keeps the kernel's name and is marked `theirs`.
    """
    if own is None:
        own = own_pids()
    records = _records(buf)
    events: list[FanEvent] = []
    handed = 0  # records whose fd is already closed or owned by an event
    try:
        for i, (mask, rfd, pid, version, pidfd) in enumerate(records):
            keep = version == FANOTIFY_METADATA_VERSION and pid not in own
            path = fd_path(rfd) if keep and rfd >= 0 else None
            theirs = False
            if keep and path is not None and accept is not None:
                keep = accept(path)
                if rehome is not None and (not keep or path.startswith(_SHARED)):
                    named = rehome.name(rfd, path)
                    if named is None:
                        theirs = True
                    elif named != path:
                        path, keep = named, accept(named)
            if keep:
                # With FAN_REPORT_FD_ERROR an overflow carries -EBADF, not FAN_NOFD: it never
                # had a file, so say so the one way.
                fd = FAN_NOFD if mask & FAN_Q_OVERFLOW and rfd < 0 else rfd
                events.append(FanEvent(pid, mask, path, fd, lease, pidfd, theirs=theirs))
            else:
                if rfd >= 0:
                    _close_quietly(rfd)
                if pidfd >= 0:
                    _close_quietly(pidfd)
            handed = i + 1
    except BaseException:
        # Nothing leaks even if `accept` raises: close what we kept and what we never reached.
        kept = [fd for ev in events for fd in (ev.fd, ev.pidfd)]
        for fd in kept + [fd for rec in records[handed:] for fd in (rec[1], rec[4])]:
            if fd >= 0:
                _close_quietly(fd)
        raise
    return events, len(records)


class EventBatch:
    """The events of one read; closing it closes all their descriptors, exactly once."""

    def __init__(
        self, events: Sequence[FanEvent], records: int, lease: _Lease, *, drained: bool = True
    ) -> None:
        self.events: tuple[FanEvent, ...] = tuple(events)
        self.records = records  # records read, including those dropped (own pid, filtered)
        # The read left room for more: the kernel's queue was empty when it returned, so every
        # event of a later read was queued after this read began.
        self.drained = drained
        self._lease = lease

    @property
    def closed(self) -> bool:
        return not self._lease.open

    def close(self) -> None:
        if not self._lease.open:
            return
        self._lease.open = False
        for ev in self.events:
            for fd in (ev.fd, ev.pidfd):
                if fd >= 0:
                    _close_quietly(fd)

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[FanEvent]:
        return iter(self.events)

    def __enter__(self) -> EventBatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lease", None) is not None and self._lease.open:
            warnings.warn("unclosed fanotify EventBatch", ResourceWarning, stacklevel=1)
            self.close()
