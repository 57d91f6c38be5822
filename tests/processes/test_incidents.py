"""Incidents: attribution rules, the shared log on disk, and each collision made for real."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import uuid
from pathlib import Path

from lanewatch.engine.engine import Engine, acknowledge
from lanewatch.lanes.stamp import write_stamp
from lanewatch.model import incidents as inc
from lanewatch.model import writers as wr
from lanewatch.model.detectors.refused_claim import refused_claim
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.kinds import IncidentKind
from lanewatch.model.observation import Observation, incident_id
from lanewatch.model.views import Incident
from lanewatch.records.incident_log import IncidentLog, log_path, read_all
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp, running, start_lane, stop_lane

A, B = "/r/c.a", "/r/c.b"
OWNERS = {
    A: Owner(A, "a", "c", "/co", frozenset({10, 11}), 11, 10),
    B: Owner(B, "b", "c", "/co", frozenset({20, 21}), 21, 20),
}


def hold(path: str, pid: int = 30, **kw: object) -> Holding:
    values: dict[str, object] = {
        "pid": pid,
        "start_ticks": 1,
        "path": path,
        "kind": "fd",
        "access": "write",
        "deleted": False,
        "directory": False,
        "lane_env": None,
        "namespace_env": None,
        "lineage": (pid, 1),
        "pgid": pid,
        "command": ("x",),
    }
    values.update(kw)
    return Holding(**values)  # type: ignore[arg-type]


def find(holdings: list[Holding]) -> list[Observation]:
    return wr.writers(holdings, OWNERS, [A, B], roots=["/r"], shared=["/tmp"], at=1.0)


def test_foreign_writer_by_environment_or_descent() -> None:
    by_env = find([hold(f"{A}/tmp/x", namespace_env=B)])
    by_descent = find([hold(f"{A}/tmp/x", lineage=(30, 21, 20, 1))])
    for found in (by_env, by_descent):
        (obs,) = found
        assert obs.kind == IncidentKind.CROSS_LANE_WRITE
        assert obs.victim == A and obs.intruder["namespace"] == B
        assert obs.evidence.grade == "inferred"
    assert by_env[0].id == by_descent[0].id  # one incident per victim and intruder


def test_only_a_write_or_a_place_to_write_from_is_foreign() -> None:
    """A file of A held read-only by B is read, not written; a cwd or an open folder in A is
    where B writes by relative path, so they still count."""
    for access in ("read", "path", None):
        assert not find([hold(f"{A}/tmp/x", namespace_env=B, access=access)])
    assert not find([hold(f"{A}/lib.so", namespace_env=B, kind="map", access="read")])
    assert find([hold(f"{A}/tmp/x", namespace_env=B, access="readwrite")])
    assert find([hold(f"{A}/tmp", namespace_env=B, kind="cwd", access=None, directory=True)])
    assert find([hold(f"{A}/tmp", namespace_env=B, access="read", directory=True)])


def test_not_foreign_own_lane_owner_meta_or_unattributed() -> None:
    assert not find([hold(f"{A}/tmp/x", namespace_env=A)])
    assert not find([hold(f"{A}/tmp/x", lineage=(30, 11, 10))])
    assert not find([hold(f"{A}/.lanewatch/owner.json", namespace_env=B)])
    assert not find([hold(f"{A}/tmp/x")])  # a process of no lane: not attributed
    # The owner of A itself, whatever environment it inherited (a nested `lanewatch run`).
    assert not find([hold(A, pid=10, namespace_env=B, directory=True)])


def test_a_namespace_inside_an_ignored_prefix_is_still_watched() -> None:
    """The default root lives inside lanewatch's own (ignored) state dir: a foreign writer in
    one of its namespaces is still one, while a file of the state dir itself is nobody's."""
    found = wr.writers(
        [hold(f"{A}/tmp/x", namespace_env=B), hold("/r/roots.json", namespace_env=B)],
        OWNERS,
        [A, B],
        roots=["/r"],
        shared=["/tmp"],
        ignore=["/r"],
        at=1.0,
    )
    assert [(o.kind, o.victim) for o in found] == [(IncidentKind.CROSS_LANE_WRITE, A)]


