"""A lane's members: what CMD starts stays the lane's (setsid, double fork, a cleared
environment, the runner's death), `status` lists it, `kill` ends it, `clear` waits for it.
Real `lanewatch run` processes, real signals, a real tmux server on a socket of the test's."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes import ledger
from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import OwnerState, read_stamp, write_stamp
from lanewatch.linux import reaper
from lanewatch.linux.procid import ProcessIdentity, boot_id, start_ticks
from lanewatch.processes import members, prober
from tests.conftest import LANEWATCH, Spawn, Subreaper, lanewatch, wait_for
from tests.kits.actionkit import NOBODY, as_user, python_as

pytestmark = pytest.mark.unprivileged  # user journeys: also run as a normal user

DEADLINE = 30.0

# CMD: fork; the child starts a session of its own and forks again (a daemon's double fork);
# the grandchild (optionally with an empty environment) writes its pid and waits for a file.
DOUBLE_FORK = textwrap.dedent(
    """
    import os, sys
    mode, out, go = sys.argv[1:4]
    waiter = (
        "import os, sys, time\\n"
        "out, go = sys.argv[1:3]\\n"
        "open(out + '.part', 'w').write(str(os.getpid()))\\n"
        "os.rename(out + '.part', out)\\n"
        "deadline = time.monotonic() + 120\\n"
        "while not os.path.exists(go) and time.monotonic() < deadline:\\n"
        "    time.sleep(0.02)\\n"
    )
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            env = {} if mode == "clear" else dict(os.environ)
            os.execve(sys.executable, [sys.executable, "-c", waiter, out, go], env)
        os._exit(0)
    os.wait()
    """
)


def ns_of(lane: str, repo: Path) -> Path:
    return locate(lane, checkout=repo).namespace


def status_of(repo: Path, lane: str) -> dict[str, Any]:
    result = lanewatch("status", "--json", cwd=repo)
    assert result.returncode in (0, 4, 5), result.stderr
    found = [n for n in json.loads(result.stdout)["namespaces"] if n["lane"] == lane]
    assert len(found) == 1, result.stdout
    return found[0]


def start_double_fork(
    spawn: Spawn, repo: Path, tmp_path: Path, lane: str, mode: str, *opts: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`lanewatch run --lane LANE [OPTS] -- python DOUBLE_FORK`; returns the runner, the
    grandchild's pid once CMD has exited (the runner lingers), and the file that ends it."""
    out, go = tmp_path / f"{lane}.pid", tmp_path / f"{lane}.go"
    cmd = [sys.executable, "-c", DOUBLE_FORK, mode, str(out), str(go)]
    return start_lingering(spawn, repo, lane, cmd, out, go, *opts)


