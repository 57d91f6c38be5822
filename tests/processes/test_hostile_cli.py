"""Every human output of the CLI over hostile namespaces: the real `lanewatch` in a subprocess,
over a real root whose stamps, file names, incident log, write history and evidence store carry
terminal escapes, C1 controls, bidi overrides, undecodable bytes and Rich markup
(tests/kits/hostile.py). No hostile byte reaches stdout or stderr; the escapes are shown instead."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lanewatch.inert import inert
from lanewatch.lanes.roots import ROOT_META
from lanewatch.lanes.stamp import OwnerState
from lanewatch.linux.procid import ProcessIdentity
from lanewatch.records.evidence import EvidenceStore
from lanewatch.records.incident_log import log_path
from lanewatch.records.writes import WriteEntry, WriteLog
from tests.conftest import LANEWATCH
from tests.kits import hostile
from tests.kits.actionkit import register_root
from tests.kits.enginekit import make_stamp

# `clear` inspects every process for a cwd or an open file inside: a normal user gets EACCES
# on root's and is refused (rightly: a permission error is not an answer).
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="clear needs to inspect every process")

WIDE = "4000"  # columns: no row of a table folds, so a row is a line


@dataclass
class Hostile:
    root: Path
    released: Path  # a released namespace: clearable
    live: Path  # owned by a live process: never cleared
    incident_id: str
    written: Path  # a file with a recorded write history
    env: dict[str, str]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def bad(tmp_path: Path) -> Iterator[Hostile]:
    root = register_root(tmp_path / f"root{hostile.CSI_RED}")
    sleeper = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    try:
        owner = ProcessIdentity.of(sleeper.pid)
        common = {
            "command": hostile.COMMAND,
            "user": hostile.USER,
            "checkout_path": hostile.CHECKOUT_PATH,
        }
        released = make_stamp(
            root,
            hostile.LANE,
            state=OwnerState.RELEASED,
            released_at=time.time(),
            exit_code=0,
            **common,
        )
        live = make_stamp(
            root, hostile.LANE_BIDI, pid=owner.pid, start_ticks=owner.start_ticks, **common
        )
        make_stamp(root, hostile.LANE_C1, host=hostile.HOST, **common)
        make_stamp(root, hostile.LANE_BYTES, pid=owner.pid, start_ticks=owner.start_ticks)
        for ns in (released, live):
            for name in hostile.FILE_NAMES:
                (ns / os.fsdecode(name)).write_bytes(hostile.CONTENT)
        written = tmp_path / f"shared{hostile.OSC_TITLE}.json"
        written.write_bytes(hostile.CONTENT)
        incident_id = _hostile_incident(root, live, written)
        env = {**os.environ, "COLUMNS": WIDE, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
        yield Hostile(root, released, live, incident_id, written, env)
    finally:
        sleeper.kill()
        sleeper.wait()


def _hostile_incident(root: Path, victim: Path, written: Path) -> str:
    """An incident record, a write history and two kept contents, all hostile."""
    second = hostile.CONTENT + f"changed {hostile.CSI_CLEAR}\n".encode()
    store = EvidenceStore(str(root))
    assert store.put(hostile.CONTENT) and store.put(second)
    now = time.time()
    log = WriteLog(str(root))
    for t, data, lane in ((now - 2, hostile.CONTENT, hostile.LANE), (now - 1, second, "B")):
        entry = WriteEntry(
            path=str(written),
            time=t,
            size=len(data),
            sha256=sha(data),
            stored=True,
            pid=4242,
            start_ticks=1,
            identified=True,
            lane=lane,
            namespace=str(victim),
            command=tuple(hostile.COMMAND),
            how=f"how{hostile.C1_CSI}",
            event="close-write",
        )
        log.append([entry])
    incident_id = f"inc{hostile.CSI_RED}"
    record = {
        "id": incident_id,
        "kind": f"takeover{hostile.OSC_TITLE}",
        "victim": str(victim),
        "intruder": {"lane": hostile.LANE_C1, "pid": 4242, "command": hostile.COMMAND},
        "first_seen": now - 2,
        "last_seen": now - 1,
        "count": 2,
        "summary": f"summary {hostile.OSC_TITLE}\nFAKEROW {hostile.LONG}",
        "evidence": [
            {
                "path": str(written),
                "time": t,
                "size": len(data),
                "sha256": sha(data),
                "grade": "known",
                "writer": f"lane {hostile.LANE}",
                "note": f"note {hostile.OSC_CLIPBOARD}\r\nFAKEROW {hostile.UNDECODABLE}",
                "key": f"k{t}",
            }
            for t, data in ((now - 2, hostile.CONTENT), (now - 1, second))
        ],
    }
    path = log_path(str(root))
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(record) + "\n")
    return incident_id


def run(bad: Hostile, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    out = subprocess.run(
        [*LANEWATCH, *args],
        cwd=cwd or bad.root.parent,
        env=bad.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    hostile.check_text(out.stdout, f"stdout of {args[0]}")
    hostile.check_text(out.stderr, f"stderr of {args[0]}")
    return out


def table_rows(text: str) -> list[str]:
    """The body rows of the first Rich table in `text` (lines between its header rule and its
    closing rule)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return lines[start + 1 : end]


