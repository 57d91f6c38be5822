"""Claiming a lane: the `Lane` context manager and the seed's `scratch_dir_for`.

Claiming = resolve the checkout (or refuse), make the namespace folder, take its lock without
waiting, then write the owner stamp. A second claimant fails closed with the current owner's
name, and its refusal goes to the ledger. While held, a thread touches the stamp's mtime every
heartbeat interval. Releasing marks the stamp `released` and frees the lock; files stay.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from lanewatch.errors import BadValue, ClaimRefused, LanewatchError
from lanewatch.lanes import ledger
from lanewatch.lanes.checkout import resolve_checkout
from lanewatch.lanes.fsutil import ensure_real_dir
from lanewatch.lanes.handed import stdio_now
from lanewatch.lanes.leasing import LaneLease
from lanewatch.lanes.lock import NamespaceLock
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.nested import outer_owner
from lanewatch.lanes.roots import Registry, default_root, ensure_root
from lanewatch.lanes.stamp import (
    META_DIR,
    OwnerState,
    Stamp,
    StampRead,
    default_heartbeat,
    read_stamp,
    touch_heartbeat,
    valid_heartbeat,
    write_stamp,
)
from lanewatch.lanes.target import ENV_NAMESPACE, LaneTarget
from lanewatch.linux.procid import Liveness, ProcessIdentity, hostname, liveness, user_name

if TYPE_CHECKING:  # the runner (above) sets it; the Lane only writes it down
    from lanewatch.runner.fence import Fence

DEFAULT_LANE = "default"
ENV_LANE = "LANEWATCH_LANE"
TMP_DIR = "tmp"
SCRATCH_DIR = "scratch"
RECEIPTS_DIR = "receipts"


# Where tools look for their temp folder: each is the lane's `tmp/` (docs/launchers.md says
# why each, and why XDG_RUNTIME_DIR and TMUX_TMPDIR are left alone).
TEMP_VARS = (
    "TMPDIR",  # POSIX: C libraries, Python, Go, Rust, Node, git, compilers
    "TMP",  # Python's and Node's fallbacks, tools written for Windows
    "TEMP",  # the same
    "CLAUDE_CODE_TMPDIR",  # Claude Code's own temp root (it uses /tmp/claude-... otherwise)
    "PYTEST_DEBUG_TEMPROOT",  # pytest's tmp_path root, read before TMPDIR; CI scripts export it
)

REFUSAL_WAIT = 2.0  # how long a refused claimant waits for the winner's stamp


def _may_hold_lock(stamp: Stamp) -> bool:
    """Whether `stamp` can belong to the current lock holder: live, and not a dead process."""
    if stamp.state is not OwnerState.LIVE:
        return False
    if stamp.host != hostname():
        return True  # a shared root: another host's pids cannot be judged from here
    state, _ = liveness(ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id))
    return state not in (Liveness.DEAD, Liveness.ZOMBIE, Liveness.REUSED, Liveness.OTHER_BOOT)


def locate(
    lane: str = DEFAULT_LANE,
    *,
    root: str | os.PathLike[str] | None = None,
    checkout: str | os.PathLike[str] | None = None,
) -> LaneTarget:
    """Compute a lane's namespace path. Raises Unbound outside a checkout, BadLaneName."""
    bound = resolve_checkout(checkout)
    name = namespace_name(bound.checkout_id, lane)
    root_path = Path(os.path.realpath(os.fspath(root) if root is not None else default_root()))
    return LaneTarget(bound, lane, root_path, root_path / name)


