"""`lanewatch status` and `lanewatch incidents` as scripts and people use them: the real CLI in
a subprocess, its JSON, its exit codes, untrusted names printed as typed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lanewatch.lanes.stamp import read_stamp
from lanewatch.linux.procid import ProcessIdentity
from tests.conftest import LANEWATCH
from tests.kits.enginekit import make_stamp, start_lane, stop_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

STATUS_KEYS = {"schema", "generated_at", "host", "roots", "namespaces", "incidents"}
STATUS_KEYS |= {"open_incidents", "exit_code", "attribution", "service"}
NAMESPACE_KEYS = {
    "key", "root", "name", "lane", "checkout_id", "checkout_path", "host", "pid", "user",
    "command", "state", "reason", "grade", "stamp_status", "started_at", "age", "heartbeat_at",
    "heartbeat_age", "heartbeat_interval", "released_at", "exit_code", "last_write", "files",
    "bytes", "incident_ids", "uid", "mismatch", "fence", "fence_note", "fence_private",
    "members", "from_host", "scheme", "allocated_bytes", "lease", "ports",
    # the footprint
    "membership", "footprint", "cpu_history", "cpu_quiet_since", "disk_growth", "idle_for",
}  # fmt: skip


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args], cwd=cwd, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def quiet_owner(procs: list[subprocess.Popen[bytes]]) -> dict[str, int]:
    """A live owner that holds nothing: not the pytest worker, whose other tests' children
    (descendants of the "owner") may hold files in shared temp and read as unbound writers."""
    sleeper = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    procs.append(sleeper)
    me = ProcessIdentity.of(sleeper.pid)
    return {"pid": me.pid, "start_ticks": me.start_ticks}


def foreign_receipt(ns: Path) -> None:
    (ns / "receipts").mkdir(exist_ok=True)
    (ns / "receipts" / "test.json").write_text(json.dumps({"checkout_id": "other-0000000000ff"}))


def test_json_schema_and_clean_exit(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    lane = start_lane(procs, repo, root, "worker")
    try:
        out = cli("status", "--root", str(root), "--json", cwd=repo)
    finally:
        stop_lane(lane)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (
        set(data) == STATUS_KEYS
        and data["schema"] == "lanewatch.status/1"
        and data["exit_code"] == 0
    )
    (ns,) = data["namespaces"]
    assert set(ns) == NAMESPACE_KEYS
    assert (ns["state"], ns["lane"], ns["pid"]) == ("live", "worker", lane.proc.pid)
    child = read_stamp(Path(ns["key"])).stamp.child_pid  # type: ignore[union-attr]
    assert [m["pid"] for m in ns["members"]] == [child]  # its command (not the runner)
    assert ns["files"] >= 3 and ns["grade"] == "known"
    assert data["roots"] == [
        {"root": str(root), "status": "ok", "detail": "read once, not watched"}
    ]


def test_open_collision_exits_4_until_acknowledged(
    root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    ns = make_stamp(root, "victim", **quiet_owner(procs))
    foreign_receipt(ns)
    out = cli("status", "--root", str(root), "--json", cwd=tmp_path)
    assert out.returncode == 4, out.stderr + out.stdout
    data = json.loads(out.stdout)
    (incident,) = data["incidents"]
    assert data["open_incidents"] == 1 and incident["kind"] == "foreign-receipt"
    assert data["namespaces"][0]["incident_ids"] == [incident["id"]]

    listed = cli("incidents", "--root", str(root), "--json", cwd=tmp_path)
    assert (
        listed.returncode == 0
        and json.loads(listed.stdout)["incidents"][0]["evidence"][0]["sha256"]
    )
    md = cli("incidents", "--root", str(root), "--markdown", incident["id"], cwd=tmp_path)
    assert md.returncode == 0 and md.stdout.startswith(f"# Incident {incident['id']}")
    assert "| time | path |" in md.stdout
    one = cli("incidents", "--root", str(root), incident["id"], cwd=tmp_path)
    assert one.returncode == 0 and "receipt names checkout" in one.stdout

    ack = cli("incidents", "--root", str(root), "--ack", incident["id"], cwd=tmp_path)
    assert ack.returncode == 0, ack.stderr
    again = cli("status", "--root", str(root), "--json", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["incidents"][0]["acknowledged"]


def test_unknown_incident_and_missing_root(root: Path, tmp_path: Path) -> None:
    out = cli("incidents", "--root", str(root), "takeover-000000000000", cwd=tmp_path)
    assert out.returncode == 8 and "no incident" in out.stderr  # not found
    missing = cli("status", "--root", str(tmp_path / "nope"), "--json", cwd=tmp_path)
    assert missing.returncode == 5
    assert json.loads(missing.stdout)["roots"][0]["status"] == "missing"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder of mode 0o000")
def test_a_root_it_cannot_read_is_exit_5_not_a_usage_error(root: Path, tmp_path: Path) -> None:
    root.chmod(0)
    try:
        locked = cli("status", "--root", str(root), "--json", cwd=tmp_path)
        shown = cli("status", "--root", str(root), cwd=tmp_path)
    finally:
        root.chmod(0o700)
    assert locked.returncode == 5, locked.stderr  # README: 5, a root could not be read
    (row,) = json.loads(locked.stdout)["roots"]
    assert row["status"] == "degraded" and "Permission denied" in row["detail"]
    assert shown.returncode == 5 and "degraded" in shown.stdout, shown.stderr


def test_untrusted_names_print_as_typed(
    root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    make_stamp(root, "[red]x[/red]", command=["[bold]boom"], **quiet_owner(procs))
    out = cli("status", "--root", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "[red]x[/red]" in out.stdout
    listed = cli("incidents", "--root", str(root), cwd=tmp_path)
    assert listed.returncode == 0


@pytest.mark.parametrize("columns", [80, 200])
def test_the_table_reads_at_80_columns_and_wide(
    root: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]], columns: int
) -> None:
    """$COLUMNS sets the width (a pipe is wide otherwise): at 80 no line is wider, no word of
    the reason is cut in two ("[kn own ]" was), the size reads as the dashboard's (kB)."""
    make_stamp(root, "agent-with-a-long-name", **quiet_owner(procs))
    ns = make_stamp(root, "done", **quiet_owner(procs))
    foreign_receipt(ns)
    (ns / "blob").write_bytes(b"x" * 5000)
    env = {**os.environ, "COLUMNS": str(columns)}
    out = subprocess.run(
        [*LANEWATCH, "status", "--root", str(root)], cwd=tmp_path, capture_output=True,
        text=True, timeout=60, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert out.returncode == 4, out.stderr + out.stdout  # the foreign receipt is open
    lines = out.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns, out.stdout
    table = out.stdout.split("open incidents")[0]
    words = " ".join(table.split())
    assert "kB" in words and not any(w.endswith("K") and w[0].isdigit() for w in table.split())
    assert "alive" in words, "the reason, whole words"
    assert "[kn" not in table and "[known]" not in table, "the grade is a ? on the state"
    header = next(line for line in lines if "state" in line and "why" in line)
    wide_only = ("host", "age", "files")
    assert all((w in header.split()) == (columns > 80) for w in wide_only), header
    listed = json.loads(cli("status", "--root", str(root), "--json", cwd=tmp_path).stdout)
    ids = [i["id"] for i in listed["incidents"]]
    assert ids and all(i in out.stdout for i in ids), "the open incident IDs, never cut"


@pytest.mark.parametrize("width", ["80", "160"])
def test_one_lane_name_in_two_worktrees_reads_as_two_checkouts(
    repo: Path, tmp_path: Path, root: Path, procs: list[subprocess.Popen[bytes]], width: str
) -> None:
    """`pytest-gw0` of two worktrees named alike (`app`): formerly the table showed two
    identical rows; now its checkout column tells them apart, at 80 columns too."""
    twin = tmp_path / "elsewhere" / "repo"
    twin.parent.mkdir()
    subprocess.run(["git", "worktree", "add", "-q", str(twin), "-b", "side"], cwd=repo, check=True)
    lanes = [start_lane(procs, where, root, "pytest-gw0") for where in (repo, twin)]
    try:
        out = subprocess.run(
            [*LANEWATCH, "status", "--root", str(root)],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": width},
        )
        data = json.loads(cli("status", "--root", str(root), "--json", cwd=repo).stdout)
    finally:
        for lane in lanes:
            stop_lane(lane)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if "pytest-gw0" in line]
    assert len(rows) == 2 and rows[0] != rows[1], out.stdout
    header = next(line for line in out.stdout.splitlines() if " state " in line)
    assert "checkout" in header and "disk" in header, out.stdout
    ids = sorted(ns["checkout_id"] for ns in data["namespaces"])
    labels = [f"repo:{i.rpartition('-')[2][:4]}" for i in ids]
    assert all(any(label in row for row in rows) for label in labels), (labels, out.stdout)
    paths = {ns["checkout_path"] for ns in data["namespaces"]}
    assert paths == {str(repo.resolve()), str(twin.resolve())}  # --json: the whole path