def test_unbound_writer_rules() -> None:
    (obs,) = find([hold("/tmp/shared.json", namespace_env=A)])
    assert obs.kind == IncidentKind.SHARED_FILE and obs.victim is None
    assert not find([hold("/tmp/d", namespace_env=A, kind="cwd")])  # a cwd is not a write
    for access in ("read", "path", None):  # `sort /tmp/x/big.txt`: a reader
        assert not find([hold("/tmp/x/big.txt", namespace_env=A, access=access)])
    assert not find([hold("/tmp/x.so", namespace_env=A, kind="map", access="read")])
    assert find([hold("/tmp/x.db", namespace_env=A, kind="map", access="write")])  # shared rw
    assert find([hold("/tmp/x.db", namespace_env=A, access="readwrite")])
    # Its checkout's repository (a linked worktree at /tmp/wt of the repository /tmp/repo).
    git = Owner(A, "a", "c", "/tmp/wt", frozenset({10, 11}), 11, 10, "/tmp/repo/.git")
    in_repo = [hold("/tmp/repo/.git/objects/pack/tmp_pack_1", namespace_env=A)]
    assert find(in_repo)
    assert not wr.writers(in_repo, {A: git}, [A], roots=["/r"], shared=["/tmp"], at=1.0)
    assert not find([hold("/tmp/gone", namespace_env=A, deleted=True)])
    assert not find([hold("/co/build.log", namespace_env=A)])  # not shared temp
    # Handed in by whoever started the lane: the owner holds it too.
    handed = [hold("/tmp/run.log", pid=10), hold("/tmp/run.log", pid=11, namespace_env=A)]
    assert [o.evidence.writer for o in find(handed)] == [find(handed[:1])[0].evidence.writer]
    assert not find([hold("/tmp/out.log", pid=10, fd=1)])  # the owner's own stdout
    assert find([hold("/tmp/out.log", pid=10, fd=5)])
    # A lane of a root this engine does not watch.
    assert not find([hold("/tmp/x", namespace_env="/elsewhere/c.z")])


def test_ids_are_deterministic_and_merge_commutes() -> None:
    assert incident_id("takeover", A, "k") == incident_id("takeover", A, "k")
    assert incident_id("takeover", A, "k") != incident_id("takeover", B, "k")
    o1, o2 = (find([hold(f"{A}/tmp/{n}", namespace_env=B)])[0] for n in "xy")
    r1, r2 = inc.merge(None, o1), inc.merge(None, o2)
    ab, ba = inc.merge_records(r1, r2), inc.merge_records(r2, r1)
    assert ab.to_json() == ba.to_json() and ab.count == 2
    assert inc.record_from_json({"id": 3}) is None
    assert inc.record_from_json(json.loads(json.dumps(ab.to_json()))) == ab


# --- the log on disk ----------------------------------------------------------------------------


def _obs(n: int) -> Observation:
    line = {"event": "claim-refused", "time": 1000.0 + n, "lane": "a", "by_pid": 7}
    obs = refused_claim("/r/c.a", line, "/r/c.a/.lanewatch/ledger.jsonl")
    assert obs is not None
    return obs


def test_log_survives_restart_and_does_not_duplicate(root: Path) -> None:
    first, second = IncidentLog(str(root)), IncidentLog(str(root))
    rec = inc.merge(None, _obs(1), str(root))
    assert first.persist([rec]) and second.persist([rec])  # two engines, one incident
    lines = log_path(str(root)).read_text().splitlines()
    assert len(lines) == 1
    again = inc.merge(rec, _obs(2))
    second.persist([again])
    first.persist([rec])  # an engine behind the file catches up, writes nothing new
    assert len(log_path(str(root)).read_text().splitlines()) == 2
    (loaded,) = IncidentLog(str(root)).load()
    assert loaded.count == 2 and loaded.first_seen == 1001.0


def _append_many(root: str, n: int, who: int) -> None:
    ilog = IncidentLog(root)
    for i in range(n):
        ilog.persist([inc.merge(None, _obs(who * 1000 + i), root)])


def test_concurrent_writers_never_corrupt_the_log(root: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_append_many, args=(str(root), 30, w)) for w in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    for line in log_path(str(root)).read_text().splitlines():
        json.loads(line)  # no torn line
    (rec,) = read_all([str(root)]).values()
    assert rec.count == 90


def test_acknowledge_is_persisted(root: Path) -> None:
    rec = inc.merge(None, _obs(1), str(root))
    IncidentLog(str(root)).persist([rec])
    assert acknowledge([str(root)], rec.id, "tester")
    assert not acknowledge([str(root)], "takeover-000000000000")
    (loaded,) = read_all([str(root)]).values()
    assert loaded.acknowledged and loaded.ack_by == "tester"


# --- each collision for real --------------------------------------------------------------------


def _kinds(root: Path) -> dict[str, Incident]:
    return {i.kind: i for i in Engine([str(root)]).snapshot().incidents.values()}


