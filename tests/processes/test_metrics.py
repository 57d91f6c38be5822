"""Prometheus metrics of the engine (engine/metrics.py, docs/metrics.md): the exposition read back
with prometheus_client's own parser, `lanewatch record --metrics` over HTTP and as a textfile,
and a real Prometheus server scraping it (Debian's `prometheus`; skipped when it is missing)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch import __version__
from lanewatch.engine import metrics
from lanewatch.lanes.scheme import SCHEME_VERSION
from tests.conftest import LANEWATCH, wait_for
from tests.kits.actionkit import register_root, released_namespace
from tests.kits.enginekit import make_stamp, running, start_lane, stop_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and sorted labels (prometheus_client's parser)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def lanes(got: Samples, root: Path, state: str) -> float:
    return got[("lanewatch_lanes", (("root", str(root)), ("state", state)))]


def dead_pid() -> int:
    """A pid that was a process of ours and is reaped now (a dead owner)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=-1)
    return int(proc.stdout)


@pytest.fixture
def lane_root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def test_the_exposition_is_the_engines_picture(
    repo: Path, lane_root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    live = start_lane(procs, repo, lane_root, "agent-1")  # a real `lanewatch run`
    released = released_namespace(lane_root, "done")  # released cleanly, 3 files kept
    crashed = make_stamp(lane_root, "crashed", pid=dead_pid())  # its owner is dead: stale
    try:
        with running([lane_root]) as (engine, rec):
            root = lane_root.resolve()
            wait_for(lambda: (v := rec.view(released)) is not None and v.bytes, what="sizes")
            registry = metrics.registry_for(lambda: engine)
            got = samples(generate_latest(registry).decode())
            assert lanes(got, root, "live") == 1
            assert lanes(got, root, "released") == 1 and lanes(got, root, "stale") == 1
            assert lanes(got, root, "orphan") == 0  # every state is there, zeros too
            views = [rec.view(released), rec.view(crashed)]
            stale = sum(v.bytes or 0 for v in views if v is not None)
            assert stale > 0
            assert got[("lanewatch_stale_bytes", (("root", str(root)),))] == stale
            assert got[("lanewatch_scheme_version", ())] == SCHEME_VERSION
            info = (("scheme", str(SCHEME_VERSION)), ("version", __version__))
            assert got[("lanewatch_build_info", info)] == 1
            assert got[("lanewatch_engine_up", ())] == 1
            modes = {m: got[("lanewatch_attribution_mode", (("mode", m),))] for m in metrics.MODES}
            assert modes[engine.attribution] == 1 and sum(modes.values()) == 1
            health = (("root", str(root)), ("status", "ok"))
            assert got[("lanewatch_root_health", health)] == 1
            age = got[("lanewatch_last_change_age_seconds", ())]
            assert 0 <= age < 60
            open_ = (("grade", "known"), ("kind", "cross-lane-write"), ("status", "open"))
            assert got[("lanewatch_incidents", open_)] == 0
        # The engine stopped: the collector says so instead of showing the last picture as up.
        assert samples(generate_latest(registry).decode())[("lanewatch_engine_up", ())] == 0
    finally:
        stop_lane(live)


def test_stale_metrics_are_what_clear_stale_dry_run_lists(
    repo: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """lanewatch_stale_bytes says "what `clear --stale` would free": the dry run lists the
    same namespaces, the same bytes (apparent and on disk). Formerly the dry run said
    "nothing to clear" beside released and orphan namespaces the metric counted."""
    root = register_root(tmp_path / "root")
    live = start_lane(procs, repo, root, "agent-1")  # live: neither counts it
    released = released_namespace(root, "done", files=40)
    crashed = make_stamp(root, "crashed", pid=dead_pid())
    (crashed / "tmp").mkdir()
    (crashed / "tmp" / "left.bin").write_bytes(b"x" * 30_000)
    orphan = root / "no-stamp"  # private, as lanewatch makes namespaces
    (orphan / "scratch").mkdir(parents=True, mode=0o700)
    orphan.chmod(0o700)
    (orphan / "scratch" / "junk").write_bytes(b"j" * 5_000)
    try:
        with running([root]) as (engine, rec):
            wait_for(
                lambda: all(
                    (v := rec.view(ns)) is not None and v.allocated
                    for ns in (released, crashed, orphan)
                ),
                what="sizes",
            )
            got = samples(generate_latest(metrics.registry_for(lambda: engine)).decode())
        dry = subprocess.run(
            [*LANEWATCH, "clear", "--stale", "--dry-run", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert dry.returncode == 0, dry.stderr
        rows = json.loads(dry.stdout)["results"]
        assert {r["outcome"] for r in rows} == {"would-clear"}
        assert {r["key"] for r in rows} == {str(released), str(crashed), str(orphan)}
        label = (("root", str(root)),)
        on_disk = got[("lanewatch_stale_allocated_bytes", label)]
        assert on_disk == sum(r["allocated_bytes"] for r in rows) > 0
        assert got[("lanewatch_stale_bytes", label)] == sum(r["bytes"] for r in rows)
        assert got[("lanewatch_lane_allocated_bytes", label)] > on_disk  # the live lane too
    finally:
        stop_lane(live)


def test_metrics_addresses() -> None:
    assert metrics.parse_address("9464") == ("127.0.0.1", 9464)  # loopback unless named
    assert metrics.parse_address(":9464") == ("127.0.0.1", 9464)
    assert metrics.parse_address("0.0.0.0:1") == ("0.0.0.0", 1)
    assert metrics.parse_address("[::1]:9464") == ("::1", 9464)
    for bad in ("host:", "host:http", "1:70000", ""):
        with pytest.raises(ValueError, match="ADDR:PORT"):
            metrics.parse_address(bad)


class Recording:
    """`lanewatch record --json` with metrics on, its lines read as they come."""

    def __init__(self, root: Path, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*LANEWATCH, "record", "--json", "--root", str(root), *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the first line says where the metrics are
        assert line, self.proc.stderr.read() if self.proc.stderr else ""
        self.where = json.loads(line)
        assert self.where["type"] == "metrics", self.where

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=20)


@pytest.fixture
def recording(repo: Path, lane_root: Path, tmp_path: Path) -> Iterator[Recording]:
    (tmp_path / "textfile").mkdir()
    rec = Recording(
        lane_root,
        repo,
        "--metrics",
        "127.0.0.1:0",
        "--metrics-textfile",
        str(tmp_path / "textfile" / "lanewatch.prom"),
    )
    try:
        yield rec
    finally:
        rec.stop()


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=5) as response:
        return samples(response.read().decode())


def test_record_serves_metrics_and_keeps_a_textfile(
    repo: Path, lane_root: Path, recording: Recording, procs: list[subprocess.Popen[bytes]]
) -> None:
    rec = recording
    try:
        url, textfile = rec.where["url"], Path(rec.where["textfile"])
        assert url.startswith("http://127.0.0.1:")
        root = lane_root.resolve()
        assert lanes(scrape(url), root, "live") == 0
        live = start_lane(procs, repo, lane_root, "agent-1")
        wait_for(lambda: lanes(scrape(url), root, "live") == 1, 20, what="a live lane scraped")
        # The textfile follows (a changed picture: within TEXTFILE_MIN_GAP of the change).
        wait_for(
            lambda: textfile.exists() and lanes(samples(textfile.read_text()), root, "live") == 1,
            20,
            what="the textfile shows the lane",
        )
        # Written atomically: nothing but the file itself is ever left beside it.
        assert [p.name for p in textfile.parent.iterdir()] == ["lanewatch.prom"]
        stop_lane(live)
        wait_for(lambda: lanes(scrape(url), root, "live") == 0, 20, what="the lane ended")
        # Counted under its new state (released, or headless while its CMD group winds down).
        assert sum(v for k, v in scrape(url).items() if k[0] == "lanewatch_lanes") == 1
    finally:
        rec.stop()
    last = samples(textfile.read_text())  # the last picture, written as it stopped
    assert last[("lanewatch_engine_up", ())] == 0
    assert [p.name for p in textfile.parent.iterdir()] == ["lanewatch.prom"]


def test_a_bad_or_taken_metrics_address_is_a_clear_error(repo: Path, lane_root: Path) -> None:
    bad = subprocess.run(
        [*LANEWATCH, "record", "--root", str(lane_root), "--metrics", "localhost:http"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode == 2 and "ADDR:PORT" in bad.stderr, bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*LANEWATCH, "record", "--root", str(lane_root), "--metrics", f"127.0.0.1:{port}"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 1 and f"cannot serve metrics on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_run_never_loads_prometheus_client(repo: Path, lane_root: Path) -> None:
    """`lanewatch run`'s start time matters: prometheus_client is only for `record --metrics`."""
    code = (
        "import sys\n"
        "from lanewatch.cli.group import main\n"
        "sys.argv = ['lanewatch', 'run', '--root', sys.argv[1], '--fence', 'none', '--', 'true']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "assert 'prometheus_client' not in sys.modules, 'run imported prometheus_client'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(lane_root)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr


# -- a real Prometheus server ----------------------------------------------------------------


def free_port() -> int:
    """A loopback port free now (Prometheus takes no port 0; the race is a retry at worst)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def query(base: str, promql: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?query={urllib.parse.quote(promql)}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
    except OSError:
        return []  # not up yet
    assert body["status"] == "success", body
    return body["data"]["result"]  # type: ignore[no-any-return]


def by_state(results: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]["state"]: float(r["value"][1]) for r in results}


PROMETHEUS = shutil.which("prometheus") or (
    "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None
)


@pytest.mark.skipif(
    PROMETHEUS is None,
    reason="no `prometheus` binary (Debian: apt-get install prometheus; .ci/run installs it)",
)
def test_a_real_prometheus_scrapes_the_lane_counts(
    repo: Path,
    lane_root: Path,
    tmp_path: Path,
    recording: Recording,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    assert PROMETHEUS is not None
    target = urllib.parse.urlsplit(recording.where["url"]).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: lanewatch\n"
        "    scrape_interval: 1s\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    start_lane(procs, repo, lane_root, "agent-1")
    start_lane(procs, repo, lane_root, "agent-2")
    port = free_port()
    server = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "prometheus.log", "wb"),  # noqa: SIM115 (the server owns it)
        process_group=0,
    )
    procs.append(server)
    base = f"http://127.0.0.1:{port}"
    root = str(lane_root.resolve())
    promql = f'sum by (state) (lanewatch_lanes{{job="lanewatch",root="{root}"}})'

    def counted() -> bool:
        assert server.poll() is None, (tmp_path / "prometheus.log").read_text()
        got = by_state(query(base, promql))
        return got.get("live") == 2 and got.get("stale") == 0

    wait_for(counted, 60, interval=0.5, what="Prometheus returns 2 live lanes")
    got = by_state(query(base, promql))
    assert set(got) >= {"live", "hung", "stale", "orphan", "released", "unknown"}
    up = query(base, 'up{job="lanewatch"}')
    assert up and float(up[0]["value"][1]) == 1
    scheme = query(base, "lanewatch_scheme_version")
    assert scheme and float(scheme[0]["value"][1]) == SCHEME_VERSION
    assert not math.isnan(float(query(base, "lanewatch_last_change_age_seconds")[0]["value"][1]))


def test_the_sample_alerts_use_metrics_that_exist_and_disk_bytes(
    lane_root: Path, tmp_path: Path
) -> None:
    """docs/metrics.md's alert rules: every lanewatch metric they name is exposed, the stale
    alert fires on bytes on disk (on apparent size it fired ~50x late), and promtool
    accepts the file (where Debian's prometheus is installed)."""
    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    rules = doc.split("# lanewatch-alerts.yml\n", 1)[1].split("```", 1)[0]
    with running([lane_root]) as (engine, _):
        exposed = {
            family.name
            for family in text_string_to_metric_families(
                generate_latest(metrics.registry_for(lambda: engine)).decode()
            )
        }
    named = set(re.findall(r"\b(lanewatch_[a-z_]+)", rules))
    counters = {n.removesuffix("_total") for n in named}
    assert named and counters <= exposed, counters - exposed
    stale = rules.split("alert: LanewatchStaleBytes", 1)[1].split("- alert:", 1)[0]
    assert "lanewatch_stale_allocated_bytes" in stale
    promtool = shutil.which("promtool")
    if promtool is not None:
        path = tmp_path / "lanewatch-alerts.yml"
        path.write_text(rules)
        checked = subprocess.run(
            [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
