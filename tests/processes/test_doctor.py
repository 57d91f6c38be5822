"""`lanewatch doctor`: what it says a lane gets is what `run` and `status` then give, as root
and as a normal user. Real lanes, real namespaces, the real kernel's answers; the host's
resolver file and the port settings are the test's own (`$LANEWATCH_HOST_RESOLV`,
`$LANEWATCH_PORT_*`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import read_stamp
from lanewatch.runner import netdns
from tests.conftest import lanewatch
from tests.kits.contractkit import parsed

pytestmark = [pytest.mark.unprivileged, pytest.mark.processes]

NAMES = [
    *("system", "fence", "network", "dns", "cgroup", "attribution", "ports", "roots"),
    *("inotify", "service"),
]


def _checks(cwd: Path, env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    done = lanewatch("doctor", "--json", cwd=cwd, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    data = parsed("doctor", done.stdout)
    assert data["uid"] == os.getuid()
    assert [c["name"] for c in data["checks"]] == NAMES
    return {c["name"]: c for c in data["checks"]}


def test_what_doctor_says_a_lane_gets_is_what_run_and_status_give(repo: Path) -> None:
    checks = _checks(repo)
    show = 'echo "$LANEWATCH_FENCE $LANEWATCH_NET"'
    done = lanewatch(
        "run", "--lane", "doc", "--fence", "net", "--", "sh", "-c", show, cwd=repo, timeout=60
    )
    assert done.returncode == 0, done.stderr
    fence, net = done.stdout.split()
    told = {"ok": "kernel", "degraded": "bwrap", "off": "none"}[checks["fence"]["status"]]
    assert fence == told, (checks["fence"], done.stderr)
    assert (net == "private") == (checks["network"]["status"] == "ok"), (checks, done.stderr)
    status = json.loads(lanewatch("status", "--json", cwd=repo).stdout)
    kernel = status["attribution"]["mode"] == "kernel"
    assert kernel == (checks["attribution"]["status"] == "ok"), (checks["attribution"], status)
    assert checks["system"]["status"] == "ok"
    # The default root, not made before the first run, is not "gone"; the run made it.
    assert checks["roots"]["status"] == "ok", checks["roots"]
    assert _checks(repo)["roots"]["summary"] == "1 watched, all readable"
    stamp = read_stamp(locate("doc", checkout=repo).namespace).stamp
    assert stamp is not None
    assert bool(stamp.cgroup) == (checks["cgroup"]["status"] == "ok"), (checks["cgroup"], stamp)
    if os.geteuid() != 0:
        assert checks["cgroup"]["status"] == "degraded" and checks["cgroup"]["fix"]
    # No service of this test's state folder (test_service_journey.py: one that watches).
    assert (
        checks["service"]["status"] == "degraded" and "service install" in checks["service"]["fix"]
    )
    for c in checks.values():
        assert bool(c["fix"]) == (c["status"] != "ok") or c["name"] == "dns", c


def test_a_loopback_resolver_is_named_and_how_a_net_lane_reaches_it(
    repo: Path, tmp_path: Path
) -> None:
    host = tmp_path / "stub-resolv.conf"
    host.write_text("nameserver 127.0.0.53\nsearch lan\n")
    checks = _checks(repo, {netdns.ENV_HOST_RESOLV: str(host)})
    if checks["network"]["status"] != "ok":
        assert checks["dns"]["status"] == "off"
        pytest.skip(f"no network fence here: {checks['network']['summary']}")
    assert "127.0.0.53" in checks["dns"]["summary"] and netdns.SLIRP_DNS in checks["dns"]["summary"]
    host.write_text("nameserver 192.0.2.1\n")
    plain = _checks(repo, {netdns.ENV_HOST_RESOLV: str(host)})["dns"]
    assert plain["status"] == "ok" and "as they are (192.0.2.1)" in plain["summary"]


def test_port_settings_that_give_no_lease_say_so(repo: Path) -> None:
    off = _checks(repo, {"LANEWATCH_PORT_BLOCK": "0"})["ports"]
    assert off["status"] == "off" and "LANEWATCH_PORT_BLOCK=0" in off["summary"]
    bad = _checks(repo, {"LANEWATCH_PORT_RANGE": "80-90"})["ports"]
    assert bad["status"] == "off" and "LANEWATCH_PORT_RANGE" in bad["summary"]
    good = _checks(repo, {"LANEWATCH_PORT_RANGE": "31000-31999"})["ports"]
    assert good["status"] == "ok" and "31000-31999" in good["summary"]


def test_a_root_that_is_gone_is_named_inert_and_the_table_reads(repo: Path, tmp_path: Path) -> None:
    gone = tmp_path / "root \x1b[31mred"
    gone.mkdir()
    assert lanewatch("roots", "add", str(gone), cwd=repo).returncode == 0
    shutil.rmtree(gone)
    roots = _checks(repo)["roots"]
    assert roots["status"] == "degraded" and "remove" in roots["fix"]
    done = lanewatch("doctor", cwd=repo, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout  # the root's name, made inert
    for name in NAMES:
        assert name in done.stdout
    assert "degraded" in done.stdout and "of 10 ok" in done.stdout


def test_inotify_counts_the_roots_folders_and_the_watches_a_real_watcher_holds(
    repo: Path, tmp_path: Path
) -> None:
    """A real watcher of this user (watchdog's inotify observer on a root of 40 folders) is in
    what doctor counts as held, and the root's folders in what one more watcher needs."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers.inotify import InotifyObserver

    root = tmp_path / "root"
    for n in range(39):  # namespaces, half with a folder inside
        (root / f"ns-{n}" / ("tmp" if n % 2 else "")).mkdir(parents=True)
    (root / "link").symlink_to(tmp_path)  # never followed: not a folder of the root
    assert lanewatch("roots", "add", str(root), cwd=repo).returncode == 0
    listed = json.loads(lanewatch("roots", "list", "--json", cwd=repo).stdout)["roots"]
    folders = sum(
        1 + sum(1 for p in Path(r["path"]).rglob("*") if p.is_dir() and not p.is_symlink())
        for r in listed
        if Path(r["path"]).is_dir()
    )
    before = _checks(repo)["inotify"]
    observer = InotifyObserver()
    observer.schedule(FileSystemEventHandler(), str(root), recursive=True)
    observer.start()
    try:
        after = _checks(repo)["inotify"]
    finally:
        observer.stop()
        observer.join(timeout=30)
    assert after["status"] == "ok", after
    assert f"the roots' {folders:,} folders" in after["summary"], (folders, after)
    held = [int(s.split(" of ")[0].replace(",", "")) for s in _watch_figures(before, after)]
    assert held[1] >= folders, (folders, before, after)  # ours, and any other of this user


def _watch_figures(*checks: dict[str, Any]) -> list[str]:
    """Each check's "N of M watches" figure."""
    return [c["summary"].split(": ", 1)[1].split(" watches")[0] for c in checks]
