"""`EngineProcess`: the dashboard's engine, run in a process of its own.

Why a process: the engine's threads (watchdog's reader and emitter, the worker, the prober,
kernel attribution) and the UI thread shared one interpreter lock. Under a write load the UI's
work per frame held the lock in bursts, and every hop of an event through the engine's threads
waited behind it: write → model went from ~20 ms (engine alone) to ~220 ms p99 inside the
dashboard (docs/performance.md). In a child process the engine has an interpreter of its own and
the second core, and the UI's frames cost the engine nothing.

The parent half speaks the part of the `Engine` contract the dashboard uses: `start(on_changes)`,
`stop()`, `rescan()`, `acknowledge(id)`, plus `first_picture`, `settled` and `stats` for tests
and the bench. `on_changes` is called on this side's reader thread, as the in-process engine
calls it on its delivery thread. The child stops when its stdin ends, so it never outlives the
dashboard; if it dies on its own, every root is shown degraded with the reason and the child is
started again (with a growing pause, up to `MAX_RESTARTS` in a row without a picture).

The child sends a keep-alive frame every second even when idle. `quiet_for()` says how long it
has sent nothing (the dashboard shows that as degraded after a few seconds); after
`silence_restart` seconds of silence (stopped, wedged) the child is killed and started again
like one that died.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import lanewatch
from lanewatch.engine import wire
from lanewatch.engine.engine import acting_user, resolve_roots
from lanewatch.model.views import Changes, HealthStatus, SourceHealth

log = logging.getLogger(__name__)

STOP_GRACE = 10.0  # seconds the child has to stop its engine before it is killed
MAX_RESTARTS = 5
STDERR_LINES = 20  # the child's last lines of stderr, for the message when it dies
SILENCE_RESTART = 30.0  # seconds without a frame (it sends one a second) before a restart


class EngineStartError(RuntimeError):
    """The engine process could not start, or its engine refused to."""


def _child_env() -> dict[str, str]:
    """This process's environment, with this copy of lanewatch first on the child's path: the
    child runs the same code even when this process found it by a path of its own."""
    env = dict(os.environ)
    here = str(Path(lanewatch.__file__).resolve().parent.parent)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = here if not rest else f"{here}{os.pathsep}{rest}"
    return env


class EngineProcess:
    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        *,
        poll: bool = False,
        attribution: bool | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        """As `Engine`; `on_applied` is called on this side's reader thread, with the child's
        wall-clock time of each batch (for the bench)."""
        self.roots = resolve_roots(roots)  # here, so a bad registry fails where it did
        self.poll = poll
        self._attribution_wanted = attribution
        self._on_applied = on_applied
        self._on_changes: Callable[[Changes], None] | None = None
        self._child: subprocess.Popen[bytes] | None = None
        self._commands: wire.Writer | None = None
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the child and its pipes, against stop from any thread
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._answers: dict[int, object] = {}
        self._answered = threading.Condition(self._lock)
        self._requests = itertools.count(1)
        self._started = threading.Event()  # the first child's engine runs, or never will
        self._ran = False  # a child's engine has run (a later death restarts it)
        self._failure: str | None = None  # why the last child's engine refused, or died
        self.first_picture = threading.Event()
        self.settled = threading.Event()
        self.restarts = 0
        self.silence_restart = SILENCE_RESTART
        self._heard = 0.0  # monotonic time of the running child's last frame (or its start)
        self.attribution: str | None = None
        self.attribution_hint = ""

    # -- contract ------------------------------------------------------------------------------
    def start(self, on_changes: Callable[[Changes], None]) -> None:
        """Start the child and wait until its engine runs; raises `EngineStartError` if the
        process cannot start or its engine refused (the message says why)."""
        if self._on_changes is not None:
            raise RuntimeError("the engine is already started")
        self._on_changes = on_changes
        early = self._early_picture()
        child = self._spawn()
        if early is not None:
            self._call(early)  # before the reader runs: the child's picture comes after it
        self._reader = threading.Thread(
            target=self._read, args=(child,), name="lanewatch-engine-reader", daemon=True
        )
        self._reader.start()
        threading.Thread(target=self._watch, name="lanewatch-engine-watch", daemon=True).start()
        self._wait_started(child)

    def _early_picture(self) -> Changes | None:
        """Every namespace with its state, read here from the stamps (~0.05 s for 1,000),
        sizes not counted yet: the first screen does not wait for the child, whose
        interpreter and imports take 0.2-0.4 s. The child's first picture replaces it."""
        from lanewatch.engine.worker import Worker

        try:
            worker = Worker(self.roots, poll=self.poll)
            keeper = worker.keeper
            keeper.load_incidents()
            for root in self.roots:
                if worker.list_root(root) is not None:
                    keeper.health(SourceHealth(root, HealthStatus.OK.value, "starting the watch"))
            keeper.commit()
            return keeper.full_changes()
        except Exception:  # the child's picture follows anyway
            log.exception("reading the stamps before the engine started")
            return None

    def stop(self) -> None:
        """Prompt and idempotent; never raises."""
        self._stopping.set()
        with self._lock:
            child = self._child
        if child is not None:
            self._end(child)
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=STOP_GRACE)

    def rescan(self) -> None:
        self._send(("rescan",))

    def acknowledge(self, incident_id: str) -> None:
        if not self._send(("ack", incident_id, acting_user())):
            from lanewatch.engine.engine import acknowledge

            acknowledge(self.roots, incident_id)

    @property
    def stats(self) -> dict[str, int]:
        """The engine's counters, asked of the child ({} if it does not answer within 5 s)."""
        answer = self._ask("stats")
        return answer if isinstance(answer, dict) else {}

    def thread_names(self) -> dict[int, str]:
        """The child's threads, native id → name (for the bench's CPU by thread)."""
        answer = self._ask("threads")
        return answer if isinstance(answer, dict) else {}

    def _ask(self, what: str) -> object:
        request = next(self._requests)
        if not self._send((what, request)):
            return None
        deadline = time.monotonic() + 5.0
        with self._answered:
            while request not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or not self._answered.wait(left):
                    return None
            return self._answers.pop(request)

    def quiet_for(self) -> float | None:
        """Seconds since the running child's last frame; None while no child runs (not
        started, stopping, or dead and about to be restarted: its health says so)."""
        with self._lock:
            child, heard = self._child, self._heard
        if child is None or self._stopping.is_set() or child.poll() is not None:
            return None
        return time.monotonic() - heard

    def _watch(self) -> None:
        """Kill a child that has sent nothing, not even its keep-alive, for `silence_restart`
        seconds; the reader then restarts it as one that died, saying why. It is our own
        unreaped child: its pid cannot have been reused."""
        killed: subprocess.Popen[bytes] | None = None
        while not self._stopping.wait(1.0):
            quiet = self.quiet_for()
            with self._lock:
                child = self._child
            if quiet is None or quiet < self.silence_restart or child is None or child is killed:
                continue
            killed = child
            self._failure = f"the engine process sent nothing for {quiet:.0f} s"
            log.warning("%s; killing it", self._failure)
            with contextlib.suppress(OSError):
                child.kill()

    @property
    def pid(self) -> int | None:
        """The engine process's pid while it runs (tests and the bench measure it)."""
        with self._lock:
            child = self._child
        return child.pid if child is not None and child.poll() is None else None

    # -- the child ------------------------------------------------------------------------------
    def _spawn(self) -> subprocess.Popen[bytes]:
        try:
            child = subprocess.Popen(
                [sys.executable, "-m", "lanewatch.engine.child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=_child_env(),
                close_fds=True,
            )
        except OSError as exc:
            raise EngineStartError(f"cannot start the engine process: {exc}") from exc
        assert child.stdin is not None and child.stderr is not None
        commands = wire.Writer(child.stdin)
        settings = {
            "roots": self.roots,
            "poll": self.poll,
            "attribution": self._attribution_wanted,
            "report_applied": self._on_applied is not None,
            "ignore_pids": [os.getpid()],  # the dashboard's own moves are not anyone's writes
        }
        with self._lock:
            self._child, self._commands = child, commands
            self._heard = time.monotonic()
        threading.Thread(
            target=self._drain_stderr,
            args=(child.stderr,),
            name="lanewatch-engine-stderr",
            daemon=True,
        ).start()
        with contextlib.suppress(OSError, ValueError):  # dead at once: the reader says why
            commands.send(settings)
        return child

    def _wait_started(self, child: subprocess.Popen[bytes]) -> None:
        while not self._started.wait(0.05):
            if child.poll() is not None and not self._reader_alive():
                break
        if not self._ran:
            raise EngineStartError(self._failure or "the engine process did not start")

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _send(self, command: tuple[Any, ...]) -> bool:
        with self._lock:
            commands = self._commands
        if commands is None or self._stopping.is_set():
            return False
        try:
            commands.send(command)
        except (OSError, ValueError):
            return False
        return True

    def _end(self, child: subprocess.Popen[bytes]) -> None:
        """Ask the child to stop, close its stdin, and kill it if it has not ended in time.
        It is our own unreaped child: its pid cannot have been reused."""
        with self._lock:
            commands, self._commands = self._commands, None
        if commands is not None:
            with contextlib.suppress(OSError, ValueError):
                commands.send(("stop",))
        if child.stdin is not None:
            with contextlib.suppress(OSError):
                child.stdin.close()
        try:
            child.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            log.warning("the engine process did not stop in %.0f s; killing it", STOP_GRACE)
            child.kill()
            child.wait()

    # -- reading ---------------------------------------------------------------------------------
    def _read(self, child: subprocess.Popen[bytes]) -> None:
        failures = 0
        while True:
            pictured = self._read_child(child)
            if self._stopping.is_set():
                return
            self._end(child)
            reason = self._failure or self._death(child)
            self._failure = None
            if not self._ran:  # the first child never ran its engine: `start` raises
                self._failure = reason
                self._started.set()
                return
            failures = 0 if pictured else failures + 1
            if failures >= MAX_RESTARTS:
                self._degraded(f"{reason}; gave up after {failures} restarts: restart lanewatch")
                return
            self._degraded(f"{reason}; restarting it")
            if self._stopping.wait(min(30.0, 2.0**failures)):
                return
            self.restarts += 1
            try:
                child = self._spawn()
            except EngineStartError as exc:
                self._degraded(str(exc))
                return

    def _read_child(self, child: subprocess.Popen[bytes]) -> bool:
        """Hand on the child's frames until its stdout ends; whether a picture came."""
        assert child.stdout is not None
        pictured = False
        try:
            while True:
                message = wire.receive(child.stdout)
                if message is None:
                    return pictured
                self._heard = time.monotonic()  # any frame, keep-alives included
                pictured = self._handle(message) or pictured
        except (wire.WireError, OSError) as exc:
            self._stderr.append(str(exc))
            return pictured

    def _handle(self, message: Any) -> bool:
        kind = message[0]
        if kind == "changes":
            changes: Changes = message[1]
            self.attribution = changes.attribution or self.attribution
            self.attribution_hint = changes.attribution_hint or self.attribution_hint
            self._call(changes)
            return changes.full
        if kind == "applied" and self._on_applied is not None:
            self._on_applied(message[1], message[2])
        elif kind == "started":
            self._ran = True
            self._started.set()
        elif kind == "failed":  # the child ends next: `_read` says why, or `start` raises
            self._failure = message[1]
        elif kind == "first_picture":
            self.first_picture.set()
        elif kind == "settled":
            self.settled.set()
        elif kind == "answer":
            with self._answered:
                self._answers[message[1]] = message[2]
                self._answered.notify_all()
        elif kind == "log":
            logging.getLogger(message[2]).log(message[1], "%s", message[3])
        return False

    def _call(self, changes: Changes) -> None:
        assert self._on_changes is not None
        try:
            self._on_changes(changes)
        except Exception:  # the UI may be gone: never fatal to the reader
            log.exception("the changes callback failed")

    def _drain_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self._stderr.append(line)
                log.debug("engine process: %s", line)

    def _death(self, child: subprocess.Popen[bytes]) -> str:
        code = child.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
        last = next((line for line in reversed(self._stderr) if line.strip()), "")
        return f"the engine process ended ({how})" + (f": {last}" if last else "")

    def _degraded(self, detail: str) -> None:
        log.warning("%s", detail)
        if self._on_changes is None:
            return
        health = tuple(SourceHealth(r, HealthStatus.DEGRADED.value, detail) for r in self.roots)
        self._call(Changes(health=health, at=time.time()))
