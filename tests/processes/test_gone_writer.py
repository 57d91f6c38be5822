"""An incident names the lane's process that holds the file, never a passing child, and shows
a writer that is gone as gone, since when (after the intruding lane was killed, the
row named its `sleep 2` child, long exited, for minutes). Real lanes and a real engine; as root
(kernel attribution beside the prober) and as a normal user."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lanewatch.model.views import Incident
from lanewatch.records.incident_log import read_all
from lanewatch.records.report import who
from lanewatch.tui.widgets.view_columns import intruder_label
from tests.conftest import wait_for
from tests.kits.enginekit import Recorder, running, start_lane, stop_lane

pytestmark = pytest.mark.unprivileged

# Lane B's command: opens the file in A's namespace once, for appending, and keeps it while it
# starts one short `sleep` after another, each inheriting the descriptor.
HOLDS = 'exec 3>>"$1"; while :; do sleep 1; done'


def cross_lane(rec: Recorder) -> Incident | None:
    with rec.lock:
        found = [i for i in rec.picture.incidents.values() if i.kind == "cross-lane-write"]
    return found[0] if found else None


def test_the_holder_is_named_not_its_children_and_once_gone_it_says_so(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    with running([root], probe_interval=0.3) as (_, rec):
        a = start_lane(procs, repo, root, "A")
        target = a.namespace / "tmp" / "shared.log"
        b = start_lane(procs, repo, root, "B", ("sh", "-c", HOLDS, "sh", str(target)))
        shell = b.stamp.child_pid
        first = wait_for(lambda: cross_lane(rec), 20)
        # Probe after probe, each seeing the shell and a new `sleep` holding the file: the
        # shell is named, every time.
        seen, last = set(), first
        for _ in range(4):
            last = wait_for(
                lambda t=last.last_seen: (i := cross_lane(rec)) and i.last_seen > t and i, 10
            )
            seen.add(last.intruder.get("pid"))
        assert seen == {shell}, f"named {seen}, the lane's shell is {shell}"
        stop_lane(b)

        def all_gone() -> Incident | None:
            i = cross_lane(rec)
            if i is None or "gone_at" not in i.intruder:
                return None
            return i if all("gone_at" in w for w in i.writers if w.get("lane") == "B") else None

        gone = wait_for(all_gone, 20)
        # On disk too (`lanewatch incidents` reads it there).
        on_disk = lambda: read_all([str(root)]).get(gone.id)  # noqa: E731
        wait_for(lambda: (r := on_disk()) is not None and "gone_at" in r.intruder, 10)
    assert gone.intruder["pid"] == shell
    assert gone.intruder["gone_at"] >= gone.first_seen
    assert "gone" in intruder_label(dict(gone.intruder))
    assert "gone since" in who(dict(gone.intruder))
    (writer,) = [w for w in gone.writers if w.get("lane") == "B"]
    assert "gone_at" in writer


def test_gone_holds_until_a_sighting_after_it() -> None:
    from lanewatch.model import incidents as inc
    from lanewatch.model.detectors.foreign_writer import foreign_write
    from tests.processes.test_attribution_parts import kw

    obs = foreign_write(kw("/r/ns.A/tmp/x", pid=50), "/r/ns.A", victim_owner=False)
    assert obs is not None
    rec = inc.merge(None, obs, "/r")
    assert inc.gone_pids(rec) == {(50, 7)}
    gone = inc.writers_gone(rec, {(50, 7)}, 10.0)
    assert gone.intruder["gone_at"] == 10.0 and gone.writers[0]["gone_at"] == 10.0
    assert inc.gone_pids(gone) == set()  # marked: not looked at again
    assert inc.writers_gone(gone, {(50, 7)}, 20.0) == gone  # since the first time it was seen
    # Another process of the same lane while the first named lives: the first stays named.
    child = foreign_write(kw("/r/ns.A/tmp/z", pid=55, time=5.0), "/r/ns.A", victim_owner=False)
    assert child is not None
    assert inc.merge(rec, child, "/r").intruder["pid"] == 50
    # The lane writes again, from a new process, after the first was gone: that one is named.
    later = foreign_write(kw("/r/ns.A/tmp/y", pid=60, time=30.0), "/r/ns.A", victim_owner=False)
    assert later is not None
    again = inc.merge(gone, later, "/r")
    assert "gone_at" not in again.intruder and "gone_at" not in again.writers[0]
    assert again.intruder["pid"] == 60
