"""`lanewatch audit`: run the user's command in N lanes of N checkouts at once and list every
path it wrote outside the lanes, classified, with the runs (and tests) that wrote it.

Each run is a real `lanewatch run --fence tmp` in a private root of the audit's temp folder
(with its own state dir: the user's registry stays untouched). Inside the fence a stdlib shim
(`shim.SHIM`) points TMPDIR at the lane, mounts an overlay on $HOME where the kernel allows,
and execs CMD; under pytest the audit injects a clock plugin (`-p lanewatch_audit_clock`) that
says when each test ran, matched against the written files' times. The checkouts are
temporary `git worktree`s of HEAD unless given; the audit removes its worktrees and folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from lanewatch.audit import capture, stopper
from lanewatch.audit.auditreport import AuditReport, Finding, Read, Run, Write
from lanewatch.audit.kernelwatch import KernelWatch, own_times
from lanewatch.audit.portwatch import FIX as PORT_FIX
from lanewatch.audit.portwatch import PortWatch
from lanewatch.audit.scopes import (
    TEMPS,
    UNBOUND,
    area_of,
    display,
    fix_for,
    is_bytecode_cache,
    scope_of,
)
from lanewatch.audit.shim import CLOCK, CLOCK_ENV, CLOCK_MODULE, SHIM
from lanewatch.errors import LanewatchError
from lanewatch.lanes.checkout import find_checkout, resolve_checkout
from lanewatch.lanes.lane import SCRATCH_DIR, TEMP_VARS, locate
from lanewatch.lanes.leases import ENV_DIR as ENV_PORTS_DIR
from lanewatch.lanes.leases import lease_dir
from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.paths import IPC_TEMP, under_any
from lanewatch.runner.fence import ENV_FENCE_WITH, FOLDERS

EXIT_FENCE_REFUSED = 3  # `lanewatch run --fence tmp` where the fence cannot be built
PORTS, LISTENED = "ports", "listened"  # a port finding's owner and its writes' place and kind


def pytest_position(argv: Sequence[str]) -> int | None:
    """Where to insert `-p PLUGIN` when CMD is pytest (`pytest …`, `python -m pytest …`)."""
    if not argv:
        return None
    if os.path.basename(argv[0]) in ("pytest", "py.test"):
        return 1
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] == "pytest":
            return i + 2
    return None


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, timeout=120, check=False)


def _add_worktrees(repo: str, work: Path, count: int) -> list[str]:
    made: list[str] = []
    for i in range(count):
        path = work / f"checkout-{i}"
        done = _git("-C", repo, "worktree", "add", "--detach", "-q", str(path), "HEAD")
        if done.returncode != 0:
            _remove_worktrees(repo, made)
            raise LanewatchError(f"cannot make a worktree of {repo}: {done.stderr.strip()[:300]}")
        made.append(str(path))
    return made


def _remove_worktrees(repo: str, paths: Sequence[str]) -> None:
    """Remove the audit's own worktrees (and their entries in the repository), only those."""
    for path in paths:
        _git("-C", repo, "worktree", "remove", "--force", "--force", path)