def start_lingering(
    spawn: Spawn, repo: Path, lane: str, cmd: list[str], out: Path, go: Path, *opts: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`lanewatch run --lane LANE [OPTS] -- CMD`, where CMD leaves a process behind that
    writes its pid to `out` and waits for `go`; returns the runner and that pid once CMD has
    exited (the runner lingers), and `go`."""
    runner = spawn(
        [*LANEWATCH, "run", "--lane", lane, *opts, "--", *cmd],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    pid = int(wait_for(lambda: out.exists() and out.read_text(), DEADLINE, what="grandchild"))
    ns = ns_of(lane, repo)
    wait_for(lambda: any(e.event == "lingering" for e in ledger.read(ns)), DEADLINE)
    return runner, pid, go


def member(entry: dict[str, Any], pid: int) -> dict[str, Any]:
    found = [m for m in entry["members"] if m["pid"] == pid]
    assert found, entry
    return found[0]


def test_a_members_command_keeps_its_programs_name_from_a_long_path() -> None:
    """A venv's interpreter in a long checkout path (250 characters) filled the 200 kept, so
    the member showed as a bare folder name: its program is cut first, to `…/bin/python`."""
    python = "/tmp/" + "long" * 55 + "/checkout/.venv/bin/python"
    kept = members.command_line([python, "-c", "import os; os.fork()", ""])
    assert kept == "…/bin/python -c import os; os.fork()"
    assert members.command_line(["/usr/bin/python3", "-c", "pass"]) == "/usr/bin/python3 -c pass"
    long_args = members.command_line(["sleep", "x" * 300])
    assert long_args == ("sleep " + "x" * 300)[: members.MAX_COMMAND]


def test_a_daemon_stays_a_member_after_the_runner_is_killed_and_kill_ends_it(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    # Unfenced: the marker finds it (`test_a_daemon_in_a_fenced_lane_...`: the mount namespace).
    runner, pid, _go = start_double_fork(spawn, repo, tmp_path, "a", "keep", "--fence", "none")
    subreaper.adopt(pid)
    live = status_of(repo, "a")
    assert live["state"] == "live"  # CMD has exited; its daemon keeps the lane
    assert member(live, pid)["how"] == "descendant"  # re-parented to the runner (subreaper)
    assert os.getpgid(pid) == os.getsid(pid) != os.getsid(runner.pid)  # left CMD's session

    runner.kill()  # SIGKILL: the runner cannot release or wait any more
    runner.wait(timeout=DEADLINE)
    gone = status_of(repo, "a")
    assert gone["state"] == "headless", gone
    assert "1 process of the lane still runs" in gone["reason"]
    m = member(gone, pid)
    assert m["how"] == "marker" and m["start_ticks"] == start_ticks(pid)
    assert "python" in m["command"] and m["age"] is not None and m["age"] >= 0

    said = lanewatch("clear", "a", "--yes", cwd=repo)
    assert said.returncode != 0 and f"pid {pid}" in said.stderr + said.stdout
    assert ns_of("a", repo).is_dir()

    killed = lanewatch("kill", "a", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr + killed.stdout
    assert "stopped" in killed.stdout
    state = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)  # ours now: we are the subreaper
    assert state is None or state.si_pid == pid
    after = status_of(repo, "a")
    assert after["state"] == "stale" and after["members"] == []
    cleared = lanewatch("clear", "a", "--yes", cwd=repo)
    assert cleared.returncode == 0, cleared.stderr + cleared.stdout
    assert not ns_of("a", repo).exists()


# CMD starts a daemon that leaves CMD's session and clears its environment (no marker), then
# exits; the daemon writes its pid and waits for a file.
SETSID_DAEMON = (
    'setsid env -i sh -c \'echo $$ > "$0.part" && mv "$0.part" "$0"; '
    'while [ ! -e "$1" ]; do sleep 0.05; done\' "$0" "$1" </dev/null >/dev/null 2>&1 &'
)


def fenced_here() -> bool:
    from lanewatch.runner import fence

    return fence.kernel_refusal() is None


def test_a_daemon_in_a_fenced_lane_is_a_member_by_its_mount_namespace(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """`setsid env -i sh -c 'sleep …' &`: no marker, its own session, and, once the runner is
    SIGKILLed, out of every tree of the lane. Its mount namespace, the fence's, still names it:
    the lane is headless (not stale, not clearable) until `kill` ends it."""
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    out, go = tmp_path / "ns.pid", tmp_path / "ns.go"
    cmd = ["sh", "-c", SETSID_DAEMON, str(out), str(go)]
    runner, pid, _go = start_lingering(spawn, repo, "ns", cmd, out, go, "--fence", "auto")
    subreaper.adopt(pid)
    assert b"LANEWATCH_NAMESPACE" not in Path(f"/proc/{pid}/environ").read_bytes()
    assert os.getsid(pid) != os.getsid(runner.pid)
    stamp = read_stamp(ns_of("ns", repo)).stamp
    assert stamp is not None and stamp.fence == "kernel"
    theirs = os.readlink(f"/proc/{pid}/ns/mnt")
    assert stamp.mnt_ns == theirs != os.readlink("/proc/self/ns/mnt")  # as seen from outside

    runner.kill()  # SIGKILL: no release, no wait; the daemon is re-parented to this test
    runner.wait(timeout=DEADLINE)
    gone = status_of(repo, "ns")
    assert gone["state"] == "headless", gone
    assert member(gone, pid)["how"] == "mount-ns"
    said = lanewatch("clear", "ns", "--yes", cwd=repo)
    assert said.returncode != 0 and f"pid {pid}" in said.stderr + said.stdout
    assert ns_of("ns", repo).is_dir()

    killed = lanewatch("kill", "ns", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr + killed.stdout
    wait_for(lambda: status_of(repo, "ns")["state"] == "stale", DEADLINE, what="stale")
    assert lanewatch("clear", "ns", "--yes", cwd=repo).returncode == 0
    assert not ns_of("ns", repo).exists()


def test_a_stale_lane_whose_namespace_number_is_reused_does_not_claim_a_stranger(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """The kernel hands a freed mount namespace's inode number out again: a released lane's
    stamp may name, by number, the namespace of another lane's process started since. That
    process is not the old lane's (its /tmp is not the old lane's tmp/): the old lane stays
    released with no member (not headless), and `clear` removes it; the other lane keeps
    its process."""
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    done = lanewatch("run", "--lane", "old", "--fence", "auto", "--", "true", cwd=repo)
    assert done.returncode == 0, done.stderr
    old = ns_of("old", repo)
    released = read_stamp(old).stamp
    assert released is not None and released.state is not OwnerState.LIVE
    assert released.mnt_ns  # fenced: the number of a namespace freed when `true` ended
    out, go = tmp_path / "new.pid", tmp_path / "new.go"
    cmd = ["sh", "-c", SETSID_DAEMON, str(out), str(go)]
    _runner, pid, _go = start_lingering(spawn, repo, "new", cmd, out, go, "--fence", "auto")
    subreaper.adopt(pid)
    theirs = os.readlink(f"/proc/{pid}/ns/mnt")
    # The reuse itself cannot be forced on demand (the kernel picks the number), so the stamp
    # is written by hand: as if the old lane's freed namespace number had gone to this one.
    write_stamp(old, dataclasses.replace(released, mnt_ns=theirs))
    assert status_of(repo, "new")["state"] == "live"
    seen = status_of(repo, "old")
    assert seen["state"] == "released" and seen["members"] == [], seen
    # The actions' judgement (`clear`, `kill`): no member, nothing it cannot tell.
    stamp = read_stamp(old).stamp
    assert stamp is not None and stamp.mnt_ns == theirs
    assert prober.judge(str(old), stamp, time.time(), released=True) is None
    # Without its tmp/ folder the old lane cannot tell a member from a stranger: unknown
    # (it cannot be cleared), never a member.
    (old / "tmp").rename(old / "tmp.away")
    blind = prober.judge(str(old), stamp, time.time(), released=True)
    assert blind is not None and blind.members == () and blind.unreadable >= 1, blind
    (old / "tmp.away").rename(old / "tmp")
    cleared = lanewatch("clear", "old", "--yes", cwd=repo)
    assert cleared.returncode == 0, cleared.stderr + cleared.stdout
    assert not old.exists()
    assert os.readlink(f"/proc/{pid}/ns/mnt") == theirs  # the stranger was left alone
    assert member(status_of(repo, "new"), pid)["how"] in ("descendant", "group")


# A process of our own uid that made itself non-dumpable (as ssh-agent, gpg-agent and sshd's
# session processes do): a normal user may no longer read its /proc/PID/ns/mnt, root or
# environ. It writes its pid to argv[1] and waits for argv[2] to exist.
NON_DUMPABLE = textwrap.dedent(
    """
    import ctypes, os, sys, time
    PR_SET_DUMPABLE = 4
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    out, go = sys.argv[1:3]
    open(out + ".part", "w").write(str(os.getpid()))
    os.rename(out + ".part", out)
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.02)
    """
)


def withheld(pid: int) -> bool:
    """Whether this process may not read `pid`'s mount namespace (root may read any)."""
    try:
        os.readlink(f"/proc/{pid}/ns/mnt")
    except PermissionError:
        return True
    return False


