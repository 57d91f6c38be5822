"""A full probe judges the owners from its own /proc scan (one pinned stat per process, and the
owners' status read through the same pin), not from a process table read before it: the
verdicts, uids and members are the ones the table gives, for a running, a stopped and a
reused-pid owner, with and without the memo; and a lane with a network namespace of its own
keeps the old order (its sockets are read through its members)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import Stamp, read_stamp
from lanewatch.linux.proc import Pinned, parse_stat, pin, stat_at
from lanewatch.linux.procid import Liveness, ProcessIdentity
from lanewatch.processes import holders
from lanewatch.processes import prober as prober_module
from lanewatch.processes.prober import ProbeMemo, judge_all, probe
from tests.conftest import wait_for
from tests.kits.enginekit import make_stamp


def _stamp(
    root: Path, lane: str, proc: subprocess.Popen[bytes], **changes: object
) -> tuple[str, Stamp]:
    ident = ProcessIdentity.of(proc.pid)
    ns = make_stamp(root, lane, pid=ident.pid, start_ticks=ident.start_ticks, **changes)
    stamp = read_stamp(ns).stamp
    assert stamp is not None
    return str(ns), stamp


def _same(a: dict[str, object], b: dict[str, object]) -> None:
    assert a.keys() == b.keys()
    for key, ev in a.items():
        other = b[key]
        assert ev.same_verdict(other), (ev, other)  # type: ignore[attr-defined]


@pytest.mark.unprivileged  # as a normal user too: others' processes only partly readable
@pytest.mark.parametrize("memo", [False, True], ids=["one-shot", "with-memo"])
def test_the_scan_judges_as_the_table_does(
    root: Path, procs: list[subprocess.Popen[bytes]], memo: bool
) -> None:
    running = subprocess.Popen(["sleep", "60"], cwd=root)
    stopped = subprocess.Popen(["sleep", "60"])
    reused = subprocess.Popen(["sleep", "60"])
    procs.extend([running, stopped, reused])
    os.kill(stopped.pid, signal.SIGSTOP)
    wait_for(lambda: Pinned.open(stopped.pid).stat().state in ("T", "t"))  # type: ignore[union-attr]
    a, b, c = _stamp(root, "a", running), _stamp(root, "b", stopped), _stamp(root, "c", reused)
    # Its pid, another process's start: an owner gone, its pid now someone else's.
    stamps = {a[0]: a[1], b[0]: b[1], c[0]: replace(c[1], start_ticks=c[1].start_ticks - 1)}
    kept = ProbeMemo() if memo else None
    for _ in range(3 if memo else 1):
        report = probe(stamps, [str(root)], memo=kept)
        table = judge_all(stamps, time.time(), holders.process_table)
        _same(dict(report.evidence), dict(table))
        verdicts = {k: ev.liveness for k, ev in report.evidence.items()}
        assert verdicts == {a[0]: Liveness.ALIVE, b[0]: Liveness.STOPPED, c[0]: Liveness.REUSED}
        assert report.evidence[a[0]].uid == os.getuid()
        assert report.evidence[b[0]].uid == os.getuid()
        assert report.holdings is not None
        assert any(h.pid == running.pid and h.kind == "cwd" for h in report.holdings)


def test_a_lane_with_its_own_network_keeps_the_old_order(
    root: Path, procs: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    running = subprocess.Popen(["sleep", "60"], cwd=root)
    procs.append(running)
    plain = dict([_stamp(root, "a", running)])
    netted = {**plain, **dict([_stamp(root, "n", running, net_ns="net:[4026531840]")])}
    scans: list[bool] = []
    real = holders.scan

    def counted(*args: object, **kwargs: object) -> holders.ProcScan:
        scans.append(bool(kwargs.get("with_tree")))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(holders, "scan", counted)
    probe(plain, [str(root)])
    assert scans == [True]  # scanned first, the table from it
    scans.clear()
    report = probe(netted, [str(root)])
    assert scans == [False]  # judged first (the table read on its own), then scanned
    assert all(ev.liveness is Liveness.ALIVE for ev in report.evidence.values())
    scans.clear()
    probe(plain, [str(root)], full=False)  # the fast probe reads no full scan at all
    assert scans == []
    assert prober_module._scan_first(plain) and not prober_module._scan_first(netted)


def test_an_unchanged_stat_is_not_parsed_again() -> None:
    me = os.getpid()
    dfd = pin(me)
    try:
        learned: dict[bytes, object] = {}
        first = stat_at(me, dfd, None, learned)  # type: ignore[arg-type]
        assert first is not None and len(learned) == 1
        data = next(iter(learned))
        assert parse_stat(me, data) == first
        # The same bytes give back the very object; another pid's never does.
        known = {data: first}
        read: dict[bytes, object] = {}
        again = stat_at(me, dfd, known, read)  # type: ignore[arg-type]
        assert again is not None and again.pid == me
        # Our stat may move between two reads (CPU time, faults: fields a ProcStat does not
        # keep, so an equal ProcStat proves nothing; seen under load): judged by the bytes.
        if next(iter(read)) == data:
            assert again is first
        else:
            assert again is not first and again == parse_stat(me, next(iter(read)))
        forged = {k: replace(first, pid=me + 1) for k in known}
        third = stat_at(me, dfd, forged)  # type: ignore[arg-type]
        assert third is not None and third.pid == me
    finally:
        os.close(dfd)
