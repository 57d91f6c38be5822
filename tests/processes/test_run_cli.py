"""`lanewatch run` as users run it: a real CLI process, real commands, real signals."""

from __future__ import annotations

import io
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from lanewatch.lanes import ledger
from lanewatch.lanes.lane import Lane, locate
from lanewatch.lanes.lock import is_lock_held, lock_path
from lanewatch.lanes.stamp import OwnerState, Stamp, StampRead, read_stamp
from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness, start_ticks
from lanewatch.runner.run import FORWARDED, run_in_lane
from tests.conftest import LANEWATCH, Spawn, Subreaper, lanewatch, wait_for
from tests.kits.groups import Groups

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# Resets the signals a test sends to their defaults, then execs the rest of argv: the test
# process may itself have been started with some of them ignored (nohup, a background job).
DEFAULT_SIGNALS = textwrap.dedent(
    """
    import os, signal, sys
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    ignore = os.environ.pop("TEST_IGNORE_SIGNAL", "")
    if ignore:
        signal.signal(int(ignore), signal.SIG_IGN)
    os.execvp(sys.argv[1], sys.argv[1:])
    """
)

# A CMD that waits (with a deadline) for a file to appear.
WAIT_FOR_FILE = textwrap.dedent(
    """
    import os, sys, time
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]):
        if time.monotonic() > deadline:
            sys.exit(99)
        time.sleep(0.01)
    """
)


