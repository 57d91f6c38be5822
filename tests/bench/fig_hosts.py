"""Figure: what the many-host stream adds to write → screen for a remote lane.

    python -m tests.bench.fig_hosts [SAMPLES] [INTERVAL_SECONDS]

Starts its own OpenSSH server on loopback (tests/kits/sshkit.py) and one real `lanewatch run` lane
in a root of its own. One dashboard (`make_app`, headless, 160x50) watches that root twice: the
local engine (`EngineProcess`, as `lanewatch dash`) and a host stream (`ssh far lanewatch
record --json --views` on the same root, as `dash --host far`): the lane is two rows, its local
key and `far:KEY`. For each write (an append to a file of the lane's tmp/) the time from the
write to the first drain whose picture shows it (`last_write` at or after the write), for each
row. Both reach the screen in the frame after that drain, so the difference is what the stream
adds: ssh, the far engine, JSON both ways, the stream's thread. Target: p99 of that ≤ 50 ms.

One JSON line on stdout: {"figure": "host_stream_added", "unit": "ms", "value": p99 added,
"target": 50, "ok", "detail": {local, remote, added: p50/p90/p99/max}}.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lanewatch.engine.process import EngineProcess
from lanewatch.hosts.config import Host
from lanewatch.hosts.farviews import remote_key
from lanewatch.hosts.many import ManyHosts
from lanewatch.hosts.stream import HostStream
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import read_stamp
from lanewatch.tui.app import make_app
from tests.bench.common import SCREEN, emit, summary_ms
from tests.conftest import wait_for
from tests.kits.sshkit import far_command, make_server, skip_reason

TARGET_MS = 50.0


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def start_lane(work: Path, root: Path) -> tuple[subprocess.Popen[bytes], Path]:
    repo = work / "repo"
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    _git(
        "-c",
        "user.email=b@b",
        "-c",
        "user.name=b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "0",
        cwd=repo,
    )
    from lanewatch.lanes.checkout import resolve_checkout

    checkout = resolve_checkout(str(repo)).checkout_id
    args = [sys.executable, "-m", "lanewatch", "run", "--root", str(root), "--lane", "bench"]
    proc = subprocess.Popen(
        [*args, "--fence", "none", "--", "sleep", "3600"],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        process_group=0,
    )
    ns = root.resolve() / namespace_name(checkout, "bench")

    def ready() -> bool:
        s = read_stamp(ns).stamp
        return s is not None and s.child_pid is not None

    wait_for(ready, 30, what="the bench lane")
    return proc, ns


async def measure(samples: int, interval: float, work: Path) -> dict[str, Any]:
    root = work / "root"
    root.mkdir()
    server = make_server(work / "ssh")
    os.environ["LANEWATCH_SSH"] = server.ssh
    lane, ns = start_lane(work, root)
    local_key, far_key = str(ns), remote_key("far", str(ns))
    stream = HostStream(Host("far", "far", far_command(work / "far", root)), roots=[str(root)])
    app = make_app([root], engine=ManyHosts(EngineProcess([root]), [stream]))
    local: list[float] = []
    remote: list[float] = []
    added: list[float] = []
    pending: dict[str, float] = {}  # key -> when the write it waits for was made
    seen: dict[str, float] = {}
    try:
        async with app.run_test(size=SCREEN) as pilot:
            apply_delta = app.main.rows.apply

            def timed_apply(delta: Any) -> None:
                apply_delta(delta)
                now = time.time()
                for key, t_write in list(pending.items()):
                    v = app.picture.namespaces.get(key)
                    if v is not None and v.last_write is not None and v.last_write >= t_write:
                        seen[key] = now - t_write
                        del pending[key]

            app.main.rows.apply = timed_apply  # type: ignore[method-assign]
            deadline = time.monotonic() + 90
            while not {local_key, far_key} <= set(app.picture.namespaces):
                if time.monotonic() > deadline:
                    raise TimeoutError("both rows of the lane never showed")
                await pilot.pause(0.05)
            target = ns / "tmp" / "bench.log"
            target.parent.mkdir(exist_ok=True)
            for i in range(samples):
                await pilot.pause(interval)
                seen.clear()
                t_write = time.time()
                pending.update({local_key: t_write, far_key: t_write})
                with target.open("ab") as f:
                    f.write(b"x" * (64 + i))
                deadline = time.monotonic() + 10
                while pending and time.monotonic() < deadline:
                    await pilot.pause(0.002)
                if local_key in seen and far_key in seen:
                    local.append(seen[local_key])
                    remote.append(seen[far_key])
                    added.append(max(0.0, seen[far_key] - seen[local_key]))
                pending.clear()
    finally:
        lane.terminate()
        lane.wait(timeout=30)
        server.stop()
    p99 = summary_ms(added).get("p99_ms")
    return {
        "figure": "host_stream_added",
        "unit": "ms",
        "value": p99,
        "target": TARGET_MS,
        "ok": None if p99 is None else p99 <= TARGET_MS,
        "detail": {
            "samples": samples,
            "measured": len(added),
            "local": summary_ms(local),
            "remote": summary_ms(remote),
            "added": summary_ms(added),
            "stream_lines": stream.lines,
        },
    }


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    reason = skip_reason()
    if reason:
        emit({"figure": "host_stream_added", "value": None, "ok": None, "note": reason})
        return
    with tempfile.TemporaryDirectory(prefix="lanewatch-fig-hosts-") as work:
        os.environ["LANEWATCH_STATE_DIR"] = str(Path(work) / "state")
        emit(asyncio.run(measure(samples, interval, Path(work))))


if __name__ == "__main__":
    main()
