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

from lanewatch.audit import capture
from lanewatch.audit.classify import TEMPS, display, fix_for, scope_of
from lanewatch.audit.report import AuditReport, Finding, Run, Write
from lanewatch.audit.shim import CLOCK, CLOCK_ENV, CLOCK_MODULE, SHIM
from lanewatch.errors import LanewatchError
from lanewatch.lanes.checkout import find_checkout, resolve_checkout
from lanewatch.lanes.fence import ENV_FENCE_WITH, FOLDERS
from lanewatch.lanes.lane import SCRATCH_DIR, TEMP_VARS, locate
from lanewatch.lanes.stamp import read_stamp

EXIT_FENCE_REFUSED = 3  # `lanewatch run --fence tmp` where the fence cannot be built


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
    made = []
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
    on_phase: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audit `cmd`. Raises Unbound outside a checkout (without `checkouts`)."""
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
        runs = _run_all(cmd, places, work, say)
        report = _collect(cmd, runs, work)
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
    cmd: Sequence[str], places: Sequence[str], work: Path, say: Callable[[str], None]
) -> list[Run]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANEWATCH_")}
    if ENV_FENCE_WITH in os.environ:  # the one knob that passes: which way to fence
        env[ENV_FENCE_WITH] = os.environ[ENV_FENCE_WITH]
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
            full = [sys.executable, "-m", "lanewatch", "run", "--lane", lane, "--root", str(root)]
            full += ["--checkout", place, "--fence", "tmp", "--", sys.executable, "-I", "-S"]
            full += ["-c", SHIM, json.dumps(spec), *argv]
            log = open(run.log, "wb")  # noqa: SIM115 (closed below, when the run ends)
            proc = subprocess.Popen(
                full,
                cwd=place,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            started.append((run, proc, log))
        say(f"running {len(started)} lanes: {' '.join(cmd)}")
        for run, proc, log in started:
            run.exit_code = proc.wait()
            log.close()
    finally:
        for _run, proc, log in started:
            if proc.returncode is None:  # interrupted: the runs end with us (`run` forwards)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                log.close()
    return [run for run, _, _ in started]


def _collect(cmd: Sequence[str], runs: list[Run], work: Path) -> AuditReport:
    is_pytest = pytest_position(cmd) is not None
    found: dict[tuple[str, str], Finding] = {}
    unseen: set[str] = set()
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
        ticks = capture.read_clock(work / f"clock-{run.index}.jsonl")
        for item in seen:
            _add(found, run, item, item.area, ticks, is_pytest)
        after = capture.checkout_state(run.checkout)
        before = run.before
        if isinstance(after, str) or isinstance(before, str):
            unseen.add(
                f"the checkout {run.checkout}: {after if isinstance(after, str) else before}"
            )
            continue
        for item in capture.checkout_writes(before, after):
            _add(found, run, item, run.checkout, ticks, is_pytest)
    if len({r.checkout for r in runs}) < len(runs):
        unseen.add(
            "which of the runs sharing one checkout wrote a file in it: each is counted as a "
            "writer of every file changed there"
        )
    findings = sorted(found.values(), key=lambda f: (not f.shared, f.scope, f.path))
    unseen.add(
        "writes outside /tmp, /var/tmp, the home folder and the checkouts "
        "(/dev/shm, /run/user, other folders): the audit does not watch them yet"
    )
    return AuditReport(list(cmd), is_pytest, runs, findings, sorted(unseen))


def _add(
    found: dict[tuple[str, str], Finding],
    run: Run,
    item: capture.Seen,
    where: str,
    ticks: list[capture.Tick],
    is_pytest: bool,
) -> None:
    scope = scope_of(item.area, item.rel)
    key = (item.area, item.rel)
    finding = found.get(key)
    if finding is None:
        fix = fix_for(item.area, item.rel, scope.scope, is_pytest)
        finding = Finding(display(item.area, item.rel), scope.scope, scope.owner, fix)
        found[key] = finding
    tests = capture.tests_running_at(ticks, item.mtime_ns)
    # `where`: the real place the path names (each checkout its own; /tmp and ~ one for all)
    finding.writes.append(Write(run.index, where, item.kind, item.mtime_ns, tests))


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
