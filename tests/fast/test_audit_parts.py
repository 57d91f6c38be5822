"""The audit's pure parts: how a written path is classified, which test a file time names, where
the clock plugin goes in a pytest command line, and the report's verdict (no process)."""

from __future__ import annotations

import os

from lanewatch.audit.audit import _own_ipc_names, pytest_position
from lanewatch.audit.auditreport import AuditReport, Finding, Read, Run, Write, markdown
from lanewatch.audit.capture import SLACK_NS, Tick
from lanewatch.audit.capture import tests_running_at as running_at
from lanewatch.audit.kernelwatch import Access, own_times
from lanewatch.audit.scopes import (
    CHECKOUT,
    OTHER,
    PRODUCT,
    UNBOUND,
    area_of,
    display,
    fix_for,
    scope_of,
)


def test_fixed_names_in_shared_temp_and_home_are_unbound() -> None:
    assert scope_of("/tmp", "out.json").scope == UNBOUND
    assert scope_of("/var/tmp", "x.lock").scope == UNBOUND
    assert scope_of("~", ".toolrc").scope == UNBOUND


def test_folders_named_after_a_product_are_product_scoped() -> None:
    cache = scope_of("~", ".cache/tool/state.json")
    assert (cache.scope, cache.owner) == (PRODUCT, "~/.cache/tool")
    share = scope_of("~", ".local/share/tool/db/x")
    assert (share.scope, share.owner) == (PRODUCT, "~/.local/share/tool")
    project = scope_of("/var/tmp", "project/build/a.o")
    assert (project.scope, project.owner) == (PRODUCT, "/var/tmp/project")
    assert scope_of("~", ".tool/config").owner == "~/.tool"


def test_inside_the_checkout_is_checkout_scoped() -> None:
    assert scope_of("checkout", "out/result.txt").scope == CHECKOUT
    assert display("checkout", "out/result.txt") == "<checkout>/out/result.txt"
    assert display("~", ".cache/t/x") == "~/.cache/t/x"