def test_an_own_agent_that_hides_its_namespace_neither_joins_nor_blocks_a_fenced_lane(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """A user's ssh-agent started after a fenced lane's run hides its mount namespace from the
    user. Its mountinfo still says what is on its /tmp (not the lane's folder): the released
    lane stays released and clearable, not "unknown: … cannot be read here"."""
    if os.geteuid() == 0:
        pytest.skip("root reads every process's namespace (the unprivileged tier runs this)")
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    done = lanewatch("run", "--lane", "agent", "--fence", "auto", "--", "true", cwd=repo)
    assert done.returncode == 0, done.stderr
    stamp = read_stamp(ns_of("agent", repo)).stamp
    assert stamp is not None and stamp.mnt_ns, stamp
    out, go = tmp_path / "agent.pid", tmp_path / "agent.go"
    agent = spawn([sys.executable, "-c", NON_DUMPABLE, str(out), str(go)])
    pid = int(wait_for(lambda: out.exists() and out.read_text(), DEADLINE, what="the agent"))
    assert withheld(pid), "the kernel let us read a non-dumpable process's namespace"
    try:
        seen = status_of(repo, "agent")
        assert seen["state"] == "released" and seen["members"] == [], seen
        dry = lanewatch("clear", "agent", "--dry-run", cwd=repo)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert "would clear" in dry.stdout, dry.stdout
    finally:
        go.touch()
        agent.wait(timeout=DEADLINE)


# As another user: judge the lane from its stamp's bytes, as `status` would, and say how.
JUDGE_AS_ANOTHER = """
import json, sys, time
from lanewatch.lanes.stamp import parse_stamp
from lanewatch.linux.procid import boot_id, hostname
from lanewatch.model.classify import classify
from lanewatch.processes import prober
read = parse_stamp(sys.argv[1].encode())
ev = prober.judge(sys.argv[2], read.stamp, time.time())
v = classify(read, ev, time.time(), host=hostname(), boot_id=boot_id())
print(json.dumps({"state": v.state.value, "reason": v.reason, "members": len(ev.members),
                  "unreadable": ev.unreadable}))
"""


def orphaned_daemon(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper, lane: str
) -> tuple[Path, int]:
    """A fenced lane whose setsid daemon outlives its SIGKILLed runner: (namespace, pid)."""
    out, go = tmp_path / f"{lane}.pid", tmp_path / f"{lane}.go"
    cmd = ["sh", "-c", SETSID_DAEMON, str(out), str(go)]
    runner, pid, _go = start_lingering(spawn, repo, lane, cmd, out, go)
    subreaper.adopt(pid)
    runner.kill()
    runner.wait(timeout=DEADLINE)
    return ns_of(lane, repo), pid


def judged_by(prefix: list[str], ns: Path) -> dict[str, Any]:
    """The lane's verdict as the user of `prefix` makes it from the stamp's bytes."""
    data = (ns / ".lanewatch" / "owner.json").read_text()
    code = f"import sys; sys.argv[1:] = {[data, str(ns)]!r}\n" + JUDGE_AS_ANOTHER
    done = python_as(prefix, code)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_fenced_lane_seen_by_a_user_who_cannot_read_its_namespace_is_unknown_not_stale(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root's fenced lane, its runner SIGKILLed, its daemon alive: root sees it headless; a
    user who may not read root's /proc/PID/ns/mnt cannot tell, and says unknown (never stale,
    never "no member"). Without a cgroup (whose cgroup.procs anyone may read: then that user
    sees the members, tests/processes/test_footprint.py)."""
    monkeypatch.setenv("LANEWATCH_CGROUP", "off")
    prefix = as_user(NOBODY)  # root only: a process the other user cannot read
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    ns, _pid = orphaned_daemon(spawn, repo, tmp_path, subreaper, "other")
    assert status_of(repo, "other")["state"] == "headless"  # root reads the namespace
    seen = judged_by(prefix, ns)
    assert seen["state"] == "unknown" and seen["members"] == 0, seen
    assert seen["unreadable"] >= 1 and "cannot be read here" in seen["reason"], seen


def test_a_user_who_may_see_the_lanes_folder_tells_its_member_by_the_members_mountinfo(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """The same lane, judged by a user who may not read root's /proc/PID/ns/mnt or root/ but
    may reach the lane's folder (CAP_DAC_OVERRIDE only): the daemon's /proc/PID/mountinfo,
    readable by all, shows the lane's tmp/ folder on its /tmp, so it is the lane's member and
    the lane headless. (A normal user's own fenced lane never hides a member from that user:
    the fence's user namespace is the user's, where it may read every process.)"""
    prefix = as_user(NOBODY, caps=("dac_override",))
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: no mount namespace of the lane's own")
    ns, pid = orphaned_daemon(spawn, repo, tmp_path, subreaper, "seen")
    seen = judged_by(prefix, ns)
    assert seen["state"] == "headless" and seen["members"] >= 1, seen  # its `sleep`s too
    withheld = python_as(prefix, f"import os; os.readlink('/proc/{pid}/ns/mnt')")
    assert "PermissionError" in withheld.stderr, "that user could read the namespace after all"


def test_a_daemon_with_a_cleared_environment_is_a_member_while_the_runner_lives(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """No marker, its own session: only the runner's tree knows it. `kill` of the live lane
    reaches it (it is outside CMD's group); the runner then releases with CMD's code."""
    runner, pid, _go = start_double_fork(spawn, repo, tmp_path, "bare", "clear")
    subreaper.adopt(pid)
    assert b"LANEWATCH_NAMESPACE" not in Path(f"/proc/{pid}/environ").read_bytes()
    live = status_of(repo, "bare")
    assert live["state"] == "live" and member(live, pid)["how"] == "descendant"
    killed = lanewatch("kill", "bare", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr + killed.stdout
    assert runner.wait(timeout=DEADLINE) == 0
    stamp = read_stamp(ns_of("bare", repo)).stamp
    assert stamp is not None and stamp.state is OwnerState.RELEASED and stamp.exit_code == 0
    assert start_ticks(pid) is None  # the runner reaped it


# --- tmux -------------------------------------------------------------------------------------

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")


@pytest.fixture
def tmux_socket(tmp_path: Path) -> Iterator[Path]:
    """A socket of the test's own, never the user's server; its server is killed at the end."""
    sock = tmp_path / "tmux.sock"
    try:
        yield sock
    finally:
        subprocess.run(
            ["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=DEADLINE
        )


@needs_tmux
def test_a_tmux_session_started_by_the_lane_keeps_it_live_until_it_ends(
    spawn: Spawn, repo: Path, tmp_path: Path, tmux_socket: Path
) -> None:
    go = tmp_path / "go"
    session = f"while [ ! -e {go} ]; do sleep 0.05; done"
    runner = spawn(
        [*LANEWATCH, "run", "--lane", "a", "--", "tmux", "-S", str(tmux_socket), "new", "-d",
         session],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    ns = ns_of("a", repo)
    wait_for(lambda: any(e.event == "lingering" for e in ledger.read(ns)), DEADLINE)
    live = status_of(repo, "a")
    assert live["state"] == "live"
    commands = " | ".join(m["command"] for m in live["members"])
    assert "tmux" in commands and ("sleep" in commands or "while" in commands), commands
    assert runner.poll() is None  # `tmux new -d` returned; the lane did not
    go.touch()  # the session's command ends, the session with it, then the server
    assert runner.wait(timeout=DEADLINE) == 0
    assert runner.stderr is not None
    assert b"stays live while its" in runner.stderr.read()
    done = status_of(repo, "a")
    assert done["state"] == "released" and done["members"] == []


@needs_tmux
def test_tmux_dash_L_in_a_fenced_lane_keeps_it_live_and_names_the_socket_to_attach(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """The issue's own form, `lanewatch run --lane a -- tmux -L x new -d …`: the server's
    socket lands in the lane's private /tmp (`<namespace>/tmp/tmux-UID/x` outside). The runner
    stays with the lane, names that socket to attach from outside, and releases the lane when
    the session ends. (It once crashed there, releasing the lane under the running session.)"""
    if not fenced_here():
        pytest.skip("unfenced, `tmux -L` would use the machine's shared /tmp")
    go = tmp_path / "go"
    session = f"while [ ! -e {go} ]; do sleep 0.05; done"
    runner = spawn(
        [*LANEWATCH, "run", "--lane", "a", "--", "tmux", "-L", "x", "new", "-d", session],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ns = ns_of("a", repo)
    try:
        wait_for(lambda: any(e.event == "lingering" for e in ledger.read(ns)), DEADLINE)
        live = status_of(repo, "a")
        assert live["state"] == "live", live
        assert any("tmux" in m["command"] for m in live["members"]), live["members"]
        assert runner.poll() is None
    finally:
        go.touch()
    assert runner.wait(timeout=DEADLINE) == 0
    assert runner.stderr is not None
    said = runner.stderr.read().decode()
    socket = ns / "tmp" / f"tmux-{os.getuid()}" / "x"
    assert f"Attach from outside the lane: tmux -S {socket} attach." in said, said
    assert status_of(repo, "a")["state"] == "released"


@needs_tmux
def test_a_tmux_server_running_outside_the_lane_is_named_with_the_recipe(
    repo: Path, tmux_socket: Path
) -> None:
    outer = subprocess.run(
        ["tmux", "-S", str(tmux_socket), "new", "-d", "-s", "outer", "sleep 120"],
        capture_output=True,
        timeout=DEADLINE,
    )
    assert outer.returncode == 0, outer.stderr
    result = lanewatch(
        "run", "--lane", "b", "--", "tmux", "-S", str(tmux_socket), "new", "-d", "true", cwd=repo
    )
    assert result.returncode == 0, result.stderr
    assert f"tmux server already running on {tmux_socket}, outside lane b" in result.stderr
    assert "lanewatch run --lane b -- tmux -L b new -d true" in result.stderr
    assert "stays live" not in result.stderr  # the server is not the lane's: nothing to wait for


@pytest.fixture
def pane_tmux() -> Iterator[Path]:
    """A tmux server as the user's own, whose pane's `$TMUX` a lane inherits: its socket in the
    real /tmp, where the fence hides it (a folder of this test's, unique; never the user's
    server). Killed, and its folder removed, at the end."""
    folder = Path(tempfile.mkdtemp(prefix="lanewatch-test-tmux-", dir="/tmp"))
    sock = folder / "default"
    try:
        outer = subprocess.run(
            ["tmux", "-S", str(sock), "new", "-d", "-s", "outer", "sleep 300"],
            capture_output=True,
            timeout=DEADLINE,
        )
        assert outer.returncode == 0, outer.stderr
        yield sock
    finally:
        subprocess.run(
            ["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=DEADLINE
        )
        shutil.rmtree(folder, ignore_errors=True)


@needs_tmux
@pytest.mark.parametrize("how", ["kernel", *(["bwrap"] if shutil.which("bwrap") else [])])
def test_tmux_new_from_inside_a_tmux_pane_runs_in_a_server_of_the_lanes_own(
    spawn: Spawn, repo: Path, tmp_path: Path, pane_tmux: Path, how: str
) -> None:
    """`lanewatch run --lane t -- tmux new -d …` from a tmux pane (`$TMUX` set). The
    fence hides the pane's server; tmux once failed to make its socket there, ran nothing and
    exited 0. Now the session runs in the lane's own server: CMD ran, the lane is live with
    it as a member, one attach line names the socket that exists, `kill` ends it."""
    if not fenced_here():
        pytest.skip("unfenced, tmux reaches the pane's server (the warning's case)")
    ran = tmp_path / "ran"
    session = f"touch {ran}; sleep 300"
    env = {**os.environ, "TMUX": f"{pane_tmux},{os.getpid()},0", "TMUX_PANE": "%0"}
    env.pop("TMUX_TMPDIR", None)
    env["LANEWATCH_FENCE_WITH"] = how
    runner = spawn(
        [*LANEWATCH, "run", "--lane", "t", "--", "tmux", "new", "-d", "-s", "inner", session],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ns = ns_of("t", repo)
    wait_for(ran.exists, DEADLINE, what="the session's command ran")
    wait_for(lambda: any(e.event == "lingering" for e in ledger.read(ns)), DEADLINE)
    live = status_of(repo, "t")
    assert live["state"] == "live", live
    assert any("sleep" in m["command"] for m in live["members"]), live["members"]
    assert runner.poll() is None
    outer = subprocess.run(
        ["tmux", "-S", str(pane_tmux), "has-session", "-t", "inner"], capture_output=True
    )
    assert outer.returncode != 0  # not handed to the pane's server
    killed = lanewatch("kill", "t", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr
    runner.wait(timeout=DEADLINE)
    assert runner.stderr is not None
    said = runner.stderr.read().decode()
    assert "outside lane t's fence" in said and "server of the lane's own" in said, said
    assert "already running" not in said, said
    socket = ns / "tmp" / f"tmux-{os.getuid()}" / "default"
    assert said.count("Attach from outside the lane") == 1, said
    assert f"tmux -S {socket} attach." in said, said
    assert status_of(repo, "t")["state"] == "released"


def test_the_attach_line_names_only_a_socket_a_server_answers_on(tmp_path: Path) -> None:
    """A socket left by an earlier run's server is named no more (two attach lines,
    one for a socket nobody answered on)."""
    import socket

    from lanewatch.runner.linger import live_sockets

    folder = tmp_path / "tmux"
    folder.mkdir()
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)  # bound by the folder: any tmp_path fits
    try:
        with socket.socket(socket.AF_UNIX) as left:
            left.bind(f"/proc/self/fd/{fd}/old")  # closed at once: nobody answers there
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(f"/proc/self/fd/{fd}/live")
            server.listen()
            assert live_sockets(folder) == [str(folder / "live")]
    finally:
        os.close(fd)
    assert live_sockets(tmp_path / "missing") == []


def test_a_fence_hides_the_real_tmp_but_not_what_it_binds_back(tmp_path: Path) -> None:
    from lanewatch.runner import fence as fences
    from lanewatch.runner.launchers import tmux_in_lane

    kept = "/tmp/kept-entry"
    fence = fences.Fence("kernel", binds=((str(tmp_path), "/tmp"),), kept=(kept,))
    assert fence.hides("/tmp/tmux-1000/default") and not fence.hides(kept + "/sock")
    assert not fence.hides("/usr/bin/tmux")
    assert not fences.Fence("none").hides("/tmp/tmux-1000/default")
    env = {"TMUX": "/tmp/tmux-1000/default,1,0", "TMUX_PANE": "%1", "PATH": "/bin"}
    out, told = tmux_in_lane(["tmux", "new", "-d", "x"], env, "t", fence.hides)
    assert "TMUX" not in out and "TMUX_PANE" not in out and told and "lane's own" in told
    out, told = tmux_in_lane(["tmux", "-L", "t", "new", "-d"], env, "t", fence.hides)
    assert out == env and told is None  # -L: the lane's own server, $TMUX not used
    plain = {"PATH": "/bin"}  # not in tmux: the default socket, in the hidden /tmp
    assert tmux_in_lane(["tmux", "new", "-d"], plain, "t", fence.hides) == (plain, None)
    out, told = tmux_in_lane(["sh", "-c", "tmux new -d"], env, "t", fence.hides)
    assert out == env and told is None


def test_no_warning_for_a_tmux_without_a_running_server(repo: Path, tmp_path: Path) -> None:
    sock = tmp_path / "none.sock"
    result = lanewatch(
        "run", "--lane", "c", "--", "sh", "-c", f"echo tmux -S {sock} new -d", cwd=repo
    )
    assert result.returncode == 0 and "outside lane" not in result.stderr


def test_a_killed_signal_does_not_leak_to_other_lanes(
    spawn: Spawn, repo: Path, tmp_path: Path, subreaper: Subreaper
) -> None:
    """Two headless lanes: killing one leaves the other's processes running."""
    one, pid1, _ = start_double_fork(spawn, repo, tmp_path, "one", "keep")
    two, pid2, go2 = start_double_fork(spawn, repo, tmp_path, "two", "keep")
    subreaper.adopt(pid1)
    subreaper.adopt(pid2)
    for runner in (one, two):
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=DEADLINE)
    assert lanewatch("kill", "one", "--yes", cwd=repo).returncode == 0
    assert status_of(repo, "one")["state"] == "stale"
    other = status_of(repo, "two")
    assert other["state"] == "headless" and member(other, pid2)
    go2.touch()
    wait_for(lambda: status_of(repo, "two")["state"] == "stale", DEADLINE, what="two ends")


