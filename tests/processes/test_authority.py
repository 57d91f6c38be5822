"""Authority comes from ownership: a stamp is a file anyone can write in a folder of
their own, naming any pid with its start ticks (world-readable in /proc). Kill and clear act
only when the stamp file and the namespace folder belong to the uid the stamp names and that
uid runs the processes it names; a stamp whose claims are false is flagged, never live.

The attack tests run as root (they chown to nobody, uid 65534): the stamp is nobody's, the
process group it names is root's, started here. Every kill aimed at it is expected to be
refused; the group is checked to be alive afterwards and killed by the kit at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.actions.clear import clear
from lanewatch.actions.kill import kill
from lanewatch.engine.engine import Engine
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.model.views import NamespaceView, NsState
from lanewatch.tui.backend.actions_adapter import ActionsAdapter, can_kill, describe_kill
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import DEADLINE, NOBODY, Procs, alive, as_user, make_stamp

lw = actionkit.lw  # the kit's fixtures, found by pytest under these names
scratch = actionkit.scratch


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the stamp and folder are chowned to another user")


def chown_namespace(ns: Path, uid: int) -> None:
    """The namespace folder, its `.lanewatch/` and the stamp file, owned by `uid`."""
    for path in (ns, ns / META_DIR, ns / META_DIR / STAMP_FILE):
        os.chown(path, uid, uid, follow_symlinks=False)


def names_group(root: Path, lane: str, leader: int, **extra: object) -> Path:
    """A stamp naming `leader` as the owner and as the leader of the lane's command group."""
    ticks = ProcessIdentity.of(leader).start_ticks
    return make_stamp(
        root, lane, pid=leader, start_ticks=ticks, child_pid=leader, child_start_ticks=ticks,
        pgid=leader, **extra,
    )  # fmt: skip


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def view_of(root: Path, ns: Path) -> NamespaceView:
    """The row the dashboard shows for `ns`, from the real engine's first picture."""
    return Engine([str(root)]).snapshot().upserts[str(ns)]


def uid_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("Uid:"))
    except (OSError, StopIteration):
        return None


@pytest.fixture
def roots_group(lw: Procs) -> Iterator[subprocess.Popen[bytes]]:
    """A root-owned process group started by the test (its leader is `sleep`)."""
    needs_root()
    leader = lw.start(["sleep", "600"], process_group=None, start_new_session=True)
    wait_for(
        lambda: os.readlink(f"/proc/{leader.pid}/exe").endswith("sleep"),
        DEADLINE,
        what="sleep to exec",
    )
    yield leader


@pytest.fixture
def nobodys_group(lw: Procs) -> subprocess.Popen[bytes]:
    """A process group of nobody's (its leader is `sleep`), started here as root."""
    theirs = lw.start([*as_user(NOBODY), "sleep", "600"])
    wait_for(lambda: uid_of(theirs.pid) == NOBODY and os.readlink(f"/proc/{theirs.pid}/exe")
          .endswith("sleep"), DEADLINE, what="setpriv to exec sleep as nobody")  # fmt: skip
    return theirs


def nobodys_lane(root: Path, theirs: subprocess.Popen[bytes]) -> Path:
    """nobody's stamp, in nobody's folder, naming nobody's process group: their own lane."""
    ns = names_group(root, "theirs", theirs.pid, uid=NOBODY, user="nobody")
    chown_namespace(ns, NOBODY)
    return ns


# --- the attack: nobody's stamp naming root's process group ----------------------------------

# What the stamp says its uid is: nobody's own (the process is root's), or root's (the file is
# nobody's). Either way one claim is false, and the message says which.
CLAIMS = {
    "names-its-owner": (NOBODY, "runs as uid 0, not 65534"),
    "names-root": (0, "the stamp file is owned by uid 65534, the stamp names uid 0"),
}


