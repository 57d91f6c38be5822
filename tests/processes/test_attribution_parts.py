"""The pieces of kernel attribution that need no privilege: the pid clock's proofs, the
pid → lane rules, the evidence store, the incident rules, the file history, the content diff."""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from dataclasses import replace
from pathlib import Path

from lanewatch.kernel.attribution import Attribution, KernelBatch
from lanewatch.kernel.writefacts import Fact
from lanewatch.model.detectors.foreign_writer import foreign_write
from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.views import Evidence, Incident
from lanewatch.processes.pidclock import CLK_TCK, Mark, PidClock, boottime
from lanewatch.processes.pidlane import (
    GONE_MEMORY,
    OWNER_MEMORY,
    OwnerId,
    Owners,
    Writer,
    _lane,
    _Proc,
)
from lanewatch.records import evidence
from lanewatch.records.evidence import SMALL_FILE, EvidenceStore
from lanewatch.records.writes import WriteLog
from tests.conftest import wait_for
from tests.kits.attributionkit import sha

# --- the pid clock -------------------------------------------------------------------------


def clock_with(marks: list[Mark], pid_max: int = 32768) -> PidClock:
    """A clock that answers from these marks only (what /proc said, replayed)."""
    clock = PidClock()
    clock.available, clock.pid_max, clock.cycle = True, pid_max, pid_max - 300
    clock._dense = deque(marks)
    clock._sparse = deque(marks[:1])
    return clock


def ticks(t: float) -> int:
    return int(t * CLK_TCK)


def test_a_process_born_before_the_window_and_not_reallocated_is_proven() -> None:
    before, window, now = Mark(10.0, 1000, 0), Mark(20.0, 1010, 10), Mark(21.0, 1020, 20)
    clock = clock_with([before, window])
    assert clock.proves(1005, ticks(15.0), window, now=now)


def test_a_pid_the_allocator_came_back_to_is_never_proven() -> None:
    # 32468 allocations since the process was born: its pid may have been handed out again.
    before, window = Mark(10.0, 1000, 0), Mark(20.0, 1010, 10)
    later = Mark(30.0, 1009, 32467 + 10)
    clock = clock_with([before, window])
    assert not clock.proves(1005, ticks(15.0), window, now=later)


def test_born_after_the_window_needs_the_pid_free_when_it_opened() -> None:
    before = Mark(10.0, 1000, 0)
    free = Mark(20.0, 1010, 10, free=frozenset({1011, 1012}))
    busy = Mark(20.0, 1010, 10, free=frozenset({1012}))
    now = Mark(21.0, 1015, 15)
    born = ticks(20.5)  # after both windows
    assert clock_with([before, free]).proves(1011, born, free, now=now)
    # 1011 was held by someone else when the window opened: that one may have written.
    assert not clock_with([before, busy]).proves(1011, born, busy, now=now)


def test_the_tick_is_no_excuse_when_allocation_order_tells() -> None:
    # Born in the same tick as the window's mark, but the allocator had handed the pid out
    # by then (the mark's last pid is it): it was born before the window.
    before, window, now = Mark(10.0, 1000, 0), Mark(20.004, 1005, 5), Mark(21.0, 1006, 6)
    clock = clock_with([before, window])
    assert clock.proves(1005, ticks(20.0), window, now=now)


def test_a_sighting_proves_only_while_the_allocator_has_not_reached_the_pid() -> None:
    anchor, window = Mark(5.0, 2000, 0), Mark(6.0, 2001, 1)
    clock = clock_with([anchor, window])
    # Seen alive at 5.5 holding pid 1500; the allocator at 2000 must travel almost a whole
    # cycle to come back to 1500.
    assert clock.proves(1500, ticks(1.0), window, seen_at=5.5, now=Mark(7.0, 2100, 100))
    # Pid 2050 lies just ahead of the allocator: after 100 allocations it may be someone else's.
    assert not clock.proves(2050, ticks(1.0), window, seen_at=5.5, now=Mark(7.0, 2100, 100))