def test_a_file_time_names_the_test_that_ran_then() -> None:
    ticks = [Tick("t::a", 1_000_000_000, 2_000_000_000), Tick("t::b", 2_100_000_000, 3_000_000_000)]
    assert running_at(ticks, 1_500_000_000) == ["t::a"]
    assert running_at(ticks, 2_500_000_000) == ["t::b"]
    # the coarse clock: a time just before b's start (a tick behind) is still b's
    assert running_at(ticks, 2_100_000_000 - SLACK_NS // 2) == ["t::b"]
    assert running_at(ticks, 5_000_000_000) == []  # after every test: the session's
    # just after a test's end is not that test's: file times never run ahead of the test clock
    assert running_at(ticks, 3_000_000_000 + SLACK_NS // 2) == []
    assert running_at(ticks, None) == []
    overlapping = [*ticks, Tick("t::c", 1_400_000_000, 1_600_000_000)]  # xdist
    assert running_at(overlapping, 1_500_000_000) == ["t::a", "t::c"]


def test_the_clock_plugin_goes_right_after_pytest() -> None:
    assert pytest_position(["pytest", "-q"]) == 1
    assert pytest_position(["/venv/bin/py.test"]) == 1
    assert pytest_position(["python3", "-m", "pytest", "-x"]) == 3
    assert pytest_position(["make", "test"]) is None
    assert pytest_position(["python3", "-m", "unittest"]) is None


def test_only_a_path_two_runs_wrote_in_one_place_is_shared() -> None:
    own = Finding("<checkout>/out", CHECKOUT, "the checkout", "fix")
    own.writes += [Write(0, "/c0", "written", 1), Write(1, "/c1", "written", 1)]
    assert not own.shared  # two checkouts, each its own file
    one = Finding("<checkout>/out", CHECKOUT, "the checkout", "fix")
    one.writes += [Write(0, "/c0", "written", 1), Write(1, "/c0", "written", 1)]
    assert one.shared  # two lanes of ONE checkout
    tmp = Finding("/tmp/x", UNBOUND, "/tmp", "use tmp_path", [Write(0, "/tmp", "written", 1)])
    assert not tmp.shared
    report = AuditReport(["pytest"], True, [], [own, tmp], [])
    assert report.exit_code == 0
    tmp.writes.append(Write(1, "/tmp", "written", 2, ["t.py::test_x"]))
    assert report.exit_code == 4
    text = markdown(report)
    assert "## `/tmp/x`" in text and "**COLLISION**" in text and "`t.py::test_x`" in text
    assert "use tmp_path" in text


def test_paths_the_kernel_saw_are_placed_and_classified() -> None:
    assert area_of("/home/u/.cache/t/x", "/home/u") == ("~", ".cache/t/x")
    assert area_of("/dev/shm/sem.lock", "/home/u") == ("/dev/shm", "sem.lock")
    assert scope_of("/dev/shm", "sem.lock").scope == UNBOUND
    shm = scope_of("/dev/shm", "tool/seg")
    assert (shm.scope, shm.owner) == (PRODUCT, "/dev/shm/tool")
    uid = os.getuid()
    assert area_of(f"/run/user/{uid}/tool.sock", "/h") == (f"/run/user/{uid}", "tool.sock")
    other = area_of("/srv/build/out/a.o", "/home/u")
    assert other == (OTHER, "srv/build/out/a.o")
    placed = scope_of(*other)
    assert (placed.scope, placed.owner) == (PRODUCT, "/srv/build/out")
    assert display(*other) == "/srv/build/out/a.o"
    assert "tmp_path" in fix_for(*other, PRODUCT, True)


def test_a_read_by_a_run_that_did_not_write_it_fails_the_audit() -> None:
    feed = Finding("/srv/p/feed", PRODUCT, "/srv/p", "fix", [Write(0, OTHER, "written", 1)])
    feed.reads_seen = True
    report = AuditReport(["pytest"], True, [], [feed], [])
    assert feed.read_note == "read by no run" and report.exit_code == 0
    feed.reads.append(Read(0, 2, ["t.py::test_back"]))
    assert not feed.crossed and report.exit_code == 0  # its own run reading it back
    assert "run 0 read it back" in feed.read_note
    feed.reads.append(Read(1, 3, ["t.py::test_gate"]))
    assert feed.crossed == [(1, [0])] and not feed.shared
    assert report.exit_code == 4
    assert "run 1 read what run 0 wrote" in feed.read_note
    assert "`t.py::test_gate`" in feed.read_note
    text = markdown(report)
    assert "**READ BY ANOTHER RUN**" in text and "run 1 read what run 0 wrote" in text
    unwatched = Finding("/tmp/x", UNBOUND, "/tmp", "fix", [Write(0, "/tmp", "written", 1)])
    assert unwatched.read_note == "reads not seen"


def test_a_timed_out_run_makes_the_audit_incomplete() -> None:
    run = Run(0, "/c0", "lane", "/ns", error="timed out after 3 s: ended by SIGTERM")
    report = AuditReport(["make"], False, [run], [], [], timeout=3.0, timed_out=[0])
    assert report.exit_code == 5
    assert "**Timed out** after 3 s and ended: runs 0." in markdown(report)


def test_bytecode_caches_are_told_apart_from_files_named_alike() -> None:
    from lanewatch.audit.scopes import is_bytecode_cache

    for rel in (
        "venv/lib/python3.11/site-packages/__pycache__/pytest_timeout.cpython-311-pytest-8.4.2.pyc",
        "__pycache__/conftest.cpython-311.pyc",
        "pkg/__pycache__/mod.cpython-311.opt-1.pyc",
        "pkg/__pycache__/mod.cpython-311.pyc.140234",  # the temporary name before the rename
    ):
        assert is_bytecode_cache(rel), rel
    for rel in ("mod.pyc", "pkg/mod.pyc", "__pycache__/notes.txt", "x__pycache__/a.pyc"):
        assert not is_bytecode_cache(rel), rel


def test_fixes_say_what_a_user_types() -> None:
    from lanewatch.audit.scopes import CHECKOUT, fix_for

    pytest_cache = fix_for("checkout", ".pytest_cache/v/cache/nodeids", CHECKOUT, True)
    assert "-p no:cacheprovider" in pytest_cache and "-o cache_dir=" in pytest_cache
    assert "--cache-dir" in fix_for("checkout", ".mypy_cache/3.11/x.json", CHECKOUT, False)
    assert "COVERAGE_FILE" in fix_for("checkout", ".coverage.host.123", CHECKOUT, True)
    other = fix_for("checkout", "out/result.txt", CHECKOUT, True)
    assert "$LANEWATCH_NAMESPACE/scratch" in other and "lanewatch.lanes" not in other


def test_a_write_whose_file_time_a_later_write_moved_is_named_by_no_test() -> None:
    """The kernel's events are read a moment after the writes, and a write's time is its file's
    mtime then: run 1 wrote at 100 and went on to its next test; run 0 rewrote the file at 250
    before run 1's event was read, so both events carry 250. Run 1's own time is unknown: no
    test of it is named (not the one running at 250), and run 0's write keeps its time."""
    accesses = [
        Access(1, "/p/artifact", "written", 250),
        Access(0, "/p/feed", "written", 250),  # another file at the same tick: its own time
        Access(1, "/p/artifact", "read", 260),
        Access(0, "/p/artifact", "written", 250),
        Access(0, "/p/artifact", "written", 400),  # a later write of its own: both kept
    ]
    assert own_times(accesses) == [None, 250, 260, 250, 400]
    ticks = [Tick("t::build", 50, 150), Tick("t::gate", 160, 300)]
    assert running_at(ticks, 250) == ["t::gate"]  # what the moved time said
    assert running_at(ticks, None) == []


def test_names_in_dev_shm_of_one_run_alone_are_left_out_and_counted() -> None:
    def finding(path: str, *runs: int, read_by: int | None = None) -> Finding:
        f = Finding(
            path, UNBOUND, "/dev/shm", "fix", [Write(r, "/dev/shm", "written", 1) for r in runs]
        )
        if read_by is not None:
            f.reads.append(Read(read_by, 2))
        return f

    found = {
        ("/dev/shm", "sem.Ab12Cd"): finding("/dev/shm/sem.Ab12Cd", 0),
        ("/dev/shm", "psm_1f2e"): finding("/dev/shm/psm_1f2e", 1),
        ("/dev/shm", "meet"): finding("/dev/shm/meet", 0, 1),  # both runs: shared, stays
        ("/dev/shm", "read"): finding("/dev/shm/read", 0, read_by=1),  # another run read it
        ("/tmp", "x"): Finding("/tmp/x", UNBOUND, "/tmp", "fix", [Write(0, "/tmp", "written", 1)]),
    }
    alone = dict(found)
    assert _own_ipc_names(alone, runs=1) == 0 and alone == found  # one run: nothing to compare
    assert _own_ipc_names(found, runs=2) == 2
    assert sorted(found) == [("/dev/shm", "meet"), ("/dev/shm", "read"), ("/tmp", "x")]
    report = AuditReport(["python3", "mp.py"], False, [], list(found.values()), [])
    report.own_ipc_names = 2
    assert report.to_json()["own_ipc_names"] == 2
    assert any("2 names in /dev/shm each written by one run alone" in x for x in report.left_out)
    assert "## Left out" in markdown(report)