@pytest.mark.privileged
@pytest.mark.parametrize("claim", sorted(CLAIMS))
@pytest.mark.parametrize("flag", [[], ["--allow-other-user"]], ids=["plain", "allow-other-user"])
def test_root_cli_refuses_a_group_named_by_another_users_stamp(
    roots_group: subprocess.Popen[bytes], scratch: Path, claim: str, flag: list[str]
) -> None:
    uid, why = CLAIMS[claim]
    ns = names_group(scratch, "planted", roots_group.pid, uid=uid)
    chown_namespace(ns, NOBODY)
    done = run_cli("kill", "--yes", "--signal", "kill", *flag, "planted")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "claims do not match" in done.stderr and why in done.stderr, done.stderr
    assert roots_group.poll() is None and alive(roots_group.pid)


@pytest.mark.privileged
@pytest.mark.parametrize("claim", sorted(CLAIMS))
def test_dashboard_refuses_a_group_named_by_another_users_stamp(
    roots_group: subprocess.Popen[bytes], scratch: Path, claim: str
) -> None:
    uid, why = CLAIMS[claim]
    ns = names_group(scratch, "planted", roots_group.pid, uid=uid)
    chown_namespace(ns, NOBODY)
    row = view_of(scratch, ns)
    assert row.state is NsState.UNKNOWN and row.mismatch and why in row.mismatch
    assert row.reason.startswith("claims do not match: ")
    assert not can_kill(row)
    adapter = ActionsAdapter(engine=None)
    # Even a row that (wrongly) shows it live, as the dashboard did before, is refused: the
    # actions module judges again, and root's consent to another user's lane does not help.
    for shown in (row, replace(row, state=NsState.LIVE, mismatch=None)):
        outcome = adapter.kill(shown)
        assert not outcome.ok and why in outcome.message, outcome.message
    forced = kill(row, sig=signal.SIGKILL, allow_other_user=True, check=False)
    assert forced.outcome == "refused" and forced.sends == (), forced.message
    assert roots_group.poll() is None and alive(roots_group.pid)


@pytest.mark.privileged
def test_status_json_flags_the_planted_stamp(
    roots_group: subprocess.Popen[bytes], scratch: Path
) -> None:
    ns = names_group(scratch, "planted", roots_group.pid, uid=0)
    chown_namespace(ns, NOBODY)
    out = run_cli("status", "--root", str(scratch), "--json")
    (seen,) = [n for n in json.loads(out.stdout)["namespaces"] if n["key"] == str(ns)]
    assert seen["state"] == "unknown" and seen["uid"] == 0
    assert "the namespace folder is owned by uid 65534" in seen["mismatch"]
    assert "the stamp file is owned by uid 65534" in seen["reason"]


@pytest.mark.privileged
def test_clear_refuses_a_stamp_whose_file_is_someone_elses(lw: Procs, scratch: Path) -> None:
    """A dead owner, but the stamp naming root lies in nobody's folder: not cleared."""
    needs_root()
    dead = lw.start(["true"])
    dead.wait()
    ns = make_stamp(scratch, "dead", pid=dead.pid, start_ticks=1, uid=0)
    chown_namespace(ns, NOBODY)
    result = clear("dead", check=False)
    assert result.outcome == "refused" and "claims do not match" in result.message
    assert "the stamp file is owned by uid 65534" in result.message
    assert ns.is_dir()


# --- claims that are false in status, whoever runs it -----------------------------------------


@pytest.mark.unprivileged
def test_a_stamp_naming_pid_1_is_flagged(scratch: Path) -> None:
    ns = make_stamp(scratch, "init", pid=1, start_ticks=ProcessIdentity.of(1).start_ticks)
    out = run_cli("status", "--root", str(scratch), "--json")
    (seen,) = json.loads(out.stdout)["namespaces"]
    assert seen["key"] == str(ns)
    assert seen["state"] == "unknown" and "pid 1 (init)" in seen["mismatch"], seen
    assert seen["reason"] == f"claims do not match: {seen['mismatch']}"
    refused = kill("init", sig=0, check=False)
    assert refused.outcome == "refused" and "pid 1 (init)" in refused.message
    assert refused.sends == ()


