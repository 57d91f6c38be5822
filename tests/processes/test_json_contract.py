"""Every `--json` output of the real CLI validates against the JSON Schema shipped in the wheel.

The reports come from real commands on real files: a git checkout, a registered root with a
released namespace, an incident and a recorded write appended through the logs' own writers,
a clear, a restore and a purge. `record` and `drill` are validated where their tests run them
(test_record_cli.py, test_drill.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from lanewatch.cli.reports import NAMES, schema_id
from lanewatch.model import incidents as inc
from lanewatch.model.detectors.refused_claim import refused_claim
from lanewatch.records.incident_log import IncidentLog
from lanewatch.records.writes import WriteEntry, WriteLog
from tests.conftest import LANEWATCH
from tests.kits import actionkit
from tests.kits.actionkit import released_namespace
from tests.kits.contractkit import report, validator

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

scratch = actionkit.scratch  # the kit's fixture: a registered root under tmp_path


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def test_every_report_has_a_shipped_schema_that_is_itself_valid() -> None:
    shipped = Path(__file__).parents[2] / "app" / "lanewatch" / "schemas"
    assert sorted(p.stem for p in shipped.glob("*.json")) == sorted(NAMES)
    for name in NAMES:
        assert validator(name).schema["$id"] == schema_id(name)


def test_hello(tmp_path: Path) -> None:
    """The many-host handshake (docs/hosts.md): version, scheme, who, which roots."""
    from lanewatch.lanes.scheme import SCHEME_VERSION

    hello = report("hello", "hello", cwd=tmp_path)
    assert hello["scheme"] == SCHEME_VERSION and hello["uid"] == os.getuid()


def test_checkout_and_roots(repo: Path, scratch: Path) -> None:
    ident = report("id", "id", cwd=repo)
    assert ident["root"] == str(repo.resolve())
    roots = report("roots", "roots", "list", cwd=repo)["roots"]
    mine = next(r for r in roots if r["root"] == str(scratch))
    assert mine["path"] == mine["root"]  # the old name, kept for one release


def test_status_incidents_and_history(repo: Path, scratch: Path, tmp_path: Path) -> None:
    ns = released_namespace(scratch, "done")
    line = {"event": "claim-refused", "time": time.time(), "lane": "done", "by_pid": 7}
    obs = refused_claim(str(ns), line, str(ns / ".lanewatch" / "ledger.jsonl"))
    assert obs is not None
    record = inc.merge(None, obs, str(scratch))
    assert IncidentLog(str(scratch)).persist([record])
    target = str(ns / "tmp" / "f0.txt")
    write = WriteEntry(
        target, time.time(), 2, "0" * 64, False, 4242, 99, True, "B", str(ns), ("sh",), "env",
        "close-write", str(ns),
    )  # fmt: skip
    assert WriteLog(str(scratch)).append([write])

    status = report("status", "status", "--root", str(scratch), cwd=tmp_path, code=4)
    [view] = status["namespaces"]
    assert view["key"] == str(ns) and view["state"] == "released"
    assert [i["id"] for i in status["incidents"]] == [record.id]

    listed = report("incidents", "incidents", "--root", str(scratch), cwd=tmp_path)
    assert [i["id"] for i in listed["incidents"]] == [record.id]
    acked = cli("incidents", record.id, "--ack", "--root", str(scratch), cwd=tmp_path)
    assert acked.returncode == 0, acked.stderr
    one = report("incident", "incidents", record.id, "--root", str(scratch), cwd=tmp_path)
    # the report: the same bytes as the dashboard's export (records/report.py)
    assert one["incident"]["acknowledged"] and one["incident"]["ack_at"] is not None

    history = report("history", "history", target, "--root", str(scratch), cwd=tmp_path)
    assert [w["lane"] for w in history["writes"]] == ["B"]
    none = str(tmp_path / "never-written")
    empty = report("history", "history", none, "--root", str(scratch), cwd=tmp_path, code=8)
    assert empty["writes"] == []


def test_gate(repo: Path, scratch: Path) -> None:
    refused = report("gate", "gate", "tests", "--root", str(scratch), cwd=repo, code=10)
    assert refused["reason"] == "missing" and not refused["ok"]
    proved = cli("prove", "tests", "--root", str(scratch), "-q", "--", "true", cwd=repo)
    assert proved.returncode == 0, proved.stderr
    passed = report("gate", "gate", "tests", "--root", str(scratch), cwd=repo)
    assert passed["ok"] and passed["receipt"] is not None


def test_kill_clear_trash_restore_purge(scratch: Path, tmp_path: Path) -> None:
    ns = released_namespace(scratch, "old")
    killed = report("kill", "kill", "old", cwd=tmp_path)
    assert killed["outcome"] == "gone" and killed["key"] == str(ns)  # nothing to kill

    dry = report("clear", "clear", "old", "--dry-run", cwd=tmp_path)
    assert [r["outcome"] for r in dry["results"]] == ["would-clear"] and dry["dry_run"]
    cleared = report("clear", "clear", "old", "nosuch", "--yes", cwd=tmp_path, code=8)
    assert [(r["outcome"], r["key"]) for r in cleared["results"]] == [
        ("not-found", "nosuch"),
        ("cleared", str(ns)),
    ]
    again = report("clear", "clear", "old", "--yes", cwd=tmp_path)
    assert [r["outcome"] for r in again["results"]] == ["gone"]  # nothing to do

    [entry] = report("trash", "trash", cwd=tmp_path)["entries"]
    assert entry["key"] == entry["original"] == str(ns) and entry["lane"] == "old"
    back = report("restore", "restore", entry["id"], cwd=tmp_path)
    assert back["outcome"] == "restored" and back["key"] == str(ns) and ns.is_dir()

    nothing = report("purge", "purge", cwd=tmp_path)
    assert nothing["outcome"] == "nothing" and nothing["items"] == []
    report("clear", "clear", "old", "--yes", cwd=tmp_path)
    purged = report("purge", "purge", "--older-than", "0", "--yes", cwd=tmp_path)
    assert purged["outcome"] == "purged" and [i["outcome"] for i in purged["items"]] == ["purged"]
    assert not os.path.exists(ns)


def test_reap(scratch: Path, tmp_path: Path) -> None:
    """`reap --json`, dry run and a real pass: clear by age, then purge (docs/reaper.md)."""
    ns = released_namespace(scratch, "idle")
    none = report("reap", "reap", "--dry-run", cwd=tmp_path)  # no policy: nothing to do
    assert none["steps"] == [] and none["policy"]["age"] is None
    dry = report("reap", "reap", "--age", "0", "--dry-run", cwd=tmp_path)
    assert [s["outcome"] for s in dry["steps"]] == ["would-clear"] and ns.is_dir()
    done = report("reap", "reap", "--age", "0", "--trash-retention", "0", "--yes", cwd=tmp_path)
    assert [s["outcome"] for s in done["steps"]] == ["cleared"] and not ns.exists()
    purged = report("reap", "reap", "--trash-retention", "0", "--yes", cwd=tmp_path)
    assert [(s["verb"], s["outcome"]) for s in purged["steps"]] == [("purge", "purged")]
    assert purged["summary"]["purged_bytes"] > 0


def test_old_bare_lists_are_objects_now(repo: Path, scratch: Path) -> None:
    """incidents and history printed bare lists in 0.1: a script gets `schema` first now."""
    for args in (("incidents",), ("history", str(repo / "README"))):
        out = cli(*args, "--root", str(scratch), "--json", cwd=repo)
        assert isinstance(json.loads(out.stdout), dict), args
