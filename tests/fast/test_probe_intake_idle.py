"""An idle probe is not judged again path by path: `ProbeIntake.probed` skips `writers` when it
was last given the same model, holdings and owners and found nothing (counted, not timed)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lanewatch.engine import probeintake
from lanewatch.engine.probeintake import ProbeIntake
from lanewatch.lanes.stamp import META_DIR, StampRead, StampStatus, write_stamp
from lanewatch.linux.procid import hostname
from lanewatch.model import model as m
from lanewatch.model import writers as wr
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.holdings import Owner
from lanewatch.processes.prober import ProbeReport
from tests.fast.test_family import _stamp, worker_stamped_on_disk
from tests.processes.test_incidents import hold

ROOT = "/r"
A, B = f"{ROOT}/c.a", f"{ROOT}/c.b"
OWNERS = {
    A: Owner(A, "a", "c", "/co", frozenset({10}), 10, 10, handed=frozenset()),
    B: Owner(B, "b", "c", "/co", frozenset({20}), 20, 20, handed=frozenset()),
}


def record(key: str, pid: int | None = None) -> m.NsRecord:
    """A namespace the model knows with its live owner's stamp (nothing read from disk)."""
    name = key.rsplit("/", 1)[1]
    owner = OWNERS.get(key, OWNERS[A])
    pid = owner.pid if pid is None else pid
    stamp = replace(_stamp(), namespace=name, lane=owner.lane, pid=pid, host=hostname())
    return m.NsRecord(key, ROOT, name, StampRead(StampStatus.OK, stamp))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times `writers` ran (the real one, counted)."""
    seen: list[int] = []
    real: Callable[..., Any] = probeintake.wr.writers

    def counted(*args: Any, **kw: Any) -> Any:
        seen.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(probeintake.wr, "writers", counted)
    return seen


def observed(found: Any) -> list[m.Observed]:
    return [e for e in found.events if isinstance(e, m.Observed)]


def intake_of(known: Callable[[], Mapping[str, m.NsRecord]]) -> ProbeIntake:
    return ProbeIntake([ROOT], namespaces=known, history=FileHistory(), host=hostname())


def test_an_unchanged_quiet_probe_is_not_judged_again(calls: list[int]) -> None:
    known = {A: record(A), B: record(B)}
    intake = intake_of(lambda: known)
    own = (hold(f"{A}/tmp/x", pid=10, namespace_env=A), hold(f"{B}/tmp/y", pid=20))
    for at in (1.0, 2.0, 3.0):
        assert not observed(intake.probed(ProbeReport(at, {}, own, OWNERS)))
    assert len(calls) == 1
    # Equal holdings read afresh (a holder the memo did not vouch for): still the same inputs.
    again = tuple(replace(h) for h in own)
    assert not observed(intake.probed(ProbeReport(4.0, {}, again, OWNERS)))
    assert len(calls) == 1


def test_anything_new_is_judged(calls: list[int]) -> None:
    known: dict[str, m.NsRecord] = {A: record(A), B: record(B)}
    current = [known]
    intake = intake_of(lambda: current[0])
    own = (hold(f"{A}/tmp/x", pid=10, namespace_env=A),)
    intake.probed(ProbeReport(1.0, {}, own, OWNERS))
    # A lane's process now holds a file in the other lane: found at once.
    intruder = hold(f"{B}/tmp/y", pid=11, namespace_env=A)
    found = intake.probed(ProbeReport(2.0, {}, (*own, intruder), OWNERS))
    assert [o.observation.kind for o in observed(found)]
    # A probe that found something is judged again every time (its incident goes on).
    found = intake.probed(ProbeReport(3.0, {}, (*own, intruder), OWNERS))
    assert observed(found)[0].observation.evidence.time == 3.0
    assert len(calls) == 3
    # Quiet again (judged once more), then the model made again with the same namespaces and
    # stamps (a rescan, a heartbeat): not judged again.
    intake.probed(ProbeReport(4.0, {}, own, OWNERS))
    current[0] = dict(known)
    intake.probed(ProbeReport(5.0, {}, own, OWNERS))
    assert len(calls) == 4
    # A stamp changes (B is owned by another process now): judged again.
    current[0] = {**known, B: record(B, pid=21)}
    intake.probed(ProbeReport(6.0, {}, own, OWNERS))
    assert len(calls) == 5
    # The owners change: judged again.
    moved = {**OWNERS, B: replace(OWNERS[B], pids=frozenset({21}))}
    intake.probed(ProbeReport(7.0, {}, own, moved))
    assert len(calls) == 6


def test_a_stamp_read_from_disk_keeps_it_judged_every_time(
    tmp_path: Path, calls: list[int]
) -> None:
    """What `writers` found then came from the disk, which may change without the model."""
    root, main, gw0, known = worker_stamped_on_disk(tmp_path)
    intake = ProbeIntake(
        [str(root)], namespaces=lambda: known, history=FileHistory(), host=hostname()
    )
    owners = {
        str(main): Owner(str(main), "pytest", "c", "/co", frozenset({10}), 10, 10),
    }
    worker = hold(f"{gw0}/tmp/basetemp.lock", pid=20, namespace_env=str(main))
    for at in (1.0, 2.0):
        assert not observed(intake.probed(ProbeReport(at, {}, (worker,), owners)))
    assert len(calls) == 2


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every holding handed to detection (the real detectors, counted)."""
    seen: list[str] = []
    real: Callable[..., Any] = wr.detect

    def counted(fact: Any) -> Any:
        seen.append(fact.h.path)
        return real(fact)

    monkeypatch.setattr(wr, "detect", counted)
    return seen


