"""The reaper (actions/reap.py, `lanewatch reap`, `record --reap`) against real lanes: it clears
released and stale namespaces past the age and never a live, hung or headless one beside them,
purges the trash past its retention, and under a budget clears the oldest stale first. Ages
are counted on a clock the test passes (or on stamp times it sets), never waited out."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from lanewatch.actions import reap
from lanewatch.actions.assess import assess
from lanewatch.actions.clear import clear
from lanewatch.actions.fsops import tree_size
from lanewatch.actions.targets import Target
from lanewatch.actions.trashbox import PAYLOAD, list_trash, trash_dir
from lanewatch.lanes.stamp import OwnerState, read_stamp
from lanewatch.model.views import NsState
from lanewatch.records import reaping
from lanewatch.records.reaping import ReapPolicy
from tests.conftest import LANEWATCH, wait_for
from tests.kits import actionkit
from tests.kits.actionkit import DEADLINE, Procs, make_stamp, released_namespace
from tests.kits.contractkit import valid

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

lw = actionkit.lw
scratch = actionkit.scratch
AGE = 10.0  # the policy's age in every test: counted on a clock, never slept


def later(seconds: float = 60.0) -> float:
    return time.time() + seconds


def run_lane(repo: Path, root: Path, lane: str, cmd: tuple[str, ...] = ("true",)) -> Path:
    """A real `lanewatch run` to its end: a released namespace."""
    args = [*LANEWATCH, "run", "--root", str(root), "--lane", lane, "--", *cmd]
    done = subprocess.run(args, cwd=repo, stdin=subprocess.DEVNULL, capture_output=True)
    assert done.returncode == 0, done.stderr
    ns = next(p for p in root.iterdir() if p.name.endswith(f".{lane}"))
    assert read_stamp(ns).stamp is not None
    return ns


def stale_lane(lw: Procs, repo: Path, root: Path, lane: str) -> Path:
    """A real lane whose runner and command were SIGKILLed: owner dead, stamp left (stale)."""
    live = lw.lane(repo, root, lane)
    stamp = live.stamp
    os.killpg(stamp.pgid, signal.SIGKILL)
    os.kill(live.proc.pid, signal.SIGKILL)
    live.proc.wait(timeout=DEADLINE)
    wait_for(lambda: assess(_target(live.namespace)).state == NsState.STALE, DEADLINE)
    return live.namespace


def _target(ns: Path) -> Target:
    return Target(ns.parent, ns.name)


def outcomes(done: reap.Pass) -> dict[str, str]:
    return {d.step.label: d.outcome for d in done.done}


def _ledger_lines(ns: Path) -> list[dict[str, Any]]:
    path = ns / ".lanewatch" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- clears by age --------------------------------------------------------------------------


def test_clears_a_released_and_a_stale_lane_never_the_live_one_beside_them(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    released = run_lane(repo, scratch, "done")
    stale = stale_lane(lw, repo, scratch, "crashed")
    live = lw.lane(repo, scratch, "working")
    policy = ReapPolicy(age=AGE)

    # A clock 10 s back: nothing has been idle 10 s yet (the real one would depend on how long
    # the lanes took to start under load).
    young = reap.run([scratch], policy, now=time.time() - AGE)
    assert young.done == (), young

    done = reap.run([scratch], policy, now=later())
    got = outcomes(done)
    assert got == {"lane 'done' (" + released.name + ")": "cleared",
                   "lane 'crashed' (" + stale.name + ")": "cleared"}, got  # fmt: skip
    assert not released.exists() and not stale.exists()
    assert live.namespace.is_dir() and live.proc.poll() is None
    entries = {e.lane: e for e in list_trash(scratch)}
    assert set(entries) == {"done", "crashed"}
    for e in entries.values():  # the namespace's own ledger says who cleared it and why
        lines = _ledger_lines(Path(e.path) / PAYLOAD)
        cleared = [x for x in lines if x.get("event") == "cleared"]
        assert cleared and "idle" in cleared[-1]["reaper"], lines
    journal = (trash_dir(scratch).parent / "trash.jsonl").read_text()
    assert journal.count('"reaper"') >= 2


def test_clears_an_orphan_past_the_age(scratch: Path) -> None:
    """A folder with no stamp (a lane that died before writing one, a tool's leftover)."""
    orphan = scratch / "leftover"
    orphan.mkdir(mode=0o700)
    (orphan / "junk.bin").write_bytes(b"x" * 10_000)
    t = time.time() - 120
    os.utime(orphan, (t, t))
    assert reap.run([scratch], ReapPolicy(age=300.0)).done == ()  # 2 min idle < 5 min
    done = reap.run([scratch], ReapPolicy(age=AGE))
    assert [(d.step.label, d.outcome) for d in done.done] == [("leftover", "cleared")], done
    assert "orphan, idle 2m" in done.done[0].step.why and not orphan.exists()


def test_never_a_hung_or_headless_lane_whatever_their_age(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    hung = lw.lane(repo, scratch, "stopped")
    os.kill(hung.proc.pid, signal.SIGSTOP)  # the runner stops beating: hung, not dead
    headless = lw.lane(repo, scratch, "runnerless")
    os.kill(headless.proc.pid, signal.SIGKILL)  # its command runs on, alone
    headless.proc.wait(timeout=DEADLINE)
    try:
        far = later(3600 * 24)
        wait_for(lambda: assess(_target(hung.namespace)).state == NsState.HUNG, DEADLINE)
        for _ in range(2):
            done = reap.run([scratch], ReapPolicy(age=AGE, budget=0), now=far)
            assert done.done == (), done
        assert hung.namespace.is_dir() and headless.namespace.is_dir()
    finally:
        os.kill(hung.proc.pid, signal.SIGCONT)


def test_a_clear_is_checked_again_when_it_acts(lw: Procs, repo: Path, scratch: Path) -> None:
    """Planned while dead, held by a process when the pass acts: refused, nothing moved."""
    ns = run_lane(repo, scratch, "held")
    steps, _ = reap.plan([scratch], ReapPolicy(age=AGE), now=later())
    assert [s.label for s in steps] == [f"lane 'held' ({ns.name})"]
    holder = lw.holder("cwd", ns)
    done = reap.run([scratch], ReapPolicy(age=AGE), now=later())
    assert outcomes(done) == {f"lane 'held' ({ns.name})": "refused"}, done
    assert "pid" in done.done[0].message and str(holder.pid) in done.done[0].message
    assert ns.is_dir()


def test_a_refusal_that_stands_is_written_once_while_its_reason_stands(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    """The pass comes back every few minutes: a namespace a process keeps holding gets one
    `clear-refused` line from the reaper while the reason stands, not one a pass. A person's
    refused clear is written each time, and another holder is another reason."""
    ns = run_lane(repo, scratch, "held")
    first = lw.holder("cwd", ns)
    label = f"lane 'held' ({ns.name})"
    for _ in range(3):
        assert outcomes(reap.run([scratch], ReapPolicy(age=AGE), now=later())) == {label: "refused"}

    def refusals() -> list[dict[str, Any]]:
        return [line for line in _ledger_lines(ns) if line["event"] == "clear-refused"]

    assert len(refusals()) == 1, refusals()
    assert "reaper" in refusals()[0] and str(first.pid) in refusals()[0]["reason"]
    assert clear(str(ns), check=False).outcome == "refused"  # a person's: always written
    assert len(refusals()) == 2 and "reaper" not in refusals()[1]
    first.kill()
    first.wait(timeout=DEADLINE)
    second = lw.holder("cwd", ns)
    reap.run([scratch], ReapPolicy(age=AGE), now=later())
    reap.run([scratch], ReapPolicy(age=AGE), now=later())
    assert len(refusals()) == 3, refusals()
    assert str(second.pid) in refusals()[2]["reason"] and "reaper" in refusals()[2]
    assert ns.is_dir()


# --- purge ------------------------------------------------------------------------------------


def test_purges_the_trash_past_its_retention_only(scratch: Path) -> None:
    ns = released_namespace(scratch, "old")
    tid = clear(ns).trash_id
    assert tid is not None
    policy = ReapPolicy(trash_retention=AGE)
    assert reap.run([scratch], policy, now=later(AGE / 2)).done == ()
    assert (trash_dir(scratch) / tid).is_dir()
    done = reap.run([scratch], policy, now=later(AGE * 2))
    assert [(d.step.trash_id, d.outcome) for d in done.done] == [(tid, "purged")]
    assert done.summary().purged_bytes > 0
    assert not (trash_dir(scratch) / tid).exists()
    journal = (trash_dir(scratch).parent / "trash.jsonl").read_text().splitlines()
    purged = [json.loads(x) for x in journal if '"purged"' in x]
    assert purged and "reaper" in purged[-1]


# --- the budget -------------------------------------------------------------------------------


def _aged(ns: Path, ago: float) -> Path:
    """Stamp times and folder mtime set `ago` seconds back: its idle time, set by the test."""
    s = read_stamp(ns).stamp
    assert s is not None
    t = time.time() - ago
    make_stamp(ns.parent, s.lane, state=OwnerState.RELEASED, started_at=t, heartbeat_at=t,
               released_at=t, exit_code=0)  # fmt: skip
    os.utime(ns, (t, t))
    return ns


def test_budget_clears_the_oldest_stale_first_and_stops_when_it_fits(
    lw: Procs, repo: Path, scratch: Path
) -> None:
    oldest = _aged(released_namespace(scratch, "oldest", files=40), 300)
    middle = _aged(released_namespace(scratch, "middle", files=40), 200)
    newest = _aged(released_namespace(scratch, "newest", files=40), 100)
    live = lw.lane(repo, scratch, "busy")
    for i in range(40):  # the live lane holds its share of the disk, and is never cleared
        (live.namespace / f"big{i}.txt").write_text("x" * 5000)
    sizes = {p.name: tree_size(p)[2] for p in (oldest, middle, newest, live.namespace)}
    total = sum(sizes.values())
    # Room for everything but one stale namespace and a bit: the oldest goes, and only it.
    budget = total - sizes[oldest.name] + 1
    done = reap.run([scratch], ReapPolicy(budget=budget))
    assert outcomes(done) == {f"lane 'oldest' ({oldest.name})": "cleared"}, done
    assert "budget" in done.done[0].step.why
    assert middle.is_dir() and newest.is_dir() and live.namespace.is_dir()
    # A budget below what the live lane holds alone: every stale one goes, oldest first, the
    # live lane stays.
    done = reap.run([scratch], ReapPolicy(budget=1))
    assert [d.step.label for d in done.done] == [
        f"lane 'middle' ({middle.name})",
        f"lane 'newest' ({newest.name})",
    ]
    assert live.namespace.is_dir() and live.proc.poll() is None


# --- the CLI and the service ------------------------------------------------------------------


def cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LANEWATCH, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, **kw)  # fmt: skip


def test_reap_dry_run_shows_the_next_pass_and_changes_nothing(
    lw: Procs, repo: Path, scratch: Path, isolated_state: Path
) -> None:
    old = _aged(released_namespace(scratch, "idle"), 120)
    live = lw.lane(repo, scratch, "live")
    isolated_state.mkdir(exist_ok=True)
    (isolated_state / "reap.toml").write_text('[reap]\nage = "10s"\n')
    done = cli("reap", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["schema"] == "lanewatch.reap/1" and out["dry_run"] is True
    assert [(s["label"], s["outcome"]) for s in out["steps"]] == [
        (f"lane 'idle' ({old.name})", "would-clear")
    ]
    assert old.is_dir() and live.namespace.is_dir()
    assert not (isolated_state / "reap.json").exists()
    text = cli("reap", "--dry-run")
    assert "would clear lane 'idle'" in text.stdout and "clear after 10s idle" in text.stdout
    # Without a terminal and without --yes, nobody confirms: nothing moves (exit 7).
    assert cli("reap").returncode == 7 and old.is_dir()
    acted = cli("reap", "--yes", "--json")
    assert acted.returncode == 0, acted.stderr
    assert not old.exists() and live.namespace.is_dir()
    state = reaping.read_state(isolated_state / "reap.json")
    assert state is not None and state.last is not None and state.last.cleared == 1


def test_a_bad_policy_file_is_a_usage_error(isolated_state: Path) -> None:
    isolated_state.mkdir(exist_ok=True)
    (isolated_state / "reap.toml").write_text('[reap]\nage = "soon"\n')
    done = cli("reap", "--dry-run")
    assert done.returncode == 2 and "age" in done.stderr and "soon" in done.stderr
    (isolated_state / "reap.toml").write_text("[reap]\nbudgte = 1\n")
    done = cli("reap", "--dry-run")
    assert done.returncode == 2 and "budgte" in done.stderr


def test_the_policy_file_round_trips(tmp_path: Path) -> None:
    policy = ReapPolicy(age=172800.0, trash_retention=3600.0, budget=20 * 10**9, every=90.0)
    path = reaping.save(policy, tmp_path / "reap.toml")
    assert reaping.load(path) == policy
    assert reaping.parse_size("20G") == reaping.parse_size("20GB") == 20 * 10**9
    assert reaping.parse_size("20GiB") == 20 * 2**30 and reaping.parse_size("1.5k") == 1500
    assert reaping.parse_size("4096") == 4096
    for bad in ("x", "-1G", "1Q", "1i", "1iB"):
        with pytest.raises(ValueError):
            reaping.parse_size(bad)


def test_the_service_reaps_by_its_policy_beside_a_live_lane(
    lw: Procs, repo: Path, scratch: Path, isolated_state: Path
) -> None:
    """`record --reap`: the first pass at once, age 10 s from reap.toml, stamp times set 2
    minutes back; the live lane beside it stays; reap.json says what the pass did and when the
    next one is."""
    old = _aged(released_namespace(scratch, "yesterday"), 120)
    live = lw.lane(repo, scratch, "today")
    isolated_state.mkdir(exist_ok=True)
    (isolated_state / "reap.toml").write_text('[reap]\nage = "10s"\nevery = "1h"\n')
    prom = scratch.parent / "lanewatch.prom"
    args = ["record", "--root", str(scratch), "--json", "--reap", "--metrics-textfile", str(prom)]
    rec = lw.start([*LANEWATCH, *args], stdout=subprocess.PIPE, text=True)
    assert rec.stdout is not None
    line: dict[str, Any] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        raw = rec.stdout.readline()
        assert raw, f"the recorder ended: {rec.poll()}"
        line = json.loads(raw)
        if line["type"] == "reap":
            break
    assert line.get("type") == "reap" and line["cleared"] == 1, line
    valid("record", line)  # the shipped schema of every `record --json` line
    assert not old.exists() and live.namespace.is_dir() and live.proc.poll() is None
    state = reaping.read_state(isolated_state / "reap.json")
    assert state is not None and state.last is not None and state.last.cleared == 1
    assert state.next_at is not None and state.next_at > time.time() + 3000
    text = reaping.next_text(state)
    assert text is not None and "cleared 1" in text and "next in" in text
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=DEADLINE)
    metrics = prom.read_text()  # written once more as the recorder stops
    assert "lanewatch_reaped_namespaces_total 1.0" in metrics, metrics
    assert 'lanewatch_reaped_bytes_total{how="cleared"}' in metrics
    assert "lanewatch_reaper_next_pass_timestamp_seconds" in metrics


def test_record_refuses_reap_for_the_system_service() -> None:
    done = cli("record", "--service", "--system", "--reap")
    assert done.returncode == 2, done.stderr
    assert "--reap" in done.stderr or os.geteuid() != 0, done.stderr