class Lane:
    """Own a lane's namespace for the life of the `with` block (or until `release()`)."""

    def __init__(
        self,
        lane: str = DEFAULT_LANE,
        *,
        root: str | os.PathLike[str] | None = None,
        checkout: str | os.PathLike[str] | None = None,
        heartbeat: float | None = None,
        command: list[str] | None = None,
        family: str | None = None,
        stdio: list[list[int]] | None = None,
        ports: int | None = None,
    ) -> None:
        """`family`: the folder name of the lane (same root) that starts this one for its own
        workers (`lanes/familyclaim.py`); `stdio`: the files whoever started the lane handed it
        (`lanes/handed.py`), default this process's at the claim; `ports`: how many ports it
        leases (`lanes/leases.py`; None: `$LANEWATCH_PORT_BLOCK`, else 10; 0: none)."""
        self.target = locate(lane, root=root, checkout=checkout)
        if heartbeat is None or heartbeat <= 0:  # None (and, as before, 0 or less): the default
            self.heartbeat_interval = default_heartbeat()
        elif valid_heartbeat(heartbeat):
            self.heartbeat_interval = float(heartbeat)
        else:  # NaN, infinity or beyond a day: no stamp could carry it, no thread could wait it
            raise BadValue("heartbeat must be a finite number of seconds, at most a day")
        self.command = list(command) if command is not None else list(sys.argv)
        self.family = family
        self.stdio = stdio
        self._lock = NamespaceLock(self.target.namespace)
        self._stamp: Stamp | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.fence: Fence | None = None  # how `run` fences CMD: written into the stamp
        self.ports = LaneLease(ports)  # its block of ports, taken with the claim

    # -- paths -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.target.lane

    @property
    def namespace(self) -> Path:
        return self.target.namespace

    @property
    def tmp_dir(self) -> Path:
        return self.namespace / TMP_DIR

    @property
    def scratch_dir(self) -> Path:
        return self.namespace / SCRATCH_DIR

    @property
    def receipts_dir(self) -> Path:
        return self.namespace / RECEIPTS_DIR

    @property
    def claimed(self) -> bool:
        """Whether this object holds the lane now (claimed and not yet released)."""
        return self._stamp is not None and self._lock.held

    @property
    def stamp(self) -> Stamp:
        if self._stamp is None:
            raise LanewatchError("the lane is not claimed")
        return self._stamp

    def env(self) -> dict[str, str]:
        """Variables that bind a child process to this lane."""
        tmp = str(self.tmp_dir)
        return {
            **dict.fromkeys(TEMP_VARS, tmp),
            ENV_LANE: self.name,
            ENV_NAMESPACE: str(self.namespace),
            "LANEWATCH_CHECKOUT": self.target.checkout.root,
            "LANEWATCH_ROOT": str(self.target.root),
            **self.ports.env(),
        }

    # -- claim / release --------------------------------------------------------------------
    def claim(self) -> Lane:
        if self._lock.held:
            raise LanewatchError(f"lane {self.name!r} is already claimed by this Lane object")
        t = self.target
        root = ensure_root(t.root)
        Registry().add(root)
        ensure_real_dir(t.namespace, 0o700)  # other users cannot enter: see actions/checks.py
        ensure_real_dir(t.namespace / META_DIR)
        if not self._lock.try_acquire():
            self._refuse()
        try:
            self._check_not_moved()
            self._lock.hold_folder()
            for sub in (TMP_DIR, SCRATCH_DIR, RECEIPTS_DIR):
                ensure_real_dir(t.namespace / sub)
            me = ProcessIdentity.current()
            leased = self.ports.take(me, user_name(), self.name, t)
            now = time.time()
            self._stamp = Stamp(
                lane=self.name,
                namespace=t.namespace.name,
                checkout_id=t.checkout.checkout_id,
                checkout_path=t.checkout.root,
                host=hostname(),
                boot_id=me.boot_id,
                pid=me.pid,
                start_ticks=me.start_ticks,
                user=user_name(),
                uid=os.getuid(),
                command=self.command,
                started_at=now,
                heartbeat_at=now,
                heartbeat_interval=self.heartbeat_interval,
                root=str(t.root),
                **self.fence_fields(),
                family=self.family,
                stdio=self.stdio if self.stdio is not None else stdio_now(),
                ports=leased,
            )
            write_stamp(t.namespace, self._stamp)
            ledger.append(t.namespace, "started", lane=self.name, command=self.command)
        except BaseException:
            self.ports.free()
            self._lock.release()
            raise
        self._stop = threading.Event()  # a fresh one per claim: a Lane can claim again
        self._beat = threading.Thread(
            target=self._heartbeat, args=(self._stop,), name="lanewatch-heartbeat", daemon=True
        )
        self._beat.start()
        return self

    def fence_fields(self) -> dict[str, Any]:
        f = self.fence
        if f is None:
            return {}
        return f.stamp_fields()

    def _check_not_moved(self) -> None:
        """Refuse rather than write into a namespace a clear moved away while we claimed."""
        if not self._lock.still_in_place():
            raise LanewatchError(f"{self.namespace} was moved away while claiming; try again")

    def _refuse(self) -> None:
        owner, seen = self._holder_stamp()
        if owner is not None:
            who = f"pid {owner.pid} on {owner.host} ({' '.join(owner.command)[:80]})"
        elif seen.stamp is not None:
            who = (
                f"a process that has written no live stamp yet (the stamp still names pid "
                f"{seen.stamp.pid}, {seen.stamp.state.value})"
            )
        else:
            who = f"a process that has written no stamp yet (the stamp is {seen.status.value})"
        ledger.append(
            self.namespace,
            "claim-refused",
            lane=self.name,
            by_pid=os.getpid(),
            owner_pid=owner.pid if owner else None,
        )
        raise ClaimRefused(f"lane {self.name!r} is already owned by {who}", owner=owner)

    def _holder_stamp(self) -> tuple[Stamp | None, StampRead]:
        """The stamp of whoever holds the lock, waiting briefly for a winner of a race to write
        it: until then the file may still be a previous owner's, which must not be named."""
        deadline = time.monotonic() + REFUSAL_WAIT
        while True:
            current = read_stamp(self.namespace)
            if current.stamp is not None and _may_hold_lock(current.stamp):
                return current.stamp, current
            if time.monotonic() >= deadline:
                return None, current
            time.sleep(0.02)

    def update_stamp(self, **changes: Any) -> None:
        """Rewrite the stamp (rare: e.g. once the child's pid is known)."""
        self._stamp = self.stamp.with_changes(**changes)
        write_stamp(self.namespace, self._stamp)

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_interval):
            try:
                touch_heartbeat(self.namespace)
            except OSError:
                # The folder vanished or turned unwritable: keep trying; readers see it overdue.
                continue

    def release(self, exit_code: int | None = None, event: str = "released") -> None:
        if not self.claimed:
            return
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
        now = time.time()
        try:
            self.update_stamp(
                state=OwnerState.RELEASED, released_at=now, heartbeat_at=now, exit_code=exit_code
            )
            ledger.append(self.namespace, event, lane=self.name, exit_code=exit_code)
        except OSError:
            pass  # the namespace was removed under us; the lock still has to go
        finally:
            self.ports.free()
            self._lock.release()

    def __enter__(self) -> Lane:
        return self.claim()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release(exit_code=0 if exc_type is None else 1)