def test_normal_lanes_raise_no_incident(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    a = start_lane(procs, repo, root, "a", [sys.executable, "-c", _WRITE_OWN])
    b = start_lane(procs, repo, root, "b", [sys.executable, "-c", _WRITE_OWN])
    try:
        wait_for(lambda: (a.namespace / "tmp" / "ready").exists())
        wait_for(lambda: (b.namespace / "tmp" / "ready").exists())
        assert _kinds(root) == {}
    finally:
        stop_lane(a)
        stop_lane(b)


_WRITE_OWN = """
import os, time
d = os.environ["TMPDIR"]
f = open(os.path.join(d, "work.log"), "w"); f.write("x"); f.flush()
open(os.path.join(d, "ready"), "w").close()
time.sleep(60)
"""

_HOLD = """
import sys, time
f = open(sys.argv[1], "w"); f.write("intruder"); f.flush()
open(sys.argv[2], "w").close()
time.sleep(60)
"""


def test_refused_claim_from_the_ledger(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    a = start_lane(procs, repo, root, "same")
    try:
        again = start_lane(procs, repo, root, "same", wait_child=False)
        assert again.proc.wait(20) == 3
        found = _kinds(root)["refused-claim"]
        assert found.grade == "known" and found.victim == str(a.namespace)
        assert found.intruder["pid"] == again.proc.pid
    finally:
        stop_lane(a)


def test_takeover_seen_by_the_live_engine(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    a = start_lane(procs, repo, root, "victim")
    other = subprocess.Popen(["sleep", "60"])
    procs.append(other)  # type: ignore[arg-type]
    try:
        with running([root]) as (_, rec):
            wait_for(lambda: (v := rec.view(a.namespace)) is not None and v.state.value == "live")
            from lanewatch.linux.procid import ProcessIdentity

            ident = ProcessIdentity.of(other.pid)
            hijack = a.stamp.with_changes(pid=other.pid, start_ticks=ident.start_ticks, lane="x")
            write_stamp(a.namespace, hijack)  # behind the lock's back, while A lives
            wait_for(lambda: any(i.kind == "takeover" for i in rec.picture.incidents.values()))
            (took,) = [i for i in rec.picture.incidents.values() if i.kind == "takeover"]
            assert took.grade == "known" and took.intruder["pid"] == other.pid
            assert took.intruder["previous_owner"]["pid"] == a.proc.pid
            wait_for(lambda: took.id in getattr(rec.view(a.namespace), "incident_ids", ()))
        # Persisted: a new engine (a restart) knows it without seeing it happen.
        assert "takeover" in _kinds(root)
    finally:
        stop_lane(a)


def test_foreign_receipt(repo: Path, root: Path) -> None:
    ns = make_stamp(root, "rcpt")
    (ns / "receipts").mkdir()
    body = json.dumps({"step": "test", "checkout_id": "other-000000000000"}).encode()
    (ns / "receipts" / "test.json").write_bytes(body)
    (ns / "receipts" / "mine.json").write_text(json.dumps({"checkout_id": ns.name.split(".")[0]}))
    found = _kinds(root)["foreign-receipt"]
    import hashlib

    (ev,) = found.evidence
    assert ev.sha256 == hashlib.sha256(body).hexdigest() and ev.grade == "known"
    assert found.intruder["checkout_id"] == "other-000000000000"


def test_foreign_writer_and_unbound_writer(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    a = start_lane(procs, repo, root, "a")
    target = a.namespace / "scratch" / "clobbered.json"
    shared = Path("/tmp") / f"lanewatch-test-{uuid.uuid4().hex}.json"
    ready1, ready2 = tmp_path / "r1", tmp_path / "r2"
    b = start_lane(procs, repo, root, "b", [sys.executable, "-c", _HOLD, str(target), str(ready1)])
    hold_shared = [sys.executable, "-c", _HOLD, str(shared), str(ready2)]
    c = start_lane(procs, repo, root, "c", hold_shared, fence="none")
    # The same name, by a fenced lane: its own /tmp, a folder of its namespace.
    ready3 = tmp_path / "r3"
    d = start_lane(procs, repo, root, "d", [*hold_shared[:3], str(shared), str(ready3)])
    try:
        wait_for(lambda: ready1.exists() and ready2.exists() and ready3.exists())
        kinds = _kinds(root)
        fw, ub = kinds["cross-lane-write"], kinds["shared-file"]
        assert fw.victim == str(a.namespace) and fw.intruder["namespace"] == str(b.namespace)
        assert fw.evidence[0].path == str(target) and fw.grade == "inferred"
        assert ub.victim is None and ub.intruder["lane"] == "c"
        assert ub.evidence[0].path == str(shared)
        every = Engine([str(root)]).snapshot().incidents.values()
        assert [i.intruder["lane"] for i in every if i.kind == "shared-file"] == ["c"]
        assert (d.namespace / "tmp" / shared.name).read_text() == "intruder"
    finally:
        for lane in (a, b, c, d):
            stop_lane(lane)
        shared.unlink(missing_ok=True)
    assert not shared.exists()


def test_incident_file_is_shared_by_two_engines(root: Path) -> None:
    ns = make_stamp(root, "shared")
    (ns / "receipts").mkdir()
    (ns / "receipts" / "x.json").write_text(json.dumps({"checkout_id": "zzz-000000000000"}))
    Engine([str(root)]).snapshot()
    Engine([str(root)]).snapshot()
    lines = log_path(str(root)).read_text().splitlines()
    assert len(lines) == 1, lines
