"""Helpers for the engine's tests: stamps written by hand, real `lanewatch run` lanes, an engine
recording what it delivers. Everything lives under the test's tmp_path."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.engine.engine import Engine
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import META_DIR, OwnerState, Stamp, read_stamp, write_stamp
from lanewatch.linux.procid import ProcessIdentity, boot_id, hostname
from lanewatch.model.views import Changes, NamespaceView, merge_changes
from tests.conftest import LANE_START, LANEWATCH, wait_for

CHECKOUT = "repo-0123456789ab"
DRIVER = Path(__file__).with_name("engine_driver.py")
ENGINE_THREADS = tuple(
    f"lanewatch-{n}" for n in ("engine", "deliver", "prober", "inotify", "observer", "poller")
)


def stamp_after_spawn(namespace: Path, timeout: float = 30.0) -> Stamp:
    """The stamp `lanewatch run`'s runner writes after it spawned the command: the one that
    names the command (its pid) and says how the lane runs (its cgroup or why not, its mount
    and network namespaces). The command can be running, and say so, before the runner
    writes it (seen under load)."""

    def spawned() -> Stamp | None:
        s = read_stamp(namespace).stamp
        return s if s is not None and s.child_pid is not None else None

    found: Stamp = wait_for(spawned, timeout, what="the stamp written after the spawn")
    return found


def fill(ns: Path, files: int, size: int = 10) -> None:
    """`files` files of `size` bytes, spread over a shallow and a deep folder of `ns`."""
    for sub in ("tmp", "scratch/deep/er"):
        (ns / sub).mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (ns / ("tmp" if i % 2 else "scratch/deep/er") / f"f{i}").write_bytes(b"x" * size)


def make_evidence(root: Path) -> Path:
    """A namespace whose ledger holds a refused claim and whose receipts name another checkout."""
    ns = make_stamp(root, "evidence")
    fill(ns, 2)
    (ns / "receipts").mkdir()
    foreign = {"step": "build", "checkout_id": "other-000000000000"}
    (ns / "receipts" / "build.json").write_text(json.dumps(foreign))
    line = {"event": "claim-refused", "time": time.time(), "by_pid": 4242, "lane": "evidence"}
    (ns / META_DIR / "ledger.jsonl").write_text(json.dumps(line) + "\n")
    return ns


def make_stamp(root: Path, lane: str, **changes: Any) -> Path:
    """A namespace with a stamp naming this process (alive), unless `changes` say otherwise."""
    ns = root / namespace_name(CHECKOUT, lane)
    ns.mkdir(mode=0o700, parents=True, exist_ok=True)  # as `Lane` makes them
    (ns / META_DIR).mkdir(exist_ok=True)
    me = ProcessIdentity.current()
    now = time.time()
    values: dict[str, Any] = {
        "lane": lane,
        "namespace": ns.name,
        "checkout_id": CHECKOUT,
        "checkout_path": "/nonexistent/checkout",
        "host": hostname(),
        "boot_id": boot_id(),
        "pid": me.pid,
        "start_ticks": me.start_ticks,
        "user": "tester",
        "uid": os.getuid(),
        "command": ["test"],
        "started_at": now,
        "heartbeat_at": now,
        "heartbeat_interval": 5.0,
        "state": OwnerState.LIVE,
        "root": str(root),
    }
    values.update(changes)
    write_stamp(ns, Stamp(**values))
    return ns


@dataclass
class LaneProc:
    proc: subprocess.Popen[bytes]
    namespace: Path

    @property
    def stamp(self) -> Stamp:
        s = read_stamp(self.namespace).stamp
        assert s is not None
        return s


def start_lane(
    procs: list[subprocess.Popen[bytes]],
    repo: Path,
    root: Path,
    lane: str,
    cmd: Sequence[str] = ("sleep", "60"),
    *,
    heartbeat: float | None = None,
    wait_child: bool = True,
    fence: str = "auto",
) -> LaneProc:
    """A real `lanewatch run` in its own process group; returns once its stamp names CMD.
    `fence="none"` for a lane that must reach shared temp (what an unfenced lane does)."""
    args = [*LANEWATCH, "run", "--root", str(root), "--lane", lane, "--fence", fence]
    if heartbeat is not None:
        args += ["--heartbeat", str(heartbeat)]
    proc = subprocess.Popen(
        [*args, "--", *cmd], cwd=repo, stdin=subprocess.DEVNULL, process_group=0
    )
    procs.append(proc)
    ns = root.resolve() / namespace_name(_checkout_id(repo), lane)

    def ready() -> bool:
        s = read_stamp(ns).stamp
        return s is not None and s.pid == proc.pid and (s.child_pid is not None or not wait_child)

    # A lane start is a Python start and a stamp; at load 30 to 70 on two cores it took over 20 s.
    wait_for(lambda: ready() or proc.poll() is not None, LANE_START, what=f"lane {lane} started")
    return LaneProc(proc, ns)


def _checkout_id(repo: Path) -> str:
    from lanewatch.lanes.checkout import resolve_checkout

    return resolve_checkout(repo).checkout_id


def stop_lane(lane: LaneProc) -> None:
    """SIGTERM `lanewatch run` (it forwards to CMD's group and releases), then reap."""
    if lane.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(lane.proc.pid, signal.SIGCONT)
            os.kill(lane.proc.pid, signal.SIGTERM)
        lane.proc.wait(timeout=20)


@dataclass
class Recorder:
    """Collects what an engine delivers, merged, plus every health status it ever reported."""

    picture: Changes = field(default_factory=Changes)
    calls: int = 0
    fulls: int = 0
    statuses: set[tuple[str, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, changes: Changes) -> None:
        with self.lock:
            self.calls += 1
            self.fulls += changes.full
            self.picture = changes if changes.full else merge_changes(self.picture, changes)
            self.statuses |= {(h.root, h.status) for h in changes.health}

    def view(self, key: str | Path) -> NamespaceView | None:
        with self.lock:
            return self.picture.upserts.get(str(key))

    def health(self, root: str | Path) -> str | None:
        with self.lock:
            return next((h.status for h in self.picture.health if h.root == str(root)), None)


def _watching(rec: Recorder, root: Path) -> bool:
    with rec.lock:
        return any(h.root == str(root) and h.detail == "inotify" for h in rec.picture.health)


@contextlib.contextmanager
def running(roots: Sequence[Path], **kwargs: Any) -> Iterator[tuple[Engine, Recorder]]:
    """A started engine and its recorder; stopped (and checked to stop) at the end."""
    engine = Engine([str(r) for r in roots], **kwargs)
    rec = Recorder()
    engine.start(rec)
    try:
        assert engine.first_picture.wait(20)
        assert engine.settled.wait(30)  # watches up, sizes counted, one probe in
        wait_for(lambda: all(rec.health(r) not in (None, "ok") or _watching(rec, r) for r in roots))
        yield engine, rec
    finally:
        engine.stop()
        names = [t.name for t in threading.enumerate() if t.name.startswith(ENGINE_THREADS)]
        assert not names, f"threads left running: {names}"


class Driver:
    """`engine_driver.py` in a subprocess (optionally behind `prefix`, e.g. unshare), its JSON
    lines collected by a thread, its stderr in `log`. `program` is the interpreter and the
    script (another user's: a readable copy, tests/kits/userkit.py)."""

    def __init__(
        self,
        roots: Sequence[Path],
        log: Path,
        *,
        prefix: Sequence[str] = (),
        poll: bool = False,
        env: dict[str, str] | None = None,
        program: Sequence[str] = (sys.executable, str(DRIVER)),
    ) -> None:
        args = [*prefix, *program, *(["--poll"] if poll else [])]
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                [*args, *map(str, roots)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                process_group=0,
                env=env,
            )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(json.loads(raw))

    def wait(
        self, predicate: Callable[[dict[str, Any]], object], timeout: float = 30.0
    ) -> dict[str, Any]:
        """The first line (in order) satisfying `predicate`."""
        deadline = time.monotonic() + timeout
        while True:
            for line in list(self.lines):
                if predicate(line):
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"the driver exited: {self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no such line within {timeout}s; last: {self.lines[-3:]}")
            time.sleep(0.02)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGCONT)
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._reader.join(timeout=5)
