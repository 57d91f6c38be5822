"""`lanewatch incidents` as a person reads it: the list fits 80 to 160 columns with
every ID whole, and any unambiguous prefix of an ID (or of its hash) leads to the incident, its
`--markdown` report and its `--ack`; an ambiguous one lists the candidates (exit 2). Real
incident logs, written as an engine writes them; a user journey, also run as a normal user."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.cli.exits import Exit
from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.incidents import merge
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.records.incident_log import IncidentLog, IncidentRecord
from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged

HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J"  # a title change and a screen clear, in a file name


def cli(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    return subprocess.run(
        [*LANEWATCH, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip


def write(root: Path, lane: str, path: str, t: float) -> KernelWrite:
    pid = 4000 + int(lane[-1])
    return KernelWrite(
        path=path, time=t, event="close-write", size=1, sha256="0" * 64, pid=pid,
        start_ticks=1, lane=lane, namespace=f"{root}/ck.{lane}", checkout_id="ck",
        checkout_path="/nowhere", command=("sh",), how="$LANEWATCH_NAMESPACE",
        writer=f"pid {pid} (lane {lane}): sh",
    )  # fmt: skip


def shared_file(root: Path, path: str, t: float) -> IncidentRecord:
    """agent-1 then agent-2 write `path` in shared temp: one shared-file incident."""
    rec = None
    for n, lane in enumerate(("agent-1", "agent-2")):
        obs = unbound_write(write(root, lane, path, t + n), [str(root)])
        assert obs is not None
        rec = merge(rec, obs, str(root))
    assert rec is not None
    return rec


@pytest.fixture
def logged(tmp_path: Path) -> tuple[Path, list[str]]:
    """A root with three shared-file incidents (one on a hostile file name); their IDs."""
    root = tmp_path / "root"
    root.mkdir()
    now = time.time() - 60
    names = ("receipt.json", "cache.db", HOSTILE)
    recs = [shared_file(root, str(tmp_path / "shared" / n), now + k) for k, n in enumerate(names)]
    assert IncidentLog(str(root)).persist(recs)
    return root, [r.id for r in recs]


@pytest.mark.parametrize("columns", [80, 100, 120, 160])
def test_the_list_fits_the_width_with_every_id_whole(
    logged: tuple[Path, list[str]], tmp_path: Path, columns: int
) -> None:
    root, ids = logged
    out = cli("incidents", "--root", str(root), cwd=tmp_path, columns=columns)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= columns for line in lines), out.stdout
    for i in ids:  # whole, on one line: what `incidents ID` takes back
        assert any(i in line for line in lines), (i, out.stdout)
    assert out.stdout.count("medium") == 3, out.stdout  # the severity is not squeezed out
    # the summary, folded onto lines of its own (between the box's rules when wide)
    compact = "".join(out.stdout.replace("│", " ").split())
    assert "agent-1andagent-2bothwrite" in compact and "shared/receipt.json" in compact
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout  # the hostile name is inert


def test_any_unambiguous_prefix_leads_to_the_report_and_the_ack(
    logged: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, ids = logged
    first = ids[0]
    digest = first.rpartition("-")[2]
    # the first 8 characters of the hash, or a prefix of the whole ID that names one
    prefix = next(
        first[:n] for n in range(len(first)) if sum(i.startswith(first[:n]) for i in ids) == 1
    )
    for short in (digest[:8], prefix):
        md = cli("incidents", short, "--markdown", "--root", str(root), cwd=tmp_path)
        assert md.returncode == 0, md.stderr
        assert (
            md.stdout
            == cli("incidents", first, "--markdown", "--root", str(root), cwd=tmp_path).stdout
        )
        one = cli("incidents", short, "--root", str(root), cwd=tmp_path)
        assert one.returncode == 0 and first in one.stdout, one.stderr
    ack = cli("incidents", digest[:6], "--ack", "--root", str(root), cwd=tmp_path)
    assert ack.returncode == 0 and f"acknowledged: {first}" in ack.stdout, ack.stderr
    (acked,) = [r for r in IncidentLog(str(root)).load() if r.ack_at is not None]
    assert acked.id == first


def test_an_ambiguous_prefix_lists_the_candidates_and_exits_2(
    logged: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, ids = logged
    for args in (("shared-file",), ("shared-file", "--markdown"), ("shared", "--ack")):
        out = cli("incidents", *args, "--root", str(root), cwd=tmp_path)
        assert out.returncode == Exit.USAGE, (args, out.stdout, out.stderr)
        assert all(i in out.stderr for i in ids), out.stderr
        assert "3 incidents" in out.stderr and out.stdout == ""
    assert not [r for r in IncidentLog(str(root)).load() if r.ack_at is not None]


def test_unknown_or_hostile_ids_are_not_found_and_said_inert(
    logged: tuple[Path, list[str]], tmp_path: Path
) -> None:
    root, _ = logged
    for wanted in ("takeover-", "zz", "\x1b[2J"):
        for ack in ((), ("--ack",)):
            out = cli("incidents", wanted, *ack, "--root", str(root), cwd=tmp_path)
            assert out.returncode == Exit.NOT_FOUND, (wanted, out.stderr)
            assert "no incident" in out.stderr and "\x1b" not in out.stderr