@pytest.fixture
def someone_elses(request: pytest.FixtureRequest) -> int:
    """A running process of another uid: nobody's, started here as root; as a normal user,
    any process of another user that runs here (the CI tier runs root's and others')."""
    if os.geteuid() == 0:
        return int(request.getfixturevalue("nobodys_group").pid)
    mine = os.getuid()
    for entry in sorted(os.listdir("/proc")):
        if entry.isdigit() and int(entry) > 1 and uid_of(int(entry)) not in (None, mine):
            return int(entry)
    pytest.skip("no process of another user runs here")


@pytest.mark.unprivileged
def test_a_stamp_whose_uid_is_not_its_process_is_flagged(scratch: Path, someone_elses: int) -> None:
    theirs = uid_of(someone_elses)
    ns = make_stamp(
        scratch, "borrowed", pid=someone_elses,
        start_ticks=ProcessIdentity.of(someone_elses).start_ticks,
    )  # fmt: skip
    row = view_of(scratch, ns)
    assert row.state is NsState.UNKNOWN and row.grade == "known"
    assert f"runs as uid {theirs}, not {os.getuid()}" in (row.mismatch or "")
    assert not can_kill(row)
    refused = kill("borrowed", sig=0, allow_other_user=True, check=False)
    assert refused.outcome == "refused" and "claims do not match" in refused.message


# --- the positive paths ----------------------------------------------------------------------


@pytest.mark.unprivileged
def test_ones_own_lane_is_still_killable(lw: Procs, repo: Path, scratch: Path) -> None:
    lane = lw.lane(repo, scratch, "mine")
    row = view_of(scratch, lane.namespace)
    assert row.state is NsState.LIVE and row.mismatch is None and row.uid == os.getuid()
    assert can_kill(row) and "not yours" not in describe_kill(row)
    done = run_cli("kill", "--yes", "mine")
    assert done.returncode == 0, done.stderr
    assert lane.proc.wait(timeout=DEADLINE) is not None


@pytest.mark.privileged
def test_root_kills_another_users_consistent_lane_only_when_asked(
    nobodys_group: subprocess.Popen[bytes], scratch: Path
) -> None:
    theirs = nobodys_group
    ns = nobodys_lane(scratch, theirs)
    plain = run_cli("kill", "--yes", "--signal", "kill", "theirs")
    assert plain.returncode == 3 and "uid 65534" in plain.stderr
    assert "--allow-other-user" in plain.stderr and theirs.poll() is None
    unasked = run_cli("kill", "--signal", "kill", "--allow-other-user", "theirs")
    assert unasked.returncode == 7 and "pass --yes" in unasked.stderr  # needs confirmation
    assert "ANOTHER USER'S LANE" in unasked.stdout and "uid 65534" in unasked.stdout
    assert theirs.poll() is None
    row = view_of(scratch, ns)
    assert row.state is NsState.LIVE and row.uid == NOBODY and can_kill(row)
    assert "lane of " in describe_kill(row) and "(uid 65534), not yours" in describe_kill(row)
    done = run_cli("kill", "--yes", "--signal", "kill", "--allow-other-user", "theirs")
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stdout and "uid 65534" in done.stdout
    assert theirs.wait(timeout=DEADLINE) == -signal.SIGKILL


@pytest.mark.privileged
def test_dashboard_kills_another_users_lane_it_named(
    nobodys_group: subprocess.Popen[bytes], scratch: Path
) -> None:
    theirs = nobodys_group
    row = view_of(scratch, nobodys_lane(scratch, theirs))
    # The confirmation named the row's uid; a stamp naming anyone else by then gets no signal.
    outcome = ActionsAdapter(engine=None).kill(replace(row, uid=NOBODY - 1))
    assert not outcome.ok and "uid changed since it was shown" in outcome.message
    assert theirs.poll() is None
    outcome = ActionsAdapter(engine=None).kill(row)
    assert outcome.ok, outcome.message
    assert "uid 65534" in outcome.message
    assert theirs.wait(timeout=DEADLINE) == -signal.SIGTERM
