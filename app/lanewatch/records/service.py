"""The recorder service's heartbeat: whether something watches while no dashboard runs.

`lanewatch record --service` (what `lanewatch service install` starts, or the `nohup` line
for machines without systemd) writes `service.json` in its state folder when it starts and
touches its mtime every BEAT_EVERY seconds; it writes `stopped_at` when it stops. Readers
(`lanewatch status`, `lanewatch service status`) judge it like an owner stamp: the process it
names (pid + start ticks + boot id) is asked again, and the heartbeat must be fresh. A user's
service keeps its beat in the user's state folder; root's `--system` service in
SYSTEM_STATE_DIR, which every user reads.

Blind spot: a service wedged but alive with a fresh beat would still read as watching; its
beat is touched by the loop that also checks the engine's threads, so a stopped engine stops
the beat (`record_cmd`).
"""

from __future__ import annotations

import json
import os
import pwd
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import open_regular, write_atomic
from lanewatch.lanes.roots import ROOT_META, Registry, state_dir
from lanewatch.linux.procid import Liveness, ProcessIdentity, boot_id, hostname, liveness

BEAT_FILE = "service.json"
BEAT_EVERY = 5.0  # seconds between two touches of the beat
OVERDUE = 3 * BEAT_EVERY  # a beat older than this is not watching
ENV_SYSTEM_STATE_DIR = "LANEWATCH_SYSTEM_STATE_DIR"
_MAX = 256 * 1024


def system_state_dir() -> Path:
    """Where root's `--system` service keeps its beat (and log): readable by every user."""
    return Path(os.environ.get(ENV_SYSTEM_STATE_DIR) or "/var/lib/lanewatch")


