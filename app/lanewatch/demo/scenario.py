"""`DemoScenario`: a self-contained demo of every lane state and incident, with real processes.

Everything lives in `<state dir>/demo/` (two private checkouts, a scratch root, logs, and the
demo's own state dir so the user's roots registry is never touched), plus one demo-owned folder
in shared temp for the unbound writer. Lanes are real `lanewatch run` processes running the
demo's writer (`writer.py`); the states and incidents are made the way they happen for
real: SIGSTOP, SIGKILL, a second claimant, a stamp rewritten by another process, a process of
one lane sitting in another's namespace, a file held open in shared temp.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from filelock import Timeout

from lanewatch.demo import disk
from lanewatch.demo import writer as writer_program
from lanewatch.demo.loopback import free_port, ipv6_loopback
from lanewatch.demo.procs import DemoError, DemoProcess, signal_group, spawn, stop_all, wait_until
from lanewatch.lanes.budgets import FILE as BUDGETS_FILE
from lanewatch.lanes.checkout import Checkout
from lanewatch.lanes.leases import ENV_DIR as ENV_PORTS_DIR
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.roots import ENV_STATE_DIR
from lanewatch.lanes.stamp import OwnerState, read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness

EXIT_REFUSED = 3  # `lanewatch run`: another owner holds the lane's lock
WRITER = [sys.executable, writer_program.__file__]  # a script: no package import, quick to start
INTRUDER = [sys.executable, "-m", "lanewatch.demo.intruder"]
BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@dataclass(frozen=True)
class Expectation:
    """What the dashboard should show for one demo namespace."""

    state: str  # live | hung | stale | orphan | released
    checkout: str  # alpha | beta
    lane: str
    namespace: Path
    story: str
    incidents: tuple[str, ...] = ()


@dataclass(frozen=True)
class _LaneSpec:
    lane: str
    checkout: str
    state: str
    story: str
    writer: tuple[str, ...]  # arguments of writer.py
    incidents: tuple[str, ...] = ()
    place: str = ""  # where it holds its file: its own tmp, "in-agent-1" or "shared-temp"


LANE_PLAN = (
    _LaneSpec("agent-1", "alpha", "live", "writes every ~0.4 s; beta/tests sits inside it",
              ("--every", "0.4"), ("cross-lane-write",)),
    _LaneSpec("agent-2", "alpha", "live", "", ("--every", "0.7"), ("takeover",)),
    _LaneSpec("agent-3", "alpha", "live", "a second claim on it was refused; a receipt from beta",
              ("--every", "1.0"), ("refused-claim", "foreign-receipt")),
    _LaneSpec("pytest-gw0", "alpha", "hung", "owner and writer SIGSTOPped", ("--every", "0.5")),
    _LaneSpec("agent-old", "alpha", "stale", "owner SIGKILLed; its stamp still says live",
              ("--every", "0.5")),
    _LaneSpec("build", "alpha", "released", "ran 6 writes and exited 0", ("--burst", "6")),
    _LaneSpec("tests", "beta", "live", "holds a file open and its cwd in alpha/agent-1; "
              "the root's budgets.toml gives it 1 MB of memory", ("--every", "0.5"),
              ("over-budget",), "in-agent-1"),
    _LaneSpec("fuzz", "beta", "live", "holds a file open in shared temp", ("--every", "1.0",
              "--versions"), ("shared-file",), "shared-temp"),
    _LaneSpec("fuzz-2", "alpha", "live", "rewrites beta/fuzz's file in shared temp",
              ("--every", "2.0", "--versions"), ("shared-file",), "shared-temp"),
    _LaneSpec("web", "alpha", "live", "serves on its $PORT, and on a fixed port beta/api uses",
              ("--every", "1.5"), ("shared-port",), "serve"),
    _LaneSpec("api", "beta", "live", "listens on a port of alpha/web's lease, and on web's "
              "fixed port (IPv6)", ("--every", "1.5"), ("leased-port", "shared-port"), "on-web"),
)  # fmt: skip


@dataclass
class LaneRun:
    lane: str
    checkout: str
    namespace: Path
    hold: Path  # the file its writer keeps open
    runner: DemoProcess
    writer: DemoProcess | None = None


@dataclass
class _Layout:
    base: Path
    scratch_root: Path = field(init=False)
    logs: Path = field(init=False)
    state: Path = field(init=False)
    checkouts: Path = field(init=False)

    def __post_init__(self) -> None:
        self.scratch_root = self.base / "scratch"
        self.logs = self.base / "logs"
        self.state = self.base / "state"
        self.checkouts = self.base / "checkouts"


class DemoScenario:
    """Build the demo on `start()` (or `with`), tear every process and temp file down on `stop()`.

    `keep` keeps the demo folder after stop (never the processes, never the shared temp folder).
    `takeover_delay` makes the takeover happen that many seconds after start, so a dashboard
    that is already open sees it arrive; 0 does it before `start()` returns. `takeover_after`
    (a file the caller makes) holds it until that file appears instead: a test makes it once
    its dashboard has read the owner's stamp, rather than waiting out a delay long enough
    for a loaded machine.
    """

    def __init__(
        self,
        base: Path | None = None,
        *,
        shared_tmp: Path | None = None,
        heartbeat: float = 1.0,
        takeover_delay: float = 0.0,
        takeover_after: Path | None = None,
        keep: bool = False,
        timeout: float = 30.0,
    ) -> None:
        self.layout = _Layout(Path(os.path.realpath(base or disk.default_base())))
        self._built = self.layout.base / "built"  # made when the build is done
        self.keep = keep
        self.heartbeat = heartbeat
        self.takeover_delay = takeover_delay
        self.takeover_after = takeover_after
        self.timeout = timeout
        self._shared_parent = shared_tmp
        self.shared_tmp: Path | None = None
        self.checkouts: dict[str, Checkout] = {}
        self.processes: list[DemoProcess] = []
        self.lanes: dict[str, LaneRun] = {}
        self.expected: list[Expectation] = []
        self.notes: list[str] = []
        self.leftover: list[str] = []
        self.build_seconds = 0.0
        self._lock = disk.demo_lock(self.layout.base)
        self._me: ProcessIdentity | None = None
        self._prepared = False
        self._made: int | None = None  # a descriptor of the demo folder (`disk.prepare`)
        self._started = False
        self._stopping = False
        self._fixed_port: int | None = None  # the port web and api both listen on

    # -- public -----------------------------------------------------------------------------
    @property
    def base(self) -> Path:
        return self.layout.base

    @property
    def scratch_root(self) -> Path:
        """The scratch root to watch (`lanewatch status --root` / the dashboard's root)."""
        return self.layout.scratch_root

    @property
    def stopping(self) -> bool:
        return self._stopping

    def start(self) -> DemoScenario:
        if self._started:
            raise DemoError("this demo scenario was already started")
        self._started = True
        self.base.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            raise DemoError(
                f"another `lanewatch demo` is running (it holds {self._lock.lock_file}); "
                "stop it first"
            ) from None
        began = time.monotonic()
        try:
            self._build()
        except BaseException:
            self.stop()
            self._forget_folder()
            raise
        self.build_seconds = time.monotonic() - began
        return self

    def stop(self) -> list[str]:
        """Stop every process the demo started, remove its temp folder (and its folder unless
        `keep`). Idempotent; signals are held off until it is done. Returns roles left alive."""
        if self._stopping:
            return self.leftover
        self._stopping = True
        old = signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED)
        try:
            self.leftover = stop_all(self.processes)
            self.remove_files()
        finally:
            if self._lock.is_locked:
                self._lock.release()
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return self.leftover

    def __enter__(self) -> DemoScenario:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
        self.remove_files()  # again: the dashboard and its engine, which wrote in it, are gone
        self._forget_folder()

    def _forget_folder(self) -> None:
        if self._made is not None:
            os.close(self._made)
            self._made = None

    def remove_files(self) -> None:
        """Remove the demo's folder in shared temp, and its own folder unless `keep`. At stop,
        again when the dashboard has ended, and before a process that had to be abandoned ends
        (`tui.shell.leaving`): idempotent, never blocking on anything but the disk."""
        if not self._prepared:
            return
        disk.remove_shared_tmp(self.shared_tmp, self.base)
        if not self.keep:
            disk.remove_demo_folder(self.base, self._made)

    def namespace(self, checkout: str, lane: str) -> Path:
        return self.scratch_root / namespace_name(self.checkouts[checkout].checkout_id, lane)

    def counts(self) -> Counter[str]:
        return Counter(e.state for e in self.expected)

    @property
    def note(self) -> str:
        """One paragraph for the dashboard's demo banner."""
        counts = ", ".join(f"{n} {state}" for state, n in sorted(self.counts().items()))
        kinds = sorted({k for e in self.expected for k in e.incidents})
        leave = "keeps" if self.keep else "deletes"
        note = (
            f"Demo: real simulated lanes in {self.scratch_root} ({counts}); incidents: "
            f"{', '.join(kinds)}. Quitting stops every demo process and {leave} the demo folder."
        )
        return " ".join([note, *(f"Note: {n}." for n in self.notes)])

    def summary_lines(self) -> list[str]:
        lines = [f"{'STATE':9} {'LANE':18} WHAT"]
        for e in self.expected:
            incidents = f"  [{', '.join(e.incidents)}]" if e.incidents else ""
            lines.append(f"{e.state:9} {e.checkout + '/' + e.lane:18} {e.story}{incidents}")
        return lines

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        lay = self.layout
        self._made = disk.prepare(lay.base)
        self._prepared = True
        self._me = ProcessIdentity.current()
        self.shared_tmp = disk.make_shared_tmp(self._shared_parent, lay.base)
        self._save()
        for folder in (lay.scratch_root, lay.logs, lay.state):
            folder.mkdir()
        real = True
        for name in ("alpha", "beta"):
            self.checkouts[name], is_git = disk.make_checkout(lay.checkouts / name)
            real = real and is_git
        if not real:
            self.notes.append(
                "git was not found (or `git init` failed): the demo checkouts are bound by a "
                "minimal .git folder, not a real repository"
            )
        self._start_lanes()
        lanes = self.lanes
        # The intruder and the second claimant start as soon as their victims are up, while
        # the other lanes are still starting (the intruder only after its victim's runner has
        # written its last stamp update, or that update would undo the takeover).
        self._await_writer(lanes["agent-2"])
        intruder = self._take_over(lanes["agent-2"])
        self._await_writer(lanes["agent-3"])
        claimant = self._refuse_claim(lanes["agent-3"])
        self._save()
        for run in lanes.values():
            if run.writer is None and run.lane != "build":
                self._await_writer(run)
        self._await_released(lanes["build"])
        self._hang(lanes["pytest-gw0"])
        self._kill_owner(lanes["agent-old"])
        self._await_refused(claimant)
        self._await_takeover(lanes["agent-2"], intruder)
        self._plant_files()
        self._write_budgets()
        self._save()
        self._built.touch()  # the intruder's delay starts now

    def _write_budgets(self) -> None:
        """The root's budgets (lanes/budgets.py): `tests` gets 1 MB of memory, which its
        writer's interpreter alone is over: an `over-budget` warning once the engine meters it."""
        folder = self.scratch_root / ".lanewatch-root"
        folder.mkdir(parents=True, exist_ok=True)
        text = (
            '# lanewatch demo: budgets per lane (docs/engine.md)\n[lanes."tests"]\nmemory = "1M"\n'
        )
        (folder / BUDGETS_FILE).write_text(text, encoding="utf-8")

    def _start_lanes(self) -> None:
        victim = self.namespace("alpha", "agent-1") / "tmp"
        assert self.shared_tmp is not None
        for spec in LANE_PLAN:
            ns = self.namespace(spec.checkout, spec.lane)
            args = list(spec.writer)
            hold = ns / "tmp" / "activity.log"
            if spec.place == "in-agent-1":
                hold = victim / "from-beta-tests.log"
                args += ["--hold", str(hold), "--cwd", str(victim)]
            elif spec.place == "shared-temp":
                hold = self.shared_tmp / "fuzz-corpus.txt"  # both fuzz lanes write it
                args += ["--hold", str(hold)]
            elif spec.place in ("serve", "on-web"):
                args += self._listen_args(spec.place)
            # The fence would give the shared-temp writer a /tmp of its own: it opts out, as
            # a tool run with `--fence none` does, to show what lanewatch sees then.
            fence = "none" if spec.place == "shared-temp" else "auto"
            runner = self._spawn_runner(spec.lane, spec.checkout, [*WRITER, *args], fence=fence)
            self.lanes[spec.lane] = LaneRun(spec.lane, spec.checkout, ns, hold, runner)
            story = self._takeover_story() if spec.lane == "agent-2" else spec.story
            if spec.place == "shared-temp":
                story += f" {self.shared_tmp}"
            self.expected.append(
                Expectation(spec.state, spec.checkout, spec.lane, ns, story, spec.incidents)
            )

    def _listen_args(self, place: str) -> list[str]:
        """web listens on its $PORT and on a fixed port on 127.0.0.1; api (once web's lease is
        in its stamp) on a port of web's lease and on the fixed port on ::1 (else 127.0.0.2):
        both at once, as `localhost:PORT` reaches one or the other."""
        if self._fixed_port is None:
            self._fixed_port = free_port()
        fixed = self._fixed_port
        if place == "serve":
            return ["--listen", "env", "--listen", f"127.0.0.1:{fixed}"]
        web = self.lanes["web"]
        deadline = time.monotonic() + 20
        stamp = read_stamp(web.namespace).stamp
        while (stamp is None or stamp.ports is None) and time.monotonic() < deadline:
            time.sleep(0.02)
            stamp = read_stamp(web.namespace).stamp
        args = ["--listen", f"{ipv6_loopback() or '127.0.0.2'}:{fixed}"]
        if stamp is not None and stamp.ports:
            args += ["--listen", f"127.0.0.1:{stamp.ports[0] + 1}"]
        return args

    def _takeover_story(self) -> str:
        when = f"{self.takeover_delay:g} s after start" if self.takeover_delay else "at start"
        if self.takeover_after is not None:
            when = "once the dashboard watches"
        return f"the demo's intruder rewrites its stamp {when}"

    def _env(self) -> dict[str, str]:
        assert self._me is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANEWATCH_")}
        env[ENV_STATE_DIR] = str(self.layout.state)  # the user's roots registry stays untouched
        if ENV_PORTS_DIR in os.environ:  # the leases' folder, where it is not the machine's
            env[ENV_PORTS_DIR] = os.environ[ENV_PORTS_DIR]
        env[writer_program.ENV_DEMO_OWNER] = f"{self._me.pid}:{self._me.start_ticks}"
        return env

    def _spawn(self, role: str, argv: list[str], cwd: Path) -> DemoProcess:
        log = self.layout.logs / (role.replace(" ", "-") + ".log")
        proc = spawn(role, argv, env=self._env(), cwd=cwd, log=log)
        self.processes.append(proc)
        return proc

    def _spawn_runner(
        self, lane: str, co: str, cmd: list[str], role: str = "", fence: str = "auto"
    ) -> DemoProcess:
        checkout = self.checkouts[co].root
        argv = [sys.executable, "-m", "lanewatch", "run", "--lane", lane, "--fence", fence]
        argv += ["--root", str(self.scratch_root), "--checkout", checkout]
        argv += ["--heartbeat", f"{self.heartbeat:g}", "--", *cmd]
        return self._spawn(role or f"runner {lane}", argv, Path(checkout))

    def _save(self) -> None:
        assert self._me is not None
        disk.save_marker(self.base, self._me, self.shared_tmp, self.processes)

    def _running(self, proc: DemoProcess) -> None:
        assert proc.popen is not None
        if proc.popen.poll() is not None:
            raise DemoError(
                f"{proc.role} exited early (code {proc.popen.returncode}): {proc.log_tail()}"
            )

    def _await_writer(self, run: LaneRun) -> None:
        def spawned() -> DemoProcess | None:
            self._running(run.runner)
            s = read_stamp(run.namespace).stamp
            if s is None or s.pid != run.runner.pid or s.child_pid is None:
                return None
            if s.child_start_ticks is None:
                return None
            ident = ProcessIdentity(s.child_pid, s.child_start_ticks, s.boot_id)
            return DemoProcess(f"writer {run.lane}", ident)

        run.writer = wait_until(spawned, self.timeout, f"lane {run.lane} to start its writer")
        self.processes.append(run.writer)

        def holding() -> bool:
            self._running(run.runner)
            return run.hold.exists()

        wait_until(holding, self.timeout, f"the writer of {run.lane} to open {run.hold}")

    def _await_released(self, run: LaneRun) -> None:
        assert run.runner.popen is not None
        code = run.runner.popen.wait(timeout=self.timeout)
        stamp = read_stamp(run.namespace).stamp
        if code != 0 or stamp is None or stamp.state is not OwnerState.RELEASED:
            raise DemoError(f"lane {run.lane} did not run to completion: {run.runner.log_tail()}")

    def _hang(self, run: LaneRun) -> None:
        assert run.writer is not None
        both = (run.runner, run.writer)
        for proc in both:
            signal_group(proc, signal.SIGSTOP)
        wait_until(
            lambda: all(liveness(p.ident)[0] is Liveness.STOPPED for p in both),
            self.timeout,
            f"lane {run.lane} to stop",
        )

    def _kill_owner(self, run: LaneRun) -> None:
        assert run.writer is not None and run.runner.popen is not None
        signal_group(run.runner, signal.SIGKILL)  # first, so it cannot release the lane
        run.runner.popen.wait(timeout=self.timeout)
        signal_group(run.writer, signal.SIGKILL)
        wait_until(run.writer.gone, self.timeout, f"the writer of {run.lane} to die")

    def _refuse_claim(self, run: LaneRun) -> DemoProcess:
        return self._spawn_runner(
            run.lane, run.checkout, [sys.executable, "-c", "pass"], role=f"claimant {run.lane}"
        )

    def _await_refused(self, claimant: DemoProcess) -> None:
        assert claimant.popen is not None
        code = claimant.popen.wait(timeout=self.timeout)
        if code != EXIT_REFUSED:
            raise DemoError(f"the {claimant.role} was not refused (exit {code})")

    def _take_over(self, run: LaneRun) -> DemoProcess:
        argv = [*INTRUDER, "--namespace", str(run.namespace)]
        argv += ["--delay", f"{self.takeover_delay:g}"]
        if self.takeover_after is not None:  # the caller says when
            argv += ["--after", str(self.takeover_after)]
        elif self.takeover_delay:  # counted from the end of the build: the dashboard is starting
            argv += ["--after", str(self._built)]
        return self._spawn(f"intruder {run.lane}", argv, self.layout.base)

    def _await_takeover(self, run: LaneRun, intruder: DemoProcess) -> None:
        if self.takeover_delay or self.takeover_after is not None:
            return  # it happens later, in front of the dashboard

        def taken() -> bool:
            self._running(intruder)
            s = read_stamp(run.namespace).stamp
            return s is not None and s.pid == intruder.pid

        wait_until(taken, self.timeout, f"the intruder to rewrite the stamp of {run.lane}")

    def _plant_files(self) -> None:
        ns = self.namespace("alpha", "agent-0")
        disk.plant_orphan(ns, stamp=None, age=2 * 86400)
        self.expected.append(
            Expectation("orphan", "alpha", "agent-0", ns, "files from two days ago, no stamp")
        )
        ns = self.namespace("beta", "nightly")
        disk.plant_orphan(ns, stamp=b'{"schema": 1, "lane": "nightly", "pid": 4', age=6 * 3600)
        self.expected.append(
            Expectation("orphan", "beta", "nightly", ns, "a half-written (garbage) stamp")
        )
        disk.plant_foreign_receipt(
            self.lanes["agent-3"].namespace, "unit-tests", self.checkouts["beta"], "tests"
        )
