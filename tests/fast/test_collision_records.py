"""One collision per shared file (or per victim lane), naming every writer; acknowledgement
covering the evidence seen up to then; automatic resolution; old kind names read.
Pure: records and observations only (the end-to-end tests are in test_collisions.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

from lanewatch.cli.lanes.status_cmd import incident_json
from lanewatch.model.detectors import port_clash
from lanewatch.model.detectors.foreign_writer import foreign_write
from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.incidents import (
    QUIET_FOR,
    RESOLVER,
    IncidentRecord,
    merge,
    merge_records,
    record_from_json,
    resolve_quiet,
)
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.kinds import kind_of, severity_of
from lanewatch.model.observation import Observation
from lanewatch.model.ports import PortMemory
from tests.kits.attributionkit import kw, listener


def shared(*writes: KernelWrite) -> IncidentRecord:
    rec = None
    for w in writes:
        obs = unbound_write(w, ["/r"])
        assert obs is not None
        rec = merge(rec, obs, "/r")
    assert rec is not None
    return rec


def test_two_lanes_writing_one_shared_file_are_one_incident_naming_both() -> None:
    one = shared(kw("/tmp/receipt.json", "agent-1", 1.0))
    assert one.summary == "agent-1 writes /tmp/receipt.json outside its lane"
    both = shared(
        kw("/tmp/receipt.json", "agent-1", 1.0), kw("/tmp/receipt.json", "agent-2", 2.0, pid=50)
    )
    assert both.id == one.id and both.path == "/tmp/receipt.json"
    assert both.summary == "agent-1 and agent-2 both write /tmp/receipt.json"
    assert [w["lane"] for w in both.writers] == ["agent-1", "agent-2"]
    assert [w["pid"] for w in both.writers] == [42, 50]
    other = shared(kw("/tmp/other.json", "agent-1", 1.0))
    assert other.id != one.id  # another file, another collision
    # The kind reads plainly; its severity and label are the registry's.
    assert both.kind == "shared-file" and kind_of(both.kind) is not None
    out = incident_json(both.to_view())
    assert [w["lane"] for w in out["writers"]] == ["agent-1", "agent-2"]
    assert out["path"] == "/tmp/receipt.json" and out["acknowledged"] is False


def test_two_copies_of_one_incident_keep_the_newer_intruders_gone_time_not_the_olders() -> None:
    """The log holds an incident whose intruder (agent-1) was seen gone; a later copy names
    agent-2, still running. Merged either way: agent-2, not gone (agent-1's `gone_at` is not
    agent-2's); one process in both copies keeps its gone time."""
    old = shared(kw("/tmp/receipt.json", "agent-1", 1.0))
    old = replace(old, intruder=MappingProxyType({**old.intruder, "gone_at": 1.5}))
    obs = unbound_write(kw("/tmp/receipt.json", "agent-2", 2.0, pid=50), ["/r"])
    assert obs is not None
    new = merge(old, obs)
    assert new.intruder["pid"] == 50 and "gone_at" not in new.intruder
    for merged in (merge_records(old, new), merge_records(new, old)):
        assert merged.intruder["pid"] == 50 and "gone_at" not in merged.intruder, merged.intruder
    gone_later = replace(new, intruder=MappingProxyType({**new.intruder, "gone_at": 3.0}))
    for merged in (merge_records(new, gone_later), merge_records(gone_later, new)):
        assert merged.intruder["gone_at"] == 3.0


def test_a_reopened_port_clash_names_its_own_two_lanes_or_every_lane_if_one_is_new() -> None:
    """A port title needs two lanes: a clash after the acknowledgement names its own two; one
    new lane beside a remembered one (seen before the acknowledgement) names every lane."""
    memory = PortMemory()

    def listen(lane: str, pid: int, at: float) -> list[Observation]:
        return port_clash.shared(listener(lane, 8000, pid), [], memory, (32768, 60999), at)

    rec = None
    for obs in (*listen("agent-3", 3, 1.0), *listen("agent-4", 4, 2.0)):
        rec = merge(rec, obs)
    assert rec is not None and rec.summary == "agent-3 and agent-4 both listen on :8000"
    rec = replace(rec, ack_at=3.0)
    memory = PortMemory()  # their runs over: forgotten (test_port_incidents has the rule)
    for obs in (*listen("agent-7", 7, 5.0), *listen("agent-8", 8, 6.0)):
        rec = merge(rec, obs)
    assert rec.summary == "agent-7 and agent-8 both listen on :8000", rec.summary
    assert len(rec.writers) == 4
    one_new = replace(rec, ack_at=6.5)  # agent-9 alone seen since: no title of its own
    obs = listen("agent-9", 9, 7.0)
    assert merge(one_new, obs[-1]).summary == (
        "agent-3, agent-4, agent-7 and 2 more all listen on :8000"
    )
    # A shared file keeps every writer in its title: the file stays for the next lane to read.
    file = replace(shared(kw("/tmp/r.json", "a-1", 1.0), kw("/tmp/r.json", "a-2", 2.0)), ack_at=3)
    third = unbound_write(kw("/tmp/r.json", "a-3", 5.0, pid=60), ["/r"])
    assert third is not None
    assert merge(file, third).summary == "a-1, a-2 and a-3 all write /tmp/r.json"


def test_every_lane_writing_in_one_lane_is_one_incident() -> None:
    rec = None
    for lane, t in (("B", 1.0), ("C", 2.0), ("B", 3.0)):
        obs = foreign_write(kw(f"/r/ck.A/tmp/{lane}{t}", lane, t), "/r/ck.A", victim_owner=False)
        assert obs is not None
        rec = merge(rec, obs, "/r")
        if lane == "B" and t == 1.0:
            assert rec.summary == "B writes in the namespace /r/ck.A: /r/ck.A/tmp/B1.0"
    assert rec is not None and rec.count == 3
    assert [(w["lane"], w["count"]) for w in rec.writers] == [("B", 2), ("C", 1)]
    assert rec.summary == "B and C write in the namespace /r/ck.A"
    obs = foreign_write(kw("/r/ck.A/x", "B", 4.0), "/r/ck.A", victim_owner=False, victim_lane="A")
    assert obs is not None and merge(rec, obs).summary == "B and C write in A's lane"


def test_acknowledgement_covers_what_was_seen_and_new_evidence_reopens() -> None:
    rec = shared(kw("/tmp/r.json", "agent-1", 1.0))
    acked = replace(rec, ack_at=5.0, ack_by="me")
    assert acked.acknowledged and not acked.reopened
    # The same write seen again (a restart, a second engine): still acknowledged.
    obs = unbound_write(kw("/tmp/r.json", "agent-1", 1.0), ["/r"])
    assert obs is not None and merge(acked, obs).acknowledged
    # The same lane writes the same content again, after the acknowledgement: new evidence.
    again = unbound_write(kw("/tmp/r.json", "agent-1", 6.0), ["/r"])
    assert again is not None
    reopened = merge(acked, again)
    assert not reopened.acknowledged and reopened.reopened and reopened.count == 1
    assert reopened.to_view().reopened and not reopened.to_view().acknowledged
    # It survives the disk, and a second engine's older copy does not hide it.
    back = record_from_json(json.loads(json.dumps(reopened.to_json())), "/r")
    assert back is not None and back.reopened
    assert merge_records(acked, back).reopened and merge_records(back, acked).reopened
    # Acknowledged again: closed again.
    assert replace(reopened, ack_at=7.0).acknowledged


def test_an_incident_whose_writers_are_gone_and_quiet_is_resolved_saying_so() -> None:
    rec = shared(kw("/tmp/r.json", "agent-1", 1.0), kw("/tmp/r.json", "agent-2", 2.0, pid=50))
    quiet = 2.0 + QUIET_FOR + 1
    assert resolve_quiet(rec, 2.0 + QUIET_FOR - 1, lambda _p, _t: True) is None  # too soon
    assert resolve_quiet(rec, quiet, lambda pid, _t: pid == 42) is None  # agent-2 still runs
    done = resolve_quiet(rec, quiet, lambda _p, _t: True)
    assert done is not None and done.acknowledged and done.resolved and done.ack_by == RESOLVER
    assert "resolved automatically" in done.ack_note
    view = done.to_view()
    assert view.resolved and view.acknowledged and view.ack_note == done.ack_note
    again = unbound_write(kw("/tmp/r.json", "agent-3", quiet + 1, pid=60), ["/r"])
    assert again is not None
    back = merge(done, again)
    assert not back.acknowledged and not back.resolved and back.reopened
    assert back.summary == "agent-1, agent-2 and agent-3 all write /tmp/r.json"


def test_records_with_the_old_kind_names_still_read() -> None:
    old = {
        "schema": 1,
        "id": "unbound-writer-0123456789ab",
        "kind": "unbound-writer",
        "victim": None,
        "intruder": {"lane": "a", "namespace": "/r/ck.a", "pid": 9, "command": ["sh"]},
        "first_seen": 1.0,
        "last_seen": 2.0,
        "count": 1,
        "summary": "pid 9 of lane a wrote /tmp/x outside its namespace",
        "ack_at": 3.0,
        "ack_by": "me",
        "evidence": [{"path": "/tmp/x", "time": 2.0, "grade": "known", "key": "k"}],
    }
    rec = record_from_json(old)
    assert rec is not None and rec.kind == "shared-file" and rec.id == old["id"]
    assert rec.acknowledged and rec.summary == old["summary"]
    assert [(w["lane"], w["pid"]) for w in rec.writers] == [("a", 9)]
    foreign = record_from_json({**old, "kind": "foreign-writer"})
    assert foreign is not None and foreign.kind == "cross-lane-write"
    # A view of an old name (a record from an older engine in memory) keeps its severity.
    assert severity_of("unbound-writer") == severity_of("shared-file")