def test_only_new_holdings_are_judged_while_the_model_and_owners_stay(
    judged: list[str],
) -> None:
    """Other users' files in shared temp come and go between two full scans: the lanes'
    unchanged holdings are not judged again for it."""
    known = {A: record(A), B: record(B)}
    current = [known]
    intake = intake_of(lambda: current[0])
    own = (hold(f"{A}/tmp/x", pid=10, namespace_env=A), hold(f"{B}/tmp/y", pid=20))
    intake.probed(ProbeReport(1.0, {}, own, OWNERS))
    assert sorted(judged) == [f"{A}/tmp/x", f"{B}/tmp/y"]
    judged.clear()
    others = hold("/tmp/someone-else/f", pid=99)  # a process of no lane, in shared temp
    assert not observed(intake.probed(ProbeReport(2.0, {}, (*own, others), OWNERS)))
    assert judged == ["/tmp/someone-else/f"]
    judged.clear()
    again = hold("/tmp/someone-else/g", pid=98)
    intake.probed(ProbeReport(3.0, {}, (*own, again), OWNERS))
    assert judged == ["/tmp/someone-else/g"]
    judged.clear()
    # An intruder is judged, found, and judged again at every probe while it holds.
    intruder = hold(f"{B}/tmp/z", pid=11, namespace_env=A)
    for at in (4.0, 5.0):
        found = intake.probed(ProbeReport(at, {}, (*own, intruder), OWNERS))
        assert [o.observation.evidence.time for o in observed(found)] == [at]
    assert judged == [f"{B}/tmp/z", f"{B}/tmp/z"]
    judged.clear()
    # The model made again with nothing changed for `writers` (a rescan): still not judged.
    current[0] = dict(known)
    intake.probed(ProbeReport(6.0, {}, own, OWNERS))
    assert judged == []
    # A namespace more (a path in it is now that lane's): everything is judged again.
    c = f"{ROOT}/c.c"
    current[0] = {**known, c: record(c)}
    intake.probed(ProbeReport(7.0, {}, own, OWNERS))
    assert sorted(judged) == [f"{A}/tmp/x", f"{B}/tmp/y"]


def test_a_holding_passed_over_for_its_ancestor_is_judged_once_that_one_goes() -> None:
    known = {A: record(A), B: record(B)}
    intake = intake_of(lambda: known)
    parent = hold(f"{B}/tmp/f", pid=30, namespace_env=A, lineage=(30, 1))
    child = hold(f"{B}/tmp/f", pid=31, namespace_env=A, lineage=(31, 30, 1))
    found = intake.probed(ProbeReport(1.0, {}, (parent, child), OWNERS))
    assert [o.observation.intruder.get("pid") for o in observed(found)] == [30]
    found = intake.probed(ProbeReport(2.0, {}, (child,), OWNERS))  # the parent let go
    assert [o.observation.intruder.get("pid") for o in observed(found)] == [31]


def test_a_namespace_that_loses_its_stamp_in_the_model_is_judged_again(
    tmp_path: Path, judged: list[str]
) -> None:
    """Made again with the same namespaces and the same stamps of this host, the model may
    still have dropped a stamp of another host: `writers` then reads that namespace's stamp
    from disk, so what it found before no longer holds."""
    root = tmp_path / "root"
    a, g = root / "c.a", root / "c.g"
    for ns in (a, g):
        (ns / META_DIR).mkdir(parents=True)
    here = replace(_stamp(), namespace=g.name, lane="g", pid=99, host=hostname(), root=str(root))
    write_stamp(g, here)  # on disk: a live lane of this host, not yet read by the model
    owners = {str(a): Owner(str(a), "a", "c", "/co", frozenset({10}), 10, 10)}
    mine = replace(_stamp(), namespace=a.name, lane="a", pid=10, host=hostname())
    remote = replace(here, host="elsewhere")
    first = {
        str(a): m.NsRecord(str(a), str(root), a.name, StampRead(StampStatus.OK, mine)),
        str(g): m.NsRecord(str(g), str(root), g.name, StampRead(StampStatus.OK, remote)),
    }
    current = [first]
    intake = ProbeIntake(
        [str(root)], namespaces=lambda: current[0], history=FileHistory(), host=hostname()
    )
    # Lane a's process holds g's folder: with g owned on another host, a claim in progress.
    folder = hold(str(g), pid=11, namespace_env=str(a), directory=True, access=None)
    assert not observed(intake.probed(ProbeReport(1.0, {}, (folder,), owners)))
    lost = StampRead(StampStatus.MISSING)
    current[0] = {**first, str(g): m.NsRecord(str(g), str(root), g.name, lost)}
    found = intake.probed(ProbeReport(2.0, {}, (folder,), owners))
    assert judged == [str(g), str(g)]
    assert [o.observation.victim for o in observed(found)] == [str(g)]