def start_run(
    spawn: Spawn,
    cwd: Path,
    cmd: Sequence[str],
    *options: str,
    log: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`lanewatch run [options] -- cmd` in the background, signals at their defaults."""
    args = [sys.executable, "-c", DEFAULT_SIGNALS, *LANEWATCH, "run", *options, "--", *cmd]
    if log is None:
        return spawn(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log.open("wb") as out:
        return spawn(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_spawned(namespace: Path, timeout: float = 30.0) -> Stamp:
    """The live stamp of a run once its CMD has been spawned."""

    def spawned() -> Stamp | None:
        stamp = read_stamp(namespace).stamp
        if stamp is not None and stamp.state is OwnerState.LIVE and stamp.child_pid:
            return stamp
        return None

    found = wait_for(spawned, timeout)
    assert isinstance(found, Stamp)
    return found


def cmd_group(stamp: Stamp) -> int:
    """The process group of a run's CMD (its pid: CMD leads its own group)."""
    assert stamp.pgid is not None and stamp.pgid > 1 and stamp.pgid == stamp.child_pid
    return stamp.pgid


def released(namespace: Path) -> Stamp:
    stamp = read_stamp(namespace).stamp
    assert stamp is not None
    assert stamp.state is OwnerState.RELEASED
    return stamp


def ns_of(lane: str, checkout: Path, root: Path | None = None) -> Path:
    return locate(lane, root=root, checkout=checkout).namespace


# -- exit codes -------------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "cmd"), [(0, ["true"]), (7, ["sh", "-c", "exit 7"])])
def test_exit_code_is_cmds(repo: Path, code: int, cmd: list[str]) -> None:
    lane = f"exit-{code}"
    result = lanewatch("run", "--lane", lane, "--", *cmd, cwd=repo)
    assert result.returncode == code, result.stderr
    stamp = released(ns_of(lane, repo))
    assert stamp.exit_code == code
    assert stamp.command == cmd
    assert stamp.child_pid is not None and stamp.pgid == stamp.child_pid
    events = [line.event for line in ledger.read(ns_of(lane, repo))]
    assert events == ["started", "spawned", "exited", "released"]
    exited = [line for line in ledger.read(ns_of(lane, repo)) if line.event == "exited"]
    assert exited[0].fields["exit_code"] == code
    assert is_lock_held(ns_of(lane, repo)) is False


def test_command_not_found_is_127(repo: Path, tmp_path: Path) -> None:
    result = lanewatch("run", "--lane", "nf", "--", str(tmp_path / "no-such-command"), cwd=repo)
    assert result.returncode == 127
    assert "not found" in result.stderr and "Traceback" not in result.stderr
    stamp = released(ns_of("nf", repo))
    assert stamp.exit_code == 127
    assert "spawn-failed" in [line.event for line in ledger.read(ns_of("nf", repo))]


@pytest.mark.parametrize("kind", ["no-exec-bit", "exec-format", "a-folder"])
def test_command_not_executable_is_126(repo: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / kind
    if kind == "a-folder":
        target.mkdir()
    else:
        target.write_bytes(b"\x7fELF\x00garbage, not a program\n")
        target.chmod(0o755 if kind == "exec-format" else 0o644)
    result = lanewatch("run", "--lane", kind, "--", str(target), cwd=repo)
    assert result.returncode == 126, result.stderr
    assert "Traceback" not in result.stderr
    assert released(ns_of(kind, repo)).exit_code == 126
    assert is_lock_held(ns_of(kind, repo)) is False


def test_arguments_after_the_separator_are_cmds(repo: Path) -> None:
    result = lanewatch("run", "--lane", "args", "--", "echo", "--", "--lane", "x", cwd=repo)
    assert result.returncode == 0
    assert result.stdout == "-- --lane x\n"


def test_run_without_a_command_is_a_usage_error(repo: Path) -> None:
    result = lanewatch("run", "--lane", "nothing", cwd=repo)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.unprivileged
@pytest.mark.parametrize(
    ("lane", "why"),
    [("", "empty"), ("x" * 400, "too long: 400 characters once encoded, the limit is 150")],
    ids=["empty", "too-long"],
)
def test_a_bad_lane_name_is_a_usage_error(
    repo: Path, isolated_state: Path, lane: str, why: str
) -> None:
    """Exit 2, as for any usage error (click's own); never a claim, never a namespace."""
    result = lanewatch("run", "--lane", lane, "--", "true", cwd=repo)
    assert result.returncode == 2
    assert why in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1  # one line
    assert not (isolated_state / "scratch").exists()


def test_an_undecodable_lane_name_from_argv_gets_its_own_folder(repo: Path) -> None:
    show = "import os, sys; sys.stdout.buffer.write(os.environb[b'LANEWATCH_LANE'])"
    lane = b"agent-\xff"  # not UTF-8: arrives in Python as 'agent-\udcff'
    result = subprocess.run(
        [*LANEWATCH, "run", "--lane", lane, "--", sys.executable, "-c", show],
        cwd=repo,
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == lane  # CMD sees the very bytes it was given
    namespace = ns_of(os.fsdecode(lane), repo)
    assert namespace.name.endswith(".agent-~FF")
    assert released(namespace).lane == "agent-\udcff"


# -- the environment of CMD ----------------------------------------------------------------

TEMPFILE_USER = textwrap.dedent(
    """
    import json, os, tempfile
    with tempfile.NamedTemporaryFile(delete=False, suffix=".json") as f:
        f.write(b"{}")
    folder = tempfile.mkdtemp()
    names = ["TMPDIR", "TMP", "TEMP", "LANEWATCH_LANE", "LANEWATCH_NAMESPACE",
             "LANEWATCH_CHECKOUT", "LANEWATCH_ROOT", "LANEWATCH_FENCE"]
    print(json.dumps({"file": f.name, "folder": folder, "gettempdir": tempfile.gettempdir(),
                      "env": {n: os.environ.get(n) for n in names}}))
    """
)


@pytest.mark.parametrize("fence", ["auto", "none"])
def test_tmpdir_is_really_used_by_tempfile(repo: Path, root: Path, fence: str) -> None:
    result = lanewatch(
        "run",
        "--lane",
        "temps",
        "--root",
        str(root),
        "--fence",
        fence,
        "--",
        sys.executable,
        "-c",
        TEMPFILE_USER,
        cwd=repo,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    namespace = ns_of("temps", repo, root)
    tmp = namespace / "tmp"
    how = seen["env"].pop("LANEWATCH_FENCE")
    if fence == "auto" and how != "none":  # fenced: /tmp is the lane's tmp folder
        tempdir = "/tmp"
    else:  # the folder itself, or a short link to it (runner/fence.py short_tmp)
        tempdir = seen["gettempdir"]
        assert os.path.realpath(tempdir) == str(tmp)
    assert how == "none" if fence == "none" else how in ("kernel", "bwrap")
    assert seen["gettempdir"] == tempdir
    for made in (seen["file"], seen["folder"]):  # files stay, in the namespace
        assert Path(made).parent == Path(tempdir)
        assert (tmp / Path(made).name).exists()
    assert (tmp / Path(seen["file"]).name).read_text() == "{}"
    assert seen["env"] == {
        "TMPDIR": tempdir,
        "TMP": tempdir,
        "TEMP": tempdir,
        "LANEWATCH_LANE": "temps",
        "LANEWATCH_NAMESPACE": str(namespace),
        "LANEWATCH_CHECKOUT": os.path.realpath(repo),
        "LANEWATCH_ROOT": str(root.resolve()),
    }


WRITE_SAME_NAME = textwrap.dedent(
    """
    import os, sys, time
    barrier = sys.argv[1]
    me = os.environ["LANEWATCH_CHECKOUT"]
    path = os.path.join(os.environ["TMPDIR"], "receipt.json")
    with open(path, "w") as f:
        f.write(me)
    deadline = time.monotonic() + 60
    while not os.path.exists(barrier):
        if time.monotonic() > deadline:
            sys.exit(99)
        time.sleep(0.01)
    with open(path) as f:
        sys.exit(0 if f.read() == me else 1)
    """
)


def test_two_worktrees_run_concurrently_without_touching_each_other(
    spawn: Spawn, worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    barrier = tmp_path / "both-wrote"
    runs = {
        wt: start_run(
            spawn, wt, [sys.executable, "-c", WRITE_SAME_NAME, str(barrier)], "--lane", "agent"
        )
        for wt in worktrees
    }
    receipts = {wt: ns_of("agent", wt) / "tmp" / "receipt.json" for wt in worktrees}
    assert len({p.parent.parent for p in receipts.values()}) == 2
    wait_for(lambda: all(p.exists() and p.read_text() for p in receipts.values()), 60)
    both_live = [read_stamp(p.parent.parent).stamp for p in receipts.values()]
    assert all(s is not None and s.state is OwnerState.LIVE for s in both_live)
    barrier.touch()
    for wt, proc in runs.items():
        assert proc.wait(timeout=60) == 0
        assert receipts[wt].read_text() == os.path.realpath(wt)
        assert released(receipts[wt].parent.parent).checkout_path == os.path.realpath(wt)


# -- one owner ---------------------------------------------------------------------------------


def test_a_second_run_in_a_held_lane_is_refused(
    spawn: Spawn, repo: Path, tmp_path: Path, groups: Groups
) -> None:
    stop = tmp_path / "stop"
    first = start_run(
        spawn, repo, [sys.executable, "-c", WAIT_FOR_FILE, str(stop)], "--lane", "one"
    )
    namespace = ns_of("one", repo)
    owner = wait_spawned(namespace)
    groups.append(cmd_group(owner))
    marker = tmp_path / "second-ran"
    second = lanewatch(
        "run", "--lane", "one", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", cwd=repo
    )
    assert second.returncode == 3
    assert f"pid {first.pid}" in second.stderr
    assert not marker.exists()
    assert read_stamp(namespace).stamp == owner  # the owner's stamp is untouched
    refused = [line for line in ledger.read(namespace) if line.event == "claim-refused"]
    assert len(refused) == 1 and refused[0].fields["owner_pid"] == first.pid
    stop.touch()
    assert first.wait(timeout=30) == 0
    assert released(namespace).exit_code == 0


# -- heartbeat ----------------------------------------------------------------------------------


def test_heartbeat_advances_the_stamp_mtime(
    spawn: Spawn, repo: Path, tmp_path: Path, groups: Groups
) -> None:
    stop = tmp_path / "stop"
    proc = start_run(
        spawn,
        repo,
        [sys.executable, "-c", WAIT_FOR_FILE, str(stop)],
        "--lane",
        "beat",
        "--heartbeat",
        "0.1",
    )
    namespace = ns_of("beat", repo)
    stamp = wait_spawned(namespace)
    groups.append(cmd_group(stamp))
    assert stamp.heartbeat_interval == 0.1
    reads: list[StampRead] = [read_stamp(namespace)]
    for _ in range(3):
        previous = reads[-1].mtime or 0.0

        def beat(previous: float = previous) -> StampRead | None:
            result = read_stamp(namespace)
            return result if (result.mtime or 0.0) > previous else None

        reads.append(wait_for(beat, 10))  # type: ignore[arg-type]
    for result in reads[1:]:
        assert result.stamp == stamp  # touched, not rewritten
        assert result.heartbeat_at == result.mtime
        assert result.heartbeat_at is not None and result.heartbeat_at > stamp.heartbeat_at
    stop.touch()
    assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize(("value", "expected"), [("0.25", 0.25), ("inf", 5.0), ("nan", 5.0)])
def test_heartbeat_default_comes_from_the_environment(
    repo: Path, value: str, expected: float
) -> None:
    env = {**os.environ, "LANEWATCH_HEARTBEAT": value}
    lane = f"env-beat-{value}"
    result = lanewatch("run", "--lane", lane, "--", "true", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    assert released(ns_of(lane, repo)).heartbeat_interval == expected


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "1e300"])
def test_a_heartbeat_no_stamp_can_carry_is_refused(repo: Path, value: str) -> None:
    result = lanewatch("run", "--heartbeat", value, "--", "true", cwd=repo)
    assert result.returncode == 2  # a usage error: click's range check, or the Lane's (NaN)
    assert "heartbeat" in result.stderr and "Traceback" not in result.stderr


def test_an_unusable_root_is_one_line_not_a_traceback(repo: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    result = lanewatch("run", "--root", str(a_file / "root"), "--", "true", cwd=repo)
    assert result.returncode == 125  # lanewatch failed around CMD: never CMD's own 1
    assert "Traceback" not in result.stderr
    assert str(a_file) in result.stderr


# -- signals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_forwarded_signal_that_kills_cmd_exits_128_plus_n(
    spawn: Spawn, repo: Path, groups: Groups, sig: signal.Signals
) -> None:
    lane = f"sig-{sig.name}"
    proc = start_run(spawn, repo, ["sleep", "60"], "--lane", lane)
    namespace = ns_of(lane, repo)
    stamp = wait_spawned(namespace)
    assert stamp.pgid is not None
    groups.append(cmd_group(stamp))
    os.kill(proc.pid, sig)
    assert proc.wait(timeout=30) == 128 + sig
    after = released(namespace)
    assert after.exit_code == 128 + sig
    exited = [line for line in ledger.read(namespace) if line.event == "exited"]
    assert exited[0].fields["signals_forwarded"] == [sig.name]
    assert exited[0].fields["exit_code"] == 128 + sig
    assert liveness(ProcessIdentity(stamp.child_pid, stamp.child_start_ticks, stamp.boot_id))[  # type: ignore[arg-type]
        0
    ] in (Liveness.DEAD, Liveness.ZOMBIE, Liveness.REUSED)
    assert is_lock_held(namespace) is False


def test_a_signal_during_the_claim_is_not_lost(spawn: Spawn, repo: Path, groups: Groups) -> None:
    """SIGTERM while `run` is still claiming: CMD must get it once spawned, and nothing may be
    left live (neither a stamp nor an unsupervised CMD)."""
    proc = start_run(spawn, repo, ["sleep", "60"], "--lane", "early")
    namespace = ns_of("early", repo)
    wait_for(namespace.exists, 30)  # the claim has begun
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    stamp = released(namespace)
    assert stamp.child_pid is not None
    groups.append(cmd_group(stamp))
    child = ProcessIdentity(stamp.child_pid, stamp.child_start_ticks or -1, stamp.boot_id)
    assert liveness(child)[0] is not Liveness.ALIVE
    exited = [line for line in ledger.read(namespace) if line.event == "exited"]
    assert exited[0].fields["signals_forwarded"] == ["SIGTERM"]


TRAPPER = textwrap.dedent(
    """
    import os, signal, sys, time
    sig, ready, got = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    def handler(signum, frame):
        with open(got, "w") as f:
            f.write(str(signum))
        sys.exit(0)
    signal.signal(sig, handler)
    open(ready, "w").close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(98)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_cmd_that_traps_the_signal_and_exits_0_gives_0(
    spawn: Spawn, repo: Path, tmp_path: Path, groups: Groups, sig: signal.Signals
) -> None:
    ready, got = tmp_path / "ready", tmp_path / "got"
    lane = f"trap-{sig.name}"
    proc = start_run(
        spawn,
        repo,
        [sys.executable, "-c", TRAPPER, str(int(sig)), str(ready), str(got)],
        "--lane",
        lane,
    )
    wait_for(ready.exists, 30)
    stamp = wait_spawned(ns_of(lane, repo))
    groups.append(cmd_group(stamp))
    os.kill(proc.pid, sig)
    assert proc.wait(timeout=30) == 0
    assert got.read_text() == str(int(sig))
    assert released(ns_of(lane, repo)).exit_code == 0


REPORT_DISPOSITION = textwrap.dedent(
    """
    import signal, sys, time
    print("ignored" if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else "default", flush=True)
    deadline = time.monotonic() + 60
    while not __import__("os").path.exists(sys.argv[1]) and time.monotonic() < deadline:
        time.sleep(0.01)
    """
)


def test_an_ignored_signal_stays_ignored_like_nohup(
    spawn: Spawn, repo: Path, tmp_path: Path, groups: Groups
) -> None:
    log, stop = tmp_path / "log", tmp_path / "stop"
    env = {**os.environ, "TEST_IGNORE_SIGNAL": str(int(signal.SIGHUP))}
    proc = start_run(
        spawn,
        repo,
        [sys.executable, "-c", REPORT_DISPOSITION, str(stop)],
        "--lane",
        "nohup",
        log=log,
        env=env,
    )
    stamp = wait_spawned(ns_of("nohup", repo))
    groups.append(cmd_group(stamp))
    wait_for(lambda: log.read_text().strip(), 30)
    assert log.read_text().strip() == "ignored"
    os.kill(proc.pid, signal.SIGHUP)  # ignored by lanewatch and by CMD alike
    stop.touch()
    assert proc.wait(timeout=30) == 0


# -- deaths -------------------------------------------------------------------------------------


def test_kill_9_of_the_owner_leaves_a_live_stamp_whose_pid_is_dead(
    spawn: Spawn, repo: Path, subreaper: Subreaper
) -> None:
    proc = start_run(spawn, repo, ["sleep", "60"], "--lane", "doomed")
    namespace = ns_of("doomed", repo)
    stamp = wait_spawned(namespace)
    assert stamp.child_pid is not None
    subreaper.adopt(stamp.child_pid)  # CMD outlives its killed supervisor
    inode = os.stat(lock_path(namespace)).st_ino
    assert is_lock_held(namespace) is True

    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL

    after = read_stamp(namespace)
    assert after.stamp is not None and after.stamp.state is OwnerState.LIVE
    assert after.stamp.pid == proc.pid
    state, reason = liveness(ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id))
    assert state is Liveness.DEAD, reason
    # a lock is not proof of life, but here it is free too: CMD did not inherit it
    assert is_lock_held(namespace) is False
    assert os.stat(lock_path(namespace)).st_ino == inode
    child = ProcessIdentity(stamp.child_pid, stamp.child_start_ticks or -1, stamp.boot_id)
    assert liveness(child)[0] is Liveness.ALIVE
    subreaper.kill_and_reap(stamp.child_pid)

    again = lanewatch("run", "--lane", "doomed", "--", "true", cwd=repo)
    assert again.returncode == 0, again.stderr
    assert released(namespace).pid != proc.pid


def test_a_grandchild_that_outlives_cmd_keeps_the_lane_until_it_ends(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """The runner is its lane's subreaper: a process CMD leaves behind keeps the lane live (not
    released, not clearable) until it ends; `run` then exits with CMD's code."""
    go = tmp_path / "go"
    cmd = [
        "sh",
        "-c",
        f"(while [ ! -e {go} ]; do sleep 0.02; done) </dev/null >/dev/null 2>&1 & "
        'echo $! > "$TMPDIR/grandchild"; exit 5',
    ]
    log = tmp_path / "run.log"
    proc = start_run(spawn, repo, cmd, "--lane", "forker", log=log)
    namespace = ns_of("forker", repo)
    wait_for(lambda: any(e.event == "lingering" for e in ledger.read(namespace)), 30)
    gpid = int((namespace / "tmp" / "grandchild").read_text())
    stamp = read_stamp(namespace).stamp
    assert stamp is not None and stamp.state is OwnerState.LIVE  # CMD is gone, the lane is not
    assert is_lock_held(namespace) is True
    assert proc.poll() is None
    assert liveness(ProcessIdentity(gpid, start_ticks(gpid) or 0, stamp.boot_id))[0] in (
        Liveness.ALIVE,
        Liveness.STOPPED,
    )
    said = log.read_text()
    # The waiting subshell, and maybe the `sleep 0.02` it runs at that moment.
    assert "sh exited (5); lane forker stays live while its " in said
    assert f"pid {gpid} (sh)" in said
    go.touch()
    assert proc.wait(timeout=30) == 5
    stamp = released(namespace)
    assert stamp.exit_code == 5
    assert is_lock_held(namespace) is False
    assert start_ticks(gpid) is None  # reaped by the runner: no zombie left behind
    assert [e.event for e in ledger.read(namespace)][-3:] == [
        "lingering",
        "processes-ended",
        "released",
    ]


def test_a_helper_that_ends_with_cmd_is_not_lingering(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """multiprocessing's resource tracker outlives its program by the moment it takes to read
    the end of its pipe: the lane does not "stay live" for it, and says nothing. The helper
    here is the same shape: it reads a pipe only CMD holds, and ends at its end."""
    helper = (
        "import subprocess, sys\n"
        "p = subprocess.Popen(['sh', '-c', 'read x; echo $$ > \"$TMPDIR/helper\"'],"
        " stdin=subprocess.PIPE)\n"
        "sys.exit(6)\n"
    )
    log = tmp_path / "run.log"
    proc = start_run(spawn, repo, [sys.executable, "-c", helper], "--lane", "tracked", log=log)
    assert proc.wait(timeout=60) == 6
    namespace = ns_of("tracked", repo)
    assert (namespace / "tmp" / "helper").exists()  # it ran, and ended after CMD
    assert "stays live" not in log.read_text()
    events = [e.event for e in ledger.read(namespace)]
    assert "lingering" not in events and events[-1] == "released", events


# -- from Python --------------------------------------------------------------------------------


@pytest.mark.parametrize("stdin", ["stringio", "closed", "none"])
def test_run_in_lane_from_python_with_any_stdin(
    repo: Path, root: Path, monkeypatch: pytest.MonkeyPatch, stdin: str
) -> None:
    """An embedding program (or pytest's capture) may have replaced or closed sys.stdin."""
    replacement: io.StringIO | None = io.StringIO()
    if stdin == "closed":
        replacement.close()  # type: ignore[union-attr]
    elif stdin == "none":
        replacement = None
    monkeypatch.setattr(sys, "stdin", replacement)
    before = {sig: signal.getsignal(sig) for sig in FORWARDED}
    lane = Lane(f"py-{stdin}", root=root, checkout=repo, command=["sh", "-c", "exit 4"])
    assert run_in_lane(lane, ["sh", "-c", "exit 4"]) == 4
    assert released(lane.namespace).exit_code == 4
    assert {sig: signal.getsignal(sig) for sig in FORWARDED} == before  # handlers restored


def test_run_in_lane_from_python_leaves_the_callers_own_children_alone(
    repo: Path, root: Path
) -> None:
    """An embedding program's own children (pytest's xdist workers, a server's helpers) are not
    the lane's: run_in_lane returned only once they ended (it waited for every child of the
    process: the floors' CI job hung on another test's child), and Ctrl-C would have reached
    them. The lane's own daemon is still waited for."""
    mine = subprocess.Popen(["sleep", "300"])  # the caller's, started before the lane
    try:
        done = repo / "daemon-done"
        lane = Lane("py-kids", root=root, checkout=repo, command=["sh"])
        script = f"(sleep 0.2; : > {shlex.quote(str(done))}) & exit 3"  # a daemon of the lane's
        assert run_in_lane(lane, ["sh", "-c", script]) == 3
        assert done.exists()  # the lane's own process was waited for
        assert mine.poll() is None  # the caller's child runs on, unsignalled and unreaped
        assert released(lane.namespace).exit_code == 3
    finally:
        mine.kill()
        mine.wait()


# -- a terminal ------------------------------------------------------------------------------

# Makes the pty on stdin the controlling terminal of this new session, then execs argv.
ON_A_TERMINAL = textwrap.dedent(
    """
    import fcntl, os, signal, sys, termios
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    os.execvp(sys.argv[1], sys.argv[1:])
    """
)

READ_A_LINE = "import sys; print('got ' + sys.stdin.readline().strip(), flush=True)"


def start_on_pty(
    spawn: Spawn, repo: Path, lane: str, cmd: Sequence[str]
) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    try:
        proc = spawn(
            [sys.executable, "-c", ON_A_TERMINAL, *LANEWATCH, "run", "--lane", lane, "--", *cmd],
            cwd=repo,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            process_group=None,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    return proc, master


def read_until(master: int, wanted: bytes, timeout: float = 30.0) -> bytes:
    seen = b""

    def more() -> bool:
        nonlocal seen
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                seen += os.read(master, 4096)
            except OSError:  # EIO: every slave end closed
                return True
        return wanted in seen

    wait_for(more, timeout, interval=0)
    return seen


def test_cmd_gets_the_terminal_and_ctrl_c_reaches_it(
    spawn: Spawn, repo: Path, groups: Groups
) -> None:
    proc, master = start_on_pty(spawn, repo, "tty", ["sleep", "60"])
    try:
        stamp = wait_spawned(ns_of("tty", repo))
        assert stamp.pgid is not None
        groups.append(cmd_group(stamp))
        wait_for(lambda: os.tcgetpgrp(master) == stamp.pgid, 30)  # CMD is in the foreground
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals the foreground group only
        assert proc.wait(timeout=30) == 128 + signal.SIGINT
        exited = [line for line in ledger.read(ns_of("tty", repo)) if line.event == "exited"]
        assert exited[0].fields["signals_forwarded"] == []  # it came from the terminal, not us
    finally:
        os.close(master)


def test_an_interactive_cmd_reads_the_terminal(spawn: Spawn, repo: Path, groups: Groups) -> None:
    proc, master = start_on_pty(spawn, repo, "tty-read", [sys.executable, "-c", READ_A_LINE])
    try:
        stamp = wait_spawned(ns_of("tty-read", repo))
        groups.append(cmd_group(stamp))
        os.write(master, b"hello\n")
        assert b"got hello" in read_until(master, b"got hello")
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(master)
