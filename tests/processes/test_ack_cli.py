"""Acknowledging as a person does, with the real CLI: `incidents ID --ack` covers the
evidence seen up to then, so `status` exits 0; evidence after it (what an engine appends to the
root's incident log) opens the incident again: `status` exits 4, `incidents` says "reopened".
No lane and no kernel attribution needed: also a normal user's journey."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.model.detectors.unbound_writer import unbound_write
from lanewatch.model.incidents import merge
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.records.incident_log import IncidentLog
from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def write(root: Path, lane: str, path: str, t: float) -> KernelWrite:
    pid = 4000 + int(lane[-1])
    return KernelWrite(
        path=path, time=t, event="close-write", size=1, sha256="0" * 64, pid=pid,
        start_ticks=1, lane=lane, namespace=f"{root}/ck.{lane}", checkout_id="ck",
        checkout_path="/nowhere", command=("sh",), how="$LANEWATCH_NAMESPACE",
        writer=f"pid {pid} (lane {lane}): sh",
    )  # fmt: skip


def test_ack_holds_until_new_evidence_then_status_exits_4_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    shared = str(tmp_path / "shared" / "receipt.json")
    log = IncidentLog(str(root))
    rec = None
    for lane, t in (("agent-1", time.time() - 5), ("agent-2", time.time() - 4)):
        obs = unbound_write(write(root, lane, shared, t), [str(root)])
        assert obs is not None
        rec = merge(rec, obs, str(root))
    assert rec is not None and log.persist([rec])

    first = cli("status", "--json", "--root", str(root), cwd=tmp_path)
    assert first.returncode == 4, first.stderr
    (doc,) = json.loads(first.stdout)["incidents"]
    assert doc["summary"] == f"agent-1 and agent-2 both write {shared}"
    assert [w["lane"] for w in doc["writers"]] == ["agent-1", "agent-2"]

    ack = cli("incidents", rec.id, "--ack", "--root", str(root), cwd=tmp_path)
    assert ack.returncode == 0, ack.stderr
    after = cli("status", "--json", "--root", str(root), cwd=tmp_path)
    assert after.returncode == 0, after.stdout
    (doc,) = json.loads(after.stdout)["incidents"]
    assert doc["acknowledged"] and doc["ack_by"] and not doc["reopened"]

    # agent-1 writes the file again (the same bytes): an engine appends the new evidence.
    again = unbound_write(write(root, "agent-1", shared, time.time() + 1), [str(root)])
    assert again is not None
    log = IncidentLog(str(root))
    (stored,) = log.load()
    assert log.persist([merge(stored, again, str(root))])
    reopened = cli("status", "--json", "--root", str(root), cwd=tmp_path)
    assert reopened.returncode == 4, reopened.stdout
    (doc,) = json.loads(reopened.stdout)["incidents"]
    assert doc["reopened"] and not doc["acknowledged"]
    listing = cli("incidents", "--root", str(root), cwd=tmp_path)
    assert listing.returncode == 0 and "reopened" in listing.stdout