@dataclass(frozen=True, slots=True)
class Beat:
    """What `service.json` holds."""

    pid: int
    start_ticks: int
    boot_id: str
    host: str
    uid: int
    mode: str  # "user" | "system"
    started_at: float
    roots: tuple[str, ...] = ()
    attribution: str | None = None  # "kernel" | "inferred", once the engine said
    stopped_at: float | None = None

    @classmethod
    def mine(cls, mode: str, roots: list[str]) -> Beat:
        me = ProcessIdentity.current()
        return cls(
            me.pid,
            me.start_ticks,
            boot_id(),
            hostname(),
            os.getuid(),
            mode,
            time.time(),
            tuple(roots),
        )

    @classmethod
    def from_json(cls, obj: object) -> Beat | None:
        if not isinstance(obj, dict):
            return None
        try:
            roots = obj.get("roots") or []
            stopped = obj.get("stopped_at")
            return cls(
                pid=int(obj["pid"]),
                start_ticks=int(obj["start_ticks"]),
                boot_id=str(obj["boot_id"]),
                host=str(obj["host"]),
                uid=int(obj["uid"]),
                mode=str(obj["mode"]),
                started_at=float(obj["started_at"]),
                roots=tuple(str(r) for r in roots if isinstance(r, str)),
                attribution=obj.get("attribution")
                if isinstance(obj.get("attribution"), str)
                else None,
                stopped_at=float(stopped) if isinstance(stopped, int | float) else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def write_beat(directory: Path, beat: Beat) -> Path:
    """Write `beat` (0644: others read whether it watches, never what it saw)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / BEAT_FILE
    write_atomic(path, (json.dumps(asdict(beat), sort_keys=True) + "\n").encode())
    return path


def touch(path: Path) -> None:
    os.utime(path)


@dataclass(frozen=True, slots=True)
class ServiceState:
    """A reader's verdict on one beat file."""

    path: str
    watching: bool
    reason: str  # one phrase: "pid 123 alive, heartbeat 2s ago" / "stopped at 10:02" / ...
    beat: Beat | None = None
    heartbeat_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        b = self.beat
        return {
            "path": self.path,
            "watching": self.watching,
            "reason": self.reason,
            "mode": b.mode if b else None,
            "pid": b.pid if b else None,
            "uid": b.uid if b else None,
            "started_at": b.started_at if b else None,
            "heartbeat_at": self.heartbeat_at,
            "attribution": b.attribution if b else None,
            "roots": list(b.roots) if b else [],
        }


def read_beat(directory: Path) -> tuple[Beat | None, float | None]:
    """The beat in `directory` and its heartbeat time (mtime); (None, None) if there is none
    or it is not one."""
    path = directory / BEAT_FILE
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as f:
            data = f.read(_MAX + 1)
            mtime = os.fstat(f.fileno()).st_mtime
    except OSError:
        return None, None
    if len(data) > _MAX:
        return None, None
    try:
        beat = Beat.from_json(json.loads(data))
    except ValueError:
        return None, None
    return beat, (mtime if beat is not None else None)


def judge(directory: Path, now: float | None = None) -> ServiceState | None:
    """Whether the service whose beat is in `directory` watches now; None: no beat there."""
    path = str(directory / BEAT_FILE)
    beat, at = read_beat(directory)
    if beat is None or at is None:
        return None
    now = time.time() if now is None else now
    if beat.stopped_at is not None:
        return ServiceState(path, False, f"stopped at {_clock(beat.stopped_at)}", beat, at)
    if beat.host != hostname():
        return ServiceState(path, False, f"its beat names another host ({beat.host})", beat, at)
    alive, why = liveness(ProcessIdentity(beat.pid, beat.start_ticks, beat.boot_id))
    age = max(0.0, now - at)
    if alive in (Liveness.ALIVE, Liveness.UNKNOWN) and age <= OVERDUE:
        seen = "alive" if alive is Liveness.ALIVE else "not inspectable"
        return ServiceState(
            path, True, f"pid {beat.pid} {seen}, heartbeat {age:.0f}s ago", beat, at
        )
    if alive in (Liveness.ALIVE, Liveness.STOPPED, Liveness.UNKNOWN):
        why = f"{why}, but no heartbeat for over {OVERDUE:.0f}s"
    return ServiceState(path, False, why, beat, at)


def services() -> list[ServiceState]:
    """The verdicts on this user's service and on root's `--system` service, those that have
    a beat (one entry when both folders are the same)."""
    out: list[ServiceState] = []
    seen: set[str] = set()
    for directory in (state_dir(), system_state_dir()):
        real = os.path.realpath(directory)
        if real in seen:
            continue
        seen.add(real)
        found = judge(directory)
        if found is not None:
            out.append(found)
    return out


def verdict(state: ServiceState) -> str:
    """One service's verdict, without the "service: " that `describe` puts before it (for a
    notice titled "service", and doctor's service line)."""
    b = state.beat
    word = "watching" if state.watching else "not watching"
    if b is None:
        return f"{word} ({state.reason})"
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(b.started_at))
    roots = f"{len(b.roots)} root{'s' if len(b.roots) != 1 else ''}"
    how = f"attribution {b.attribution}" if b.attribution else "attribution not yet known"
    return f"{word}: {state.reason} ({b.mode} service since {since}, {roots}, {how})"


def describe(states: list[ServiceState]) -> list[str]:
    """The lines `status` and `service status` print about services."""
    if not states:
        return [
            "service: none: nothing records while no dashboard runs "
            "(`lanewatch service install`, docs/service.md)"
        ]
    return [f"service: {verdict(s)}" for s in states]


def stopped(beat: Beat) -> Beat:
    return replace(beat, stopped_at=time.time())


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def users_roots() -> Iterator[tuple[pwd.struct_passwd, str]]:
    """Every user's registered roots, read without writing anything (no lock file, no
    rebuild in their folders), for root's `--system` service: each user's registry in
    `~/.local/state/lanewatch` (XDG's default; a user with another $XDG_STATE_HOME registers
    their roots with the service by hand: `--root`), and their default root if it exists."""
    seen: set[str] = set()
    for user in pwd.getpwall():
        home = Path(user.pw_dir)
        if not user.pw_dir.startswith("/") or not home.is_dir():
            continue
        directory = home / ".local" / "state" / "lanewatch"
        try:
            entries = [e.path for e in Registry(directory)._read()]  # read only, no lock
        except LanewatchError:  # corrupt or unreadable: that user's `run` says so, not us
            entries = []
        for path in [str(directory / "scratch"), *entries]:
            real = os.path.realpath(path)
            if real not in seen and os.path.isdir(os.path.join(real, ROOT_META)):
                seen.add(real)
                yield user, real