def test_a_real_process_that_exited_is_proven_by_its_start() -> None:
    clock = PidClock()
    if not clock.available:
        return  # no /proc/sys/kernel/ns_last_pid: nothing to check here
    # As in the engine, the clock has been sampling since before the writer was born: wait
    # two ticks of the start-time clock, so its first mark is before the birth.
    first = clock.sample()
    assert first is not None
    wait_for(lambda: boottime() > first.time + 2 / CLK_TCK, 5, 0.005)
    window = clock.sample(lookahead=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = int(Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    child.wait()
    assert clock.proves(child.pid, start, window)


# --- pid to lane -----------------------------------------------------------------------------


def owner(key: str, lane: str, pid: int, start: int, child: int, child_start: int) -> OwnerId:
    return OwnerId(key, "/r", lane, "ck", "/co", pid, start, child, child_start, child)


def proc(pid: int, start: int, *, ns: str | None = None, lane: str | None = None,
         lineage: tuple[tuple[int, int], ...] = (), pgid: int = 1) -> _Proc:  # fmt: skip
    return _Proc(pid, start, 1, pgid, ("cmd",), lane, ns, lineage, 0.0, 0.0)


def test_lane_rules_owner_then_environment_then_descent_then_group() -> None:
    a = owner("/r/ns.A", "A", 100, 1, 101, 2)
    b = owner("/r/ns.B", "B", 200, 3, 201, 4)
    owners = Owners()
    owners.update([a, b], 0.0)
    # The owner itself, whatever it inherited: its own lane.
    found = _lane(proc(200, 3, ns="/r/ns.A"), owners)
    assert found is not None and found[2] == "B" and found[4] is True
    # Bound by environment.
    found = _lane(proc(300, 9, ns="/r/ns.A"), owners)
    assert found is not None and found[1] == "/r/ns.A" and found[3] == "$LANEWATCH_NAMESPACE"
    # Descends from B's command (pid and start ticks match).
    found = _lane(proc(301, 9, lineage=((250, 8), (201, 4))), owners)
    assert found is not None and found[2] == "B" and "201" in found[3]
    # A reused pid (other start ticks) is not B's command.
    assert _lane(proc(302, 9, lineage=((201, 77),)), owners) is None
    # B's process group.
    found = _lane(proc(303, 9, pgid=201), owners)
    assert found is not None and found[2] == "B"


def test_owners_of_a_namespace_gone_from_the_model_are_forgotten_within_a_minute() -> None:
    """A reaper clears lanes as fast as they are made: their owners must not stay 10 minutes
    (GONE_MEMORY), while an owner whose namespace a new stamp names keeps OWNER_MEMORY (its
    writes may still arrive), and a partial list (a few stamps just seen) forgets nobody."""
    keep = owner("/r/ns.keep", "keep", 10, 1, 11, 2)
    owners = Owners()
    gone = [owner(f"/r/ns.{i}", f"l{i}", 1000 + i, 1, 2000 + i, 2) for i in range(100)]
    moved = owner("/r/ns.moved", "moved", 20, 1, 21, 2)
    owners.update([keep, moved, *gone], 0.0)
    assert len(owners.by_key) == 102
    newer = owner("/r/ns.moved", "moved", 30, 5, 31, 6)  # the same namespace, a new owner
    owners.update([keep, newer], 1.0)
    owners.update([newer], GONE_MEMORY + 5.0, complete=False)  # a stamp seen: no expiry
    assert len(owners.by_key) == 102 and owners.by_key["/r/ns.moved"] == newer
    owners.update([keep, newer], GONE_MEMORY + 5.0)
    assert set(owners.by_key) == {"/r/ns.keep", "/r/ns.moved"}
    assert (20, 1) in owners.by_identity  # the moved-on owner: still known
    assert all((1000 + i, 1) not in owners.by_identity for i in range(100))
    owners.update([keep, newer], OWNER_MEMORY + 5.0)
    assert (20, 1) not in owners.by_identity


# --- incident rules ---------------------------------------------------------------------------


def kw(path: str, **changes: object) -> KernelWrite:
    values: dict[str, object] = {
        "path": path,
        "time": 1.0,
        "event": "close-write",
        "size": 3,
        "sha256": sha(b"abc"),
        "pid": 42,
        "start_ticks": 7,
        "lane": "B",
        "namespace": "/r/ns.B",
        "checkout_id": "ck",
        "checkout_path": "/work/co",
        "command": ("sh",),
        "how": "$LANEWATCH_NAMESPACE",
        "writer": "pid 42 (lane B): sh",
    }
    values.update(changes)
    return KernelWrite(**values)  # type: ignore[arg-type]


def test_foreign_write_rules() -> None:
    obs = foreign_write(kw("/r/ns.A/tmp/x"), "/r/ns.A", victim_owner=False)
    assert obs is not None and obs.evidence.grade == "known" and obs.intruder_key == ""
    assert obs.intruder["namespace"] == "/r/ns.B"  # one incident per victim: every writer in it
    assert obs.evidence.sha256 == sha(b"abc") and "fanotify" in obs.evidence.note
    assert foreign_write(kw("/r/ns.B/tmp/x"), "/r/ns.B", victim_owner=False) is None  # own lane
    assert (
        foreign_write(kw("/r/ns.A/.lanewatch/ledger.jsonl"), "/r/ns.A", victim_owner=False) is None
    )
    assert (
        foreign_write(kw("/r/ns.A/x", lane=None, namespace=None), "/r/ns.A", victim_owner=False)
        is None
    )
    assert foreign_write(kw("/r/ns.A/x"), "/r/ns.A", victim_owner=True) is None


def test_unbound_write_rules() -> None:
    obs = unbound_write(kw("/tmp/receipt.json"), ["/r"])
    assert obs is not None and obs.victim is None and obs.kind == "shared-file"
    assert obs.intruder_key == obs.path == "/tmp/receipt.json"  # one incident per file
    assert unbound_write(kw("/tmp/receipt.json"), ["/other"]) is None  # not our root's lane
    assert unbound_write(kw("/tmp/receipt.json", handed=True), ["/r"]) is None  # its stdout
    assert unbound_write(kw("/work/co/build/x", checkout_path="/work/co"), ["/r"]) is None
    assert unbound_write(kw("/r/ns.B/tmp/x"), ["/r"]) is None  # its own namespace
    assert unbound_write(kw("/tmp/x", lane=None, namespace=None), ["/r"]) is None
    # A lane known by its environment before its stamp: its checkout is not known, so a write
    # outside its namespace (maybe in its checkout) is not judged (a soak's lane).
    assert unbound_write(kw("/tmp/co/x", checkout_id=None, checkout_path=None), ["/r"]) is None
    # Its checkout's repository: a linked worktree's git writing the main checkout's .git.
    in_repo = kw("/tmp/repo/.git/objects/ab/cd", checkout_path="/tmp/wt")
    assert unbound_write(in_repo, ["/r"]) is not None
    assert unbound_write(replace(in_repo, git_common_dir="/tmp/repo/.git"), ["/r"]) is None
    assert unbound_write(replace(in_repo, git_common_dir="/tmp/other/.git"), ["/r"]) is not None


def test_a_lanes_write_seen_before_its_stamp_waits_for_its_checkout(tmp_path: Path) -> None:
    # The reader knew the writer's lane from its environment while the owners did not know
    # the lane's stamp yet: the fact waits for it (at most PENDING_FOR), then is judged with
    # its checkout: a write in its own checkout is no incident.
    root, checkout = "/r", str(tmp_path / "co")
    owner = OwnerId("/r/ns.B", root, "B", "ck", checkout, pid=1, start_ticks=1)
    known: list[OwnerId] = []
    batches: list[KernelBatch] = []
    att = Attribution([root], batches.append, owners=lambda: list(known), shared=[])
    writer = Writer(42, 7, True, "B", "/r/ns.B", root, command=("sh",), how="$LANEWATCH_NAMESPACE")
    fact = Fact(f"{checkout}/x", "shared", None, None, writer, "close-write", True, None, 1.0, None)
    att._handle([fact])
    assert batches == [] and len(att._pending) == 1  # waiting for the lane's stamp
    known.append(owner)
    att._owners_at = 0.0  # the next refresh is due
    att._handle([])
    (batch,) = batches
    assert batch.observations == ()  # its own checkout
    assert [p for p, _ in batch.writes] == [f"{checkout}/x"]


# --- evidence store and file history ------------------------------------------------------------


def test_evidence_store_is_content_addressed_bounded_and_verified(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    store = EvidenceStore(str(root), max_bytes=25, pack_bytes=10)
    assert store.put(b"0123456789") == sha(b"0123456789")
    assert store.put(b"0123456789") == sha(b"0123456789") and len(store) == 1  # kept once
    assert store.put(b"x" * (SMALL_FILE + 1)) is None  # large files are hashed, never kept
    kept = store.put_many([(b"aaaaaaaaaa", None), (b"bbbbbbbbbb", sha(b"bbbbbbbbbb"))])
    assert kept == {0: sha(b"aaaaaaaaaa"), 1: sha(b"bbbbbbbbbb")}
    store.put(b"cccccccccc")  # 40 bytes in 10-byte packs, past 25: the oldest packs go
    assert evidence.load([str(root)], sha(b"0123456789")) is None
    assert evidence.load([str(root)], sha(b"cccccccccc")) == b"cccccccccc"
    assert store.bytes <= 25 and store.evicted >= 1
    # A store opened later finds what is on disk, and does not keep it twice.
    again = EvidenceStore(str(root))
    assert sha(b"cccccccccc") in again._load() and again.put(b"cccccccccc")
    # A content whose bytes no longer match its hash is not evidence.
    pack = next((root / ".lanewatch-root" / "evidence").glob("*.pack"))
    pack.write_bytes(b"X" * pack.stat().st_size)
    assert all(
        evidence.load([str(root)], sha(c)) in (None, c) for c in (b"aaaaaaaaaa", b"cccccccccc")
    )


def test_file_history_merges_the_tail_and_the_kernel_views_of_one_write() -> None:
    h = FileHistory()
    h.record("/p", 10.0, 5)  # the tail: size only
    h.record("/p", 10.2, 5, sha(b"hello"), writer="pid 7 (lane B)")  # the kernel
    h.record("/p", 12.0, 6, sha(b"hello!"), writer="pid 8 (lane C)")
    h.record("/p", 12.1, 6)  # the tail, late
    assert [(r.size, r.writer) for r in h.history("/p")] == [
        (5, "pid 7 (lane B)"),
        (6, "pid 8 (lane C)"),
    ]


# --- what each writer wrote --------------------------------------------------------------------


def test_report_shows_the_first_version_then_diffs(tmp_path: Path) -> None:
    from lanewatch.records.report import build_report, render
    from lanewatch.records.writes import WriteEntry

    root = tmp_path / "root"
    root.mkdir()
    store = EvidenceStore(str(root))
    path = "/tmp/shared.json"
    rows = [("A", 1.0, b'{"by": "A"}\n'), ("B", 2.0, b'{"by": "B"}\n'), ("C", 3.0, b"\x00bin")]
    for lane, t, data in rows:
        store.put(data)
        WriteLog(str(root)).append(
            [
                WriteEntry(
                    path,
                    t,
                    len(data),
                    sha(data),
                    True,
                    10,
                    1,
                    True,
                    lane,
                    f"/r/{lane}",
                    ("sh",),
                    "env",
                    "close-write",
                )
            ]
        )
    ev = Evidence(path, 2.0, 12, sha(rows[1][2]), "known", "pid 10 (lane B)", "n", "k")
    incident = Incident("unbound-writer-x", "shared-file", None, {}, 2.0, 2.0, 1, "known",
                        (ev,), False)  # fmt: skip
    report = build_report([str(root)], incident)
    (story,) = report.files
    assert [s.kind for s in story.shown] == ["content", "diff", "binary"]
    md = render(report, "md")
    assert '{"by": "A"}' in md and '-{"by": "A"}' in md and '+{"by": "B"}' in md
    assert "binary content (4 bytes): not shown" in md and sha(rows[2][2]) in md
    assert md.index("lane A, pid 10: sh") < md.index("lane B, pid 10: sh")