WORKTREE_SCRIPT = """
set -e
cd "$1"
for n in 1 2; do
  git worktree add -q "../agent-$n" -b "agent-$n"
  (cd "../agent-$n" && "$PY" -m lanewatch run --lane agent -- sh -c \\
    'echo "$TMPDIR" > "$0"; (while [ ! -e "$1" ]; do sleep 0.05; done) </dev/null >/dev/null &' \\
    "$2/tmpdir-$n" "$2/go") &
done
wait
"""


def test_a_git_worktree_script_gives_each_agent_its_own_lane(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """docs/launchers.md's recipe: one worktree and one background `run` per agent, the same
    lane name in each; every agent has its own namespace and TMPDIR; the script's `wait` ends
    when each agent and what it left running have ended."""
    env = {**os.environ, "PY": sys.executable}  # `lanewatch`, wherever the checkout lies
    script = spawn(
        ["sh", "-c", WORKTREE_SCRIPT, "sh", str(repo), str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def lanes() -> list[dict[str, Any]]:
        result = lanewatch("status", "--json", cwd=repo)
        found = [n for n in json.loads(result.stdout)["namespaces"] if n["lane"] == "agent"]
        return found if len(found) == 2 and all(n["members"] for n in found) else []

    live = wait_for(lanes, DEADLINE, what="two live lanes with members")
    assert {n["state"] for n in live} == {"live"}
    assert len({n["key"] for n in live}) == 2  # one lane name, two checkouts, two namespaces
    tmpdirs = {(tmp_path / f"tmpdir-{n}").read_text().strip() for n in (1, 2)}
    # Fenced (the default where the kernel allows), each lane's /tmp is its own folder.
    assert tmpdirs == {"/tmp" if n["fence"] != "none" else f"{n['key']}/tmp" for n in live}
    (tmp_path / "go").touch()
    assert script.wait(timeout=DEADLINE) == 0, script.stderr
    done = [n for n in json.loads(lanewatch("status", "--json", cwd=repo).stdout)["namespaces"]]
    assert {n["state"] for n in done if n["lane"] == "agent"} == {"released"}


def test_the_linux_layer_makes_a_subreaper_and_signals_one_identity_only() -> None:
    """`linux/reaper.py`: the prctl works (in a child: the flag stays with its process), and a
    signal goes only to the identity given (a wrong start time is refused, nothing sent)."""
    code = "from lanewatch.linux import reaper; print(reaper.set_child_subreaper(), reaper.is_child_subreaper())"  # noqa: E501
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["None", "True"], out.stderr
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        me = reaper.descendants(os.getpid())
        assert sleeper.pid in [st.pid for st in me]
        ticks = start_ticks(sleeper.pid)
        assert ticks is not None
        wrong = ProcessIdentity(sleeper.pid, ticks + 1, boot_id())
        assert reaper.signal_exact(wrong, signal.SIGTERM) is False
        assert sleeper.poll() is None  # untouched
        assert reaper.signal_exact(ProcessIdentity(sleeper.pid, ticks, boot_id()), signal.SIGTERM)
        assert sleeper.wait(timeout=DEADLINE) == -signal.SIGTERM
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
