"""`lanewatch drill`: isolated lanes never clobber each other; one shared folder always does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lanewatch.cli.tools.drill_cmd import _print
from lanewatch.drill.drill import CLASSES, EXIT_BLIND, EXIT_CLOBBERED, DrillReport, LaneReport
from tests.conftest import LANEWATCH
from tests.kits.contractkit import parsed


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The drill's temp folder comes from TMPDIR: keep it under this test's tmp_path."""
    tmp = tmp_path / "drill-tmp"
    tmp.mkdir()
    for var in ("TMPDIR", "TMP", "TEMP"):
        monkeypatch.setenv(var, str(tmp))
    return tmp


def drill(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict]:  # type: ignore[type-arg]
    done = subprocess.run(
        [*LANEWATCH, "drill", "--lanes", "3", "--seconds", "0.3", "--json", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, parsed("drill", done.stdout) if done.stdout.strip() else {}


def test_isolated_lanes_never_clobber(repo: Path, private_tmp: Path, isolated_state: Path) -> None:
    done, report = drill(cwd=repo)
    assert done.returncode == 0, (done.stdout, done.stderr)
    iso = report["isolated"]
    assert report["ok"] and iso["clobbers"] == 0 and report["unbound"] is None
    lanes = iso["lanes"]
    assert len(lanes) == 3 and all(lane["error"] is None for lane in lanes)
    assert len({lane["namespace"] for lane in lanes}) == 3  # three lanes, three namespaces
    assert len({lane["pid"] for lane in lanes}) == 3  # three real processes
    for lane in lanes:
        assert all(lane["writes"][c] >= 2 for c in CLASSES), lane["writes"]
        assert lane["namespace"].startswith(report["root"])
    assert report["root"].startswith(str(private_tmp))
    assert list(private_tmp.iterdir()) == []  # the drill cleaned up after itself
    assert not (isolated_state / "roots.json").exists()  # and left the registry alone


def test_unbound_shared_folder_is_caught(repo: Path, private_tmp: Path) -> None:
    done, report = drill("--unbound", cwd=repo)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert report["isolated"]["clobbers"] == 0
    shared = report["unbound"]
    assert shared["shared_dir"].startswith(str(private_tmp))  # never a real shared path
    assert shared["clobbers"] > 0
    # Every writer but the last to write finds another's bytes in each file class, and every
    # ledger holds the others' lines: all four classes are caught.
    assert all(shared["clobbers_by_class"][c] > 0 for c in CLASSES), shared["clobbers_by_class"]
    assert {lane["namespace"] for lane in shared["lanes"]} == {shared["shared_dir"]}


def test_text_output_says_what_it_saw(capsys: pytest.CaptureFixture[str]) -> None:
    clean = [LaneReport(0, "isolated", lane="drill-0", namespace="/r/ns0", writes={"temp": 9})]
    seen = [LaneReport(0, "shared", clobbers={"receipt": 2, "temp": 1})]
    _print(_report(clean, seen))
    out = capsys.readouterr().out
    assert "drill-0" in out and "/r/ns0" in out
    assert "3 clobbered (receipt 2, temp 1, test-output 0, ledger 0)" in out
    assert "drill: ok, no lane clobbered another; the drill saw 3 clobbers" in out
    dirty = [LaneReport(0, "isolated", lane="drill-0", clobbers={"temp": 1})]
    _print(_report(dirty, None))
    assert "drill: FAILED, a lane read another lane's bytes" in capsys.readouterr().out


def test_drill_outside_a_checkout_is_unbound(tmp_path: Path, private_tmp: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done, _ = drill(cwd=plain)
    assert done.returncode == 6  # unbound (docs/exit-codes.md)
    assert "not inside a git checkout" in done.stderr


def _report(isolated: list[LaneReport], unbound: list[LaneReport] | None) -> DrillReport:
    return DrillReport("c-000000000000", "/c", 2, 0.1, "/r", "/w", False, None, isolated, unbound)


def test_exit_code_verdicts() -> None:
    clean = [LaneReport(0, "isolated", clobbers={"temp": 0}), LaneReport(1, "isolated")]
    dirty = [LaneReport(0, "isolated", clobbers={"temp": 1}), LaneReport(1, "isolated")]
    seen = [LaneReport(0, "shared", clobbers={"receipt": 2})]
    blind = [LaneReport(0, "shared", clobbers={"receipt": 0})]
    assert _report(clean, None).exit_code == 0
    assert _report(clean, seen).exit_code == 0
    assert _report(dirty, seen).exit_code == EXIT_CLOBBERED
    assert _report(clean, blind).exit_code == EXIT_BLIND
    broken = [LaneReport(0, "isolated", error="exited 1"), LaneReport(1, "isolated")]
    assert _report(broken, None).exit_code == 1
    met = _report(clean, None)
    met.shared_namespaces.append("lanes 0 and 1 both wrote in /x")
    assert met.exit_code == EXIT_CLOBBERED