@pytest.mark.unprivileged
def test_status_shows_every_hostile_field_as_escapes_one_row_each(bad: Hostile) -> None:
    out = run(bad, "status", "--root", str(bad.root))
    text = out.stdout.decode()
    rows = table_rows(text)
    assert len(rows) == 4, "\n".join(rows)  # four namespaces, no forged row
    assert hostile.SHOWN + "\\x1b[31mRED\\nFAKEROW" in text
    assert "bidi\\u202eevil\\u200dzwj\\u2066iso\\u2069[red]x[/]" in text  # markup as typed
    assert "c1\\x9b31mCONE\\r\\x08\\x01\\x7fDEL" in text
    assert "raw\\xff\\x9bBYTE" in text  # the undecodable bytes, as bytes
    assert "host\\x9b31mCONE" in text
    assert "summary \\x1b]0;OWNED\\x07\\nFAKEROW" in text  # the open incident


@pytest.mark.unprivileged
def test_status_json_keeps_every_field_whole_and_escaped(bad: Hostile) -> None:
    out = run(bad, "status", "--root", str(bad.root), "--json")
    data = json.loads(out.stdout)
    lanes = {ns["lane"] for ns in data["namespaces"]}
    assert lanes == set(hostile.LANES)  # JSON escapes, it does not alter
    assert b"\\u001b]0;OWNED" in out.stdout


@pytest.mark.unprivileged
def test_incidents_list_one_and_markdown_are_inert(bad: Hostile) -> None:
    listed = run(bad, "incidents", "--root", str(bad.root))
    assert len(table_rows(listed.stdout.decode())) == 1
    assert "takeover\\x1b]0;OWNED\\x07" in listed.stdout.decode()

    one = run(bad, "incidents", bad.incident_id, "--root", str(bad.root)).stdout.decode()
    assert "note \\x1b]52;c;T1dORUQ=\\x1b\\\\r\\nFAKEROW \\xff\\x9bBYTE" in one
    assert not any(line.startswith("FAKEROW") for line in one.splitlines())

    md = run(bad, "incidents", bad.incident_id, "--root", str(bad.root), "--markdown")
    text = md.stdout.decode()
    assert text.startswith("# Incident inc\\\\x1b\\[31mRED")
    assert "## What each writer wrote" in text  # the kept contents, shown inert
    assert "\n \\x1b]0;OWNED\\x07\\x1b[2JWIPED\n" in text  # a line of the file, inert
    assert not any(line.startswith("FAKEROW") for line in text.splitlines())
    every = run(bad, "incidents", "--root", str(bad.root), "--markdown")
    # The list is the one-incident report per incident (one format, with its contents).
    assert every.stdout == md.stdout

    as_json = run(bad, "incidents", "--root", str(bad.root), "--json")
    assert json.loads(as_json.stdout)["incidents"][0]["kind"] == f"takeover{hostile.OSC_TITLE}"

    acked = run(bad, "incidents", "--ack", bad.incident_id, "--root", str(bad.root))
    assert acked.returncode == 0 and "inc\\x1b[31mRED" in acked.stdout.decode()
    missing = run(bad, "incidents", f"no{hostile.OSC_TITLE}", "--root", str(bad.root))
    assert missing.returncode == 8 and "OWNED" in missing.stderr.decode()  # not found


