"""The model: `apply` is pure, events do what they say, takeovers are judged on the evidence the
event carries, views are built from records, and the file history stays bounded."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.lanes.stamp import OwnerState, StampRead, StampStatus
from lanewatch.linux.procid import Liveness
from lanewatch.model import incidents as inc
from lanewatch.model import model as m
from lanewatch.model.classify import LivenessEvidence
from lanewatch.model.detectors.refused_claim import refused_claim
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.views import Changes, LaneMember, NsState, merge_changes
from tests.processes.test_classify import BOOT, HOST, NOW, stamp

KEY, ROOT = "/r/ns", "/r"


def seen(**changes: object) -> m.NamespaceSeen:
    s = stamp(**changes)
    ev = LivenessEvidence(s.pid, s.start_ticks, Liveness.ALIVE, "alive", NOW)
    return m.NamespaceSeen(KEY, ROOT, "ns", StampRead(StampStatus.OK, s), ev)


def view(state: m.ModelState, now: float = NOW) -> m.NamespaceView:  # type: ignore[name-defined]
    return m.view_of(state.namespaces[KEY], state, now, host=HOST, boot_id=BOOT)


def test_apply_is_pure_and_names_what_changed() -> None:
    s0 = m.ModelState()
    s1, d = m.apply(s0, seen())
    assert KEY not in s0.namespaces and KEY in s1.namespaces
    assert d.touched == {KEY}
    s2, d2 = m.apply(s1, [m.Counted(KEY, 3, 30, NOW - 5), m.Wrote(KEY, NOW), m.Wrote(KEY, NOW)])
    assert s1.namespaces[KEY].files is None  # s1 untouched
    v = view(s2)
    assert (v.files, v.bytes, v.last_write) == (3, 30, NOW)
    assert v.write_rate[-1] == 2 and len(v.write_rate) == m.RATE_WINDOW
    assert v.state is NsState.LIVE and d2.touched == {KEY}
    s3, d3 = m.apply(s2, m.NamespaceGone(KEY))
    assert KEY not in s3.namespaces and d3.removed == {KEY}


def test_root_listing_removes_what_is_gone_only_in_that_root() -> None:
    other = m.NamespaceSeen("/q/x", "/q", "x", StampRead(StampStatus.MISSING))
    s, _ = m.apply(m.ModelState(), [seen(), other])
    s, d = m.apply(s, m.RootListed(ROOT, frozenset()))
    assert set(s.namespaces) == {"/q/x"} and d.removed == {KEY}


def test_unchanged_counts_touch_nothing() -> None:
    s, _ = m.apply(m.ModelState(), [seen(), m.Counted(KEY, 1, 1)])
    _, d = m.apply(s, m.Counted(KEY, 1, 1))
    assert not d


def _changed(s: m.ModelState, **kw: object) -> tuple[m.ModelState, m.Delta]:
    new = stamp(pid=200, start_ticks=9, lane="b")
    event = m.StampChanged(KEY, StampRead(StampStatus.OK, new), NOW, **kw)  # type: ignore[arg-type]
    return m.apply(s, event)


def test_takeover_while_the_previous_owner_lives() -> None:
    s, _ = m.apply(m.ModelState(), seen())
    s2, d = _changed(s, previous_alive=Liveness.ALIVE)
    (iid,) = d.incidents
    rec = s2.incidents[iid]
    assert rec.kind == "takeover" and rec.grade == "known" and rec.victim == KEY
    assert view(s2).incident_ids == (iid,)
    assert s2.namespaces[KEY].previous is not None and s2.namespaces[KEY].previous.pid == 100
    # The same observation again (a restart, a second engine) does not count twice.
    s3, _ = _changed(
        replace(s2, namespaces={KEY: s.namespaces[KEY]}), previous_alive=Liveness.ALIVE
    )
    assert s3.incidents[iid].count == 1


def test_no_takeover_after_release_death_or_by_the_same_owner() -> None:
    s, _ = m.apply(m.ModelState(), seen())
    assert not _changed(s, previous_alive=Liveness.DEAD)[1].incidents
    assert not _changed(s, previous_alive=Liveness.ALIVE, previous_released=True)[1].incidents
    released = stamp(state=OwnerState.RELEASED)
    s_rel, _ = m.apply(s, m.StampChanged(KEY, StampRead(StampStatus.OK, released), NOW))
    assert not s_rel.incidents
    assert not _changed(s_rel, previous_alive=Liveness.ALIVE)[1].incidents


def test_remote_takeover_is_inferred_from_a_fresh_heartbeat() -> None:
    remote = seen(host="elsewhere", boot_id="b2")
    s, _ = m.apply(m.ModelState(), remote)
    s2, d = _changed(s)
    (iid,) = d.incidents
    assert s2.incidents[iid].grade == "inferred"


def test_incidents_merge_and_acknowledge() -> None:
    obs = refused_claim(
        KEY, {"event": "claim-refused", "time": NOW, "lane": "a", "by_pid": 7}, "/l"
    )
    assert obs is not None
    s, _ = m.apply(m.ModelState(), [seen(), m.Observed(obs, ROOT), m.Observed(obs, ROOT)])
    rec = s.incidents[obs.id]
    assert rec.count == 1 and not rec.acknowledged
    s, _ = m.apply(s, m.Acknowledged(obs.id, NOW + 1, "me"))
    assert s.incidents[obs.id].to_view().acknowledged
    again = refused_claim(
        KEY, {"event": "claim-refused", "time": NOW + 5, "lane": "a", "by_pid": 7}, "/l"
    )
    assert again is not None and again.id == obs.id
    s, _ = m.apply(s, m.Observed(again, ROOT))
    assert s.incidents[obs.id].count == 2
    assert not s.incidents[obs.id].acknowledged  # something new happened since the ack


def test_loaded_records_merge_with_seen_ones() -> None:
    obs = refused_claim(
        KEY, {"event": "claim-refused", "time": NOW, "lane": "a", "by_pid": 7}, "/l"
    )
    assert obs is not None
    disk = inc.merge(None, obs, ROOT)
    s, _ = m.apply(m.ModelState(), [m.IncidentsLoaded((disk,)), m.Observed(obs, ROOT)])
    assert s.incidents[obs.id].count == 1


def test_time_alone_turns_live_into_hung() -> None:
    s, _ = m.apply(m.ModelState(), seen())
    due = m.next_change(s.namespaces[KEY], NOW)
    assert due is not None and NOW < due < NOW + 15  # when the heartbeat falls overdue
    assert view(s, NOW).state is NsState.LIVE
    assert view(s, NOW + 60).state is NsState.HUNG


def test_merge_changes_keeps_the_newest() -> None:
    s, _ = m.apply(m.ModelState(), seen())
    v = view(s)
    first = Changes(upserts={KEY: v}, full=True, at=1)
    gone = Changes(removed=frozenset({KEY}), at=2)
    merged = merge_changes(first, gone)
    assert merged.full and KEY not in merged.upserts and not merged.removed
    back = merge_changes(gone, Changes(upserts={KEY: v}, at=3))
    assert KEY in back.upserts and not back.removed


def test_file_history_is_bounded() -> None:
    h = FileHistory(max_paths=3, per_path=2)
    for i in range(5):
        h.record(f"/r/ns/f{i}", float(i), i)
    assert len(h) == 3 and not h.history("/r/ns/f0")  # least recently written dropped
    for t in (5.0, 6.0, 7.0):
        h.record("/r/ns/f4", t, int(t))
    assert [r.time for r in h.history("/r/ns/f4")] == [6.0, 7.0]
    h.note_writer("/r/ns/f4", "pid 1 (lane a)")
    assert h.record("/r/ns/f4", 11.0, 1).writer == "pid 1 (lane a)"
    h.forget_under("/r/ns")
    assert len(h) == 0


def test_evidence_seen_while_live_does_not_outlive_the_release() -> None:
    # The last probe before the release saw CMD running; the prober judges live owners only,
    # so kept evidence (or a report made before the release landing after it) was never
    # corrected: the released lane stayed "headless, 1 process still runs" for ever.
    member = LaneMember(101, 6, "sleep 2", NOW - 2, "descendant")
    s = stamp()
    probed = m.Probed(
        {KEY: LivenessEvidence(100, 5, Liveness.ALIVE, "alive", NOW, members=(member,))}
    )
    live, _ = m.apply(m.ModelState(), [seen(), probed])
    released = StampRead(StampStatus.OK, replace(s, state=OwnerState.RELEASED, exit_code=0))
    after, _ = m.apply(live, m.StampChanged(KEY, released, NOW))
    assert view(after).state is NsState.RELEASED, view(after).reason
    late, _ = m.apply(after, probed)
    assert view(late).state is NsState.RELEASED, view(late).reason
    rescanned, _ = m.apply(late, m.NamespaceSeen(KEY, ROOT, "ns", released))
    assert view(rescanned).state is NsState.RELEASED, view(rescanned).reason