def run_audit(
    cmd: Sequence[str],
    *,
    parallel: int | None = None,
    checkouts: Sequence[str] = (),
    keep: bool = False,
    timeout: float | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit `cmd`. Raises Unbound outside a checkout (without `checkouts`). `timeout`: end
    every run still going after that many seconds (stopper.py)."""
    say = on_phase or (lambda _msg: None)
    given = []
    for path in checkouts:
        bound = find_checkout(path)
        if bound is None:
            raise LanewatchError(f"--checkout {path} is not inside a git checkout")
        given.append(bound.root)
    count = parallel if parallel is not None else max(len(given), 2)
    repo = None if given else resolve_checkout(None).root
    work = Path(tempfile.mkdtemp(prefix="lanewatch-audit-"))
    worktrees: list[str] = []
    try:
        if repo is not None:
            say(f"making {count} worktrees of {repo} at HEAD")
            worktrees = _add_worktrees(repo, work, count)
        places = worktrees or [given[i % len(given)] for i in range(count)]
        kernel = KernelWatch([str(work), *places, str(lease_dir())])  # leases: lanewatch's own
        why = kernel.start()
        if why is not None:
            say(f"kernel attribution off: {why}")
        ports = PortWatch()
        try:
            runs, timed_out = _run_all(
                cmd, places, work, say, kernel if why is None else None, timeout, ports
            )
        finally:
            kernel.stop()
        report = _collect(cmd, runs, work, kernel if why is None else None, ports)
        report.kernel = "on" if why is None else why
        report.timeout, report.timed_out = timeout, timed_out
        report.work_dir = str(work)
        report.kept = keep
        report.repository = repo
        return report
    finally:
        if repo is not None:
            _remove_worktrees(repo, worktrees)
        if not keep:
            _remove(work)


def _run_all(
    cmd: Sequence[str],
    places: Sequence[str],
    work: Path,
    say: Callable[[str], None],
    kernel: KernelWatch | None,
    timeout: float | None,
    ports: PortWatch | None = None,
) -> tuple[list[Run], list[int]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANEWATCH_")}
    for knob in (ENV_FENCE_WITH, ENV_PORTS_DIR):  # which way to fence; where leases are
        if knob in os.environ:
            env[knob] = os.environ[knob]
    env["LANEWATCH_STATE_DIR"] = str(work / "state")
    root = work / "root"
    at = pytest_position(cmd)
    argv = list(cmd)
    if at is not None:
        (work / "plugin").mkdir()
        (work / "plugin" / f"{CLOCK_MODULE}.py").write_text(CLOCK)
        argv[at:at] = ["-p", CLOCK_MODULE]
    tag = os.urandom(3).hex()
    started: list[tuple[Run, subprocess.Popen[bytes], IO[bytes]]] = []
    try:
        for i, place in enumerate(places):
            lane = f"audit-{tag}-{i}"
            ns = locate(lane, root=root, checkout=place).namespace
            home = work / f"home-{i}"
            for sub in ("upper", "work"):
                (home / sub).mkdir(parents=True)
            spec = {
                "tmpdir": str(ns / SCRATCH_DIR / "audit-tmp"),
                "tempvars": list(TEMP_VARS),
                "home": os.environ.get("HOME", ""),
                "upper": str(home / "upper"),
                "work": str(home / "work"),
                "keep": [place, str(work)],
                "status": str(work / f"status-{i}.json"),
                "pythonpath": str(work / "plugin") if at is not None else "",
                "env": {CLOCK_ENV: str(work / f"clock-{i}.jsonl")},
            }
            run = Run(i, place, lane, str(ns), log=str(work / f"run-{i}.log"))
            run.before = capture.checkout_state(place)
            if kernel is not None:
                kernel.add_lane(i, str(ns))
            if ports is not None:
                ports.add_lane(i, str(ns))
            full = [sys.executable, "-m", "lanewatch", "run", "--lane", lane, "--root", str(root)]
            full += ["--checkout", place, "--fence", "tmp", "--", sys.executable, "-I", "-S"]
            full += ["-c", SHIM, json.dumps(spec), *argv]
            log: IO[bytes] = open(run.log, "wb")  # noqa: SIM115 (closed below, when the run ends)
            proc = subprocess.Popen(
                full,
                cwd=place,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            if kernel is not None:
                kernel.add_run(i, proc.pid)
            started.append((run, proc, log))
        say(f"running {len(started)} lanes: {' '.join(cmd)}")
        if ports is not None:
            ports.start()
        try:
            timed_out = stopper.wait_all([(run, proc) for run, proc, _ in started], timeout, say)
            for run, proc, log in started:
                run.exit_code = proc.wait()
                log.close()
        finally:
            if ports is not None:
                ports.stop()
    finally:
        for _run, proc, log in started:
            if proc.returncode is None:  # interrupted: the runs end with us (`run` forwards)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                log.close()
    return [run for run, _, _ in started], timed_out


def _collect(
    cmd: Sequence[str],
    runs: list[Run],
    work: Path,
    kernel: KernelWatch | None,
    ports: PortWatch | None = None,
) -> AuditReport:
    is_pytest = pytest_position(cmd) is not None
    clocks = {r.index: capture.read_clock(work / f"clock-{r.index}.jsonl") for r in runs}
    found: dict[tuple[str, str], Finding] = {}
    unseen: set[str] = set()
    bytecode: set[tuple[str, str]] = set()  # left out: see scopes.is_bytecode_cache
    for run in runs:
        run.log_tail = _tail(Path(run.log))
        try:
            status = json.loads((work / f"status-{run.index}.json").read_text())
        except (OSError, ValueError):
            status = None
        if status is None:
            run.home = "not seen: the run did not start"
            if run.exit_code == EXIT_FENCE_REFUSED:
                run.error = f"the fence could not be built: {run.log_tail}"
            else:
                run.error = f"the run did not start (exit {run.exit_code}): {run.log_tail}"
            continue
        run.home = str(status.get("home"))
        read = read_stamp(Path(run.namespace))
        run.fence = read.stamp.fence if read.stamp is not None else None
        if run.home != "overlay":
            unseen.add(f"the home folder: {run.home}")
        ns = Path(run.namespace)
        seen = [s for area in TEMPS for s in capture.temp_writes(ns / FOLDERS[area], area)]
        seen += capture.home_writes(work / f"home-{run.index}" / "upper")
        ticks = clocks[run.index]
        for item in seen:
            _add(found, run, item, item.area, ticks, is_pytest, bytecode)
        after = capture.checkout_state(run.checkout)
        before = run.before
        if isinstance(after, str) or isinstance(before, str):
            unseen.add(
                f"the checkout {run.checkout}: {after if isinstance(after, str) else before}"
            )
            continue
        for item in capture.checkout_writes(before, after):
            _add(found, run, item, run.checkout, ticks, is_pytest, bytecode)
    if len({r.checkout for r in runs}) < len(runs):
        unseen.add(
            "which of the runs sharing one checkout wrote a file in it: each is counted as a "
            "writer of every file changed there"
        )
    if kernel is None:
        unseen.add(
            "writes outside /tmp, /var/tmp, the home folder and the checkouts "
            "(/dev/shm, /run/user, other folders): kernel attribution needs root or "
            "CAP_SYS_ADMIN (sudo lanewatch audit ...)"
        )
        unseen.add("reads: which run read a written path needs kernel attribution (root)")
    else:
        unseen |= _kernel(kernel, runs, found, clocks, is_pytest, bytecode)
    if ports is not None:
        _ports(ports, found, clocks)
    own_ipc = _own_ipc_names(found, len(runs))
    findings = sorted(found.values(), key=lambda f: (not f.shared, not f.crossed, f.scope, f.path))
    report = AuditReport(list(cmd), is_pytest, runs, findings, sorted(unseen))
    report.bytecode_caches = len(bytecode)
    report.own_ipc_names = own_ipc
    return report


def _own_ipc_names(found: dict[tuple[str, str], Finding], runs: int) -> int:
    """Leave out (and count) the names in /dev/shm that one run alone wrote and no other run
    read, when two or more runs ran the same command: a name the program picked unique
    (multiprocessing's `sem.XXXXXX` and `psm_…`), which cannot meet another run's. A name two
    runs wrote stays a finding (shared); with one run there is nothing to compare."""
    if runs < 2:
        return 0
    mine = [
        key
        for key, f in found.items()
        if under_any(f.path, IPC_TEMP) and len(f.runs) == 1 and not f.crossed
    ]
    for key in mine:
        del found[key]
    return len(mine)


def _ports(
    ports: PortWatch, found: dict[tuple[str, str], Finding], clocks: dict[int, list[capture.Tick]]
) -> None:
    """A port a run listened on outside its lease: one finding per port (shared when two runs
    listened on it), with the tests running then."""
    for (run, proto, port), t in sorted(ports.seen.items()):
        label = f":{port}" + ("" if proto == "tcp" else f"/{proto}")
        finding = found.setdefault(("port", label), Finding(label, UNBOUND, PORTS, PORT_FIX))
        tests = capture.tests_running_at(clocks.get(run, []), t)
        finding.writes.append(Write(run, PORTS, LISTENED, t, tests))


def _kernel(
    kernel: KernelWatch,
    runs: list[Run],
    found: dict[tuple[str, str], Finding],
    clocks: dict[int, list[capture.Tick]],
    is_pytest: bool,
    bytecode: set[tuple[str, str]],
) -> set[str]:
    """Add what the kernel saw (every write by the runs' processes, and reads of those files)
    to `found`; return what it could not see."""
    home = os.environ.get("HOME", "")
    overlaid = {r.index for r in runs if r.home == "overlay"}
    by_path: dict[str, tuple[str, str]] = {}
    for acc, when in zip(kernel.accesses, own_times(kernel.accesses), strict=True):
        if acc.kind == "read":
            continue
        area, rel = area_of(acc.path, home)
        if area == "~" and acc.run in overlaid:
            continue  # the run's home overlay has it (and the path is not the real one)
        item = capture.Seen(area, rel, acc.kind, when)
        finding = _add(found, runs[acc.run], item, area, clocks[acc.run], is_pytest, bytecode)
        if finding is None:
            continue
        by_path[acc.path] = (area, rel)
        # Each file the kernel saw written is marked for reads: none seen is none made.
        finding.reads_seen = True
    read: set[tuple[str, int, tuple[str, ...]]] = set()
    for acc in kernel.accesses:
        if acc.kind == "read" and acc.path in by_path:
            tests = capture.tests_running_at(clocks[acc.run], acc.time_ns)
            key = (acc.path, acc.run, tuple(tests))
            if key not in read:  # a gate polling a file: its first read by each test is enough
                read.add(key)
                found[by_path[acc.path]].reads.append(Read(acc.run, acc.time_ns, tests))
    unseen = {
        "reads of the fence's private /tmp and /var/tmp and of the home overlay: each run has "
        "its own, so no run can read another's there (reads within a run are not listed)",
    }
    if kernel.exited:
        unseen.add(
            f"{kernel.exited} writes on this machine by processes that had exited before the "
            "audit read them: not attributed (a short `sh -c 'echo > f'`; they may be a run's)"
        )
    if kernel.unnamed:
        unseen.add(
            f"{kernel.unnamed} writes by the runs to files deleted before the audit could name "
            "them (a temporary file in the fence's private /tmp: its folder is gone)"
        )
    if kernel.unplaced:
        unseen.add(
            f"{kernel.unplaced} accesses by the runs through a mount of their own the audit "
            "cannot name (the home overlay: its writes are listed from its upper folder)"
        )
    if kernel.lost:
        unseen.add(f"the kernel's queue overflowed {kernel.lost} times: writes were lost")
    unseen |= {f"a filesystem not watched: {u}" for u in kernel.unmarked}
    unseen |= {f"reads of a written file not watched: {u}" for u in kernel.unread}
    return unseen


def _add(
    found: dict[tuple[str, str], Finding],
    run: Run,
    item: capture.Seen,
    where: str,
    ticks: list[capture.Tick],
    is_pytest: bool,
    bytecode: set[tuple[str, str]],
) -> Finding | None:
    """`item` added to its finding (returned); a bytecode cache is only counted (None)."""
    key = (item.area, item.rel)
    if is_bytecode_cache(item.rel):
        bytecode.add(key)
        return None
    scope = scope_of(item.area, item.rel)
    finding = found.get(key)
    if finding is None:
        fix = fix_for(item.area, item.rel, scope.scope, is_pytest)
        finding = Finding(display(item.area, item.rel), scope.scope, scope.owner, fix)
        found[key] = finding
    tests = capture.tests_running_at(ticks, item.mtime_ns)
    # `where`: the real place the path names (each checkout its own; /tmp and ~ one for all)
    finding.writes.append(Write(run.index, where, item.kind, item.mtime_ns, tests))
    return finding


def _remove(work: Path) -> None:
    """Remove the audit's folder. overlayfs leaves its work folder mode 000 (for a normal user
    too): open every folder to its owner first, never following a link (os.walk does not)."""
    for here, dirs, _files in os.walk(work):
        for name in dirs:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, 0o700)
    shutil.rmtree(work, ignore_errors=True)


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