@pytest.mark.unprivileged
def test_history_title_and_rows_are_inert(bad: Hostile) -> None:
    out = run(bad, "history", str(bad.written), "--root", str(bad.root))
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr
    assert "shared\\x1b]0;OWNED\\x07.json" in text
    assert len(table_rows(text)) == 2
    missing = run(bad, "history", str(bad.written) + "\x1b[2JWIPED", "--root", str(bad.root))
    assert missing.returncode == 8 and "\\x1b[2JWIPED" in missing.stderr.decode()


@pytest.mark.unprivileged
def test_refusals_roots_and_gate_name_hostile_targets_inert(bad: Hostile) -> None:
    killed = run(bad, "kill", str(bad.released), "--yes")
    assert killed.stdout + killed.stderr  # nothing to kill: it says so, whatever the exit
    refused = run(bad, "clear", str(bad.live), "--yes")
    assert refused.returncode == 3 and b"bidi\\u202eevil" in refused.stderr
    unknown = run(bad, "clear", f"nope{hostile.OSC_TITLE}", "--yes")
    assert unknown.returncode == 8 and b"nope\\x1b]0;OWNED" in unknown.stderr  # not found

    roots = run(bad, "roots", "list")
    assert "root\\x1b[31mRED" in roots.stdout.decode()

    gate = run(bad, "gate", "test", "--lane", hostile.LANE, "--root", str(bad.root))
    assert gate.returncode != 0 and gate.stderr  # no receipt (or no checkout): refused


@pytest.mark.privileged
@as_root
def test_clear_trash_restore_and_purge_are_inert(bad: Hostile) -> None:
    cleared = run(bad, "clear", str(bad.released), "--yes")
    assert cleared.returncode == 0, cleared.stderr
    assert not bad.released.exists()
    listed = run(bad, "trash")
    assert inert(hostile.LANE) in listed.stdout.decode()
    trash_id = re.search(rb"^\s*(\S+)", listed.stdout.splitlines()[1])
    assert trash_id is not None
    restored = run(bad, "restore", trash_id.group(1).decode())
    assert restored.returncode == 0, restored.stderr
    assert bad.released.exists()
    run(bad, "clear", str(bad.released), "--yes")
    purged = run(bad, "purge", "--older-than", "0", "--yes")
    assert purged.returncode == 0, purged.stderr


@pytest.mark.unprivileged
def test_a_missing_command_is_named_inert(bad: Hostile, repo: Path) -> None:
    cmd = f"nothere{hostile.OSC_TITLE}"
    out = run(bad, "run", "--root", str(bad.root), "--lane", "plain", "--", cmd, cwd=repo)
    # 127, or 126 where a folder on PATH cannot be searched (a normal user, /root/...)
    assert out.returncode in (126, 127) and b"nothere\\x1b]0;OWNED" in out.stderr


@pytest.mark.unprivileged
def test_root_meta_is_where_the_fixture_wrote(bad: Hostile) -> None:
    # The fixture's records live where the readers look: a wrong path would make the tests
    # above pass on nothing.
    assert (bad.root / ROOT_META / "incidents.jsonl").is_file()
    assert (bad.root / ROOT_META / "writes.jsonl").is_file()


@pytest.mark.unprivileged
def test_warnings_logged_by_a_command_reach_stderr_inert(tmp_path: Path) -> None:
    # The engine's warnings name paths and lanes; `main` makes logging's stderr handler inert.
    script = (
        "import logging, sys\n"
        "from lanewatch.cli.group import main\n"
        "sys.argv = ['lanewatch', '--version']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "logging.getLogger('lanewatch.x').warning('cannot keep %s', sys.stdin.read())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=hostile.LANE.encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    text = hostile.check_text(out.stderr, "stderr")
    assert text == "cannot keep " + inert(hostile.LANE) + "\n"