_process_lanes: dict[tuple[str, str], Lane] = {}
_process_lanes_lock = threading.Lock()


def scratch_dir_for(
    name: str,
    *,
    root: str | os.PathLike[str] | None = None,
    checkout: str | os.PathLike[str] | None = None,
) -> Path:
    """The seed's API: this instance's scratch folder, created if missing. Fail-closed.

    The first call claims the lane for the life of the process (released at exit); later calls
    in the same process return the same folder. Inside the `lanewatch run` that owns this very
    lane (a live ancestor, see `lanes.nested`), nothing is claimed: the run is the owner.
    Raises Unbound outside a checkout and ClaimRefused when another live process owns the lane.
    """
    target = locate(name, root=root, checkout=checkout)
    if outer_owner(target) is not None:
        return ensure_real_dir(target.namespace / SCRATCH_DIR)
    key = (str(target.namespace), name)
    with _process_lanes_lock:
        lane = _process_lanes.get(key)
        if lane is None:
            lane = Lane(name, root=root, checkout=checkout).claim()
            _process_lanes[key] = lane
            if len(_process_lanes) == 1:
                atexit.register(_release_process_lanes)
    return lane.scratch_dir


@contextlib.contextmanager
def holding(target: LaneTarget, *, command: list[str] | None = None) -> Iterator[Path]:
    """Be entitled to write into `target`'s namespace for the `with` block.

    Inside the owning `lanewatch run`, nothing is claimed; otherwise the lane is claimed for the
    block (ClaimRefused if another owner holds it) and released after.
    """
    if outer_owner(target) is not None:
        yield target.namespace
        return
    lane = Lane(
        target.lane,
        root=target.root,
        checkout=target.checkout.root,
        command=list(command) if command is not None else list(sys.argv),
    )
    with lane:
        yield lane.namespace


def _release_process_lanes() -> None:
    with _process_lanes_lock:
        for lane in _process_lanes.values():
            lane.release(exit_code=0)
        _process_lanes.clear()
