"""The always-on recorder's CPU: quiet, and while another process writes elsewhere.

    python -m tests.bench.fig_service ROOT SECONDS RATE WHERE [warmup=S] PHASE [PHASE ...]

Starts `lanewatch record --service --root ROOT` (its own state folder: the bench's), waits
until it has settled (a second of it under 5 % of a core, after its first lines) and S seconds
more (its start: the first full scans, see `run`), then for each PHASE measures its CPU (every
thread, user + system, from /proc) over SECONDS as a share of one core:

- `quiet`: nothing written anywhere by us (the service figure: 1,000 quiet lanes);
- `foreign`: a writer process rewrites RATE files a second in 20 folders outside every root
  and outside shared temp, on the root's filesystem (a build in a home folder): what kernel
  attribution pays for the writes of others (`foreign_writes`). WHERE is the folder to make
  them in, or `auto`: the home folder, else the checkout's parent, where on that filesystem;
- `foreign_tmp`: the same writer in a folder of shared temp outside every root (another
  user's test suite in /tmp): every such write may be a lane's, so each one reaches us.

Each phase reports the writer's achieved rate, the machine's load average before and after,
and `threads_pct`: each thread's share by its name (the recorder runs under
`tests/bench/named_threads.py`, which gives the kernel each thread's name: `prober`,
`fanotify`...; `main` is the recorder's own loop, `ended` threads that did not live to the
window's end).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.common import REPO, emit, process_cpu, thread_comms, thread_cpu, thread_shares

FOLDERS = 20
FILES_PER_FOLDER = 50

WRITER = r"""
import os, sys, time
base, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
folders, files = int(sys.argv[4]), int(sys.argv[5])
paths = [os.path.join(base, f"d{d:02}", f"f{f:03}") for d in range(folders) for f in range(files)]
for p in paths:
    os.makedirs(os.path.dirname(p), exist_ok=True)
start = time.monotonic()
done = 0
step = 100
while True:
    now = time.monotonic()
    if now - start >= seconds:
        break
    due = start + done / rate
    if due > now:
        time.sleep(due - now)
    for i in range(done, done + step):
        fd = os.open(paths[i % len(paths)], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"w" * (16 + i % 97))
        os.close(fd)
    done += step
took = time.monotonic() - start
print(done, took)
"""


def stat_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of `pid`, every thread."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def foreign_parent(root: Path) -> Path:
    """A folder on the root's filesystem outside shared temp: the home folder, else the repo."""
    dev = os.stat(root).st_dev
    shared = ("/tmp/", "/var/tmp/", "/dev/shm/")
    for cand in (Path.home(), REPO.parent, REPO):
        real = os.path.realpath(cand) + "/"
        try:
            same = os.stat(cand).st_dev == dev
        except OSError:
            continue
        if same and not real.startswith(shared) and os.access(cand, os.W_OK):
            return cand
    raise RuntimeError("no writable folder outside shared temp on the root's filesystem")


def settle(pid: int, timeout: float = 300.0) -> float:
    """Wait until the recorder spends under 5 % of a core over a second; seconds waited."""
    t0 = time.monotonic()
    time.sleep(2.0)
    while time.monotonic() - t0 < timeout:
        c0 = process_cpu(pid)
        time.sleep(1.0)
        if process_cpu(pid) - c0 < 0.05:
            return time.monotonic() - t0
    raise TimeoutError("the recorder did not settle")


def measure(pid: int, seconds: float, writer: list[str] | None) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    proc = None
    if writer is not None:
        proc = subprocess.Popen(writer, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the writer's folders exist, its first folders are marked
    u0, s0 = stat_times(pid)
    threads0 = thread_cpu(pid)
    t0 = time.monotonic()
    time.sleep(seconds)
    u1, s1 = stat_times(pid)
    threads1 = thread_cpu(pid)
    wall = time.monotonic() - t0
    threads = thread_shares(threads0, threads1, thread_comms(pid), wall)
    alive = sum(cpu - threads0.get(tid, 0.0) for tid, cpu in threads1.items())
    gone = (u1 - u0 + s1 - s0) - alive
    if gone > 0:  # threads that ran in the window and ended before its last read
        threads["ended"] = round(gone / wall * 100, 2)
    out: dict[str, Any] = {
        "cpu_share": (u1 - u0 + s1 - s0) / wall,
        "user_share": (u1 - u0) / wall,
        "system_share": (s1 - s0) / wall,
        "threads_pct": threads,
        "seconds": round(wall, 2),
        "load_before": round(load0, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    if proc is not None:
        text, _ = proc.communicate(timeout=seconds + 60)
        done, took = text.split()
        out["writes_per_s"] = round(int(done) / float(took))
    return out


def run(
    root: Path, seconds: float, rate: float, where: str, phases: list[str], warmup: float = 0.0
) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="lanewatch-bench-service-"))
    parent = foreign_parent(root) if where == "auto" else Path(where)
    foreign = Path(tempfile.mkdtemp(prefix=".lanewatch-bench-foreign-", dir=parent))
    out_path = work / "record.out"
    cmd = [sys.executable, "-m", "tests.bench.named_threads", "lanewatch"]  # CPU by thread name
    cmd += ["record", "--service", "--json", "--root", str(root)]
    result: dict[str, Any] = {"foreign_folder": str(foreign)}
    with open(out_path, "wb") as sink:
        rec = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, cwd=work)
    try:
        result["settled_s"] = round(settle(rec.pid), 1)
        # The service as it runs all day, not its start: its first full scans trust no holder
        # yet (a holder is trusted from its third scan) and the engine's second walk may still
        # run. `warmup` (a full scan's cycle in a full run) passes before the first window;
        # each window of 60 s still holds the full scan the service makes every minute.
        time.sleep(warmup)
        result["warmup_s"] = warmup
        for phase in phases:
            if phase == "quiet":
                result[phase] = measure(rec.pid, seconds, None)
                continue
            where = foreign if phase == "foreign" else work / "tmp-writer"
            script = [sys.executable, "-c", WRITER, str(where), str(rate), str(seconds + 1.0)]
            script += [str(FOLDERS), str(FILES_PER_FOLDER)]
            result[phase] = measure(rec.pid, seconds, script)
        if rec.poll() is not None:
            raise RuntimeError(f"the recorder exited with {rec.returncode}")
        with open(out_path, "rb") as f:
            text = f.read().decode(errors="replace")
        result["attribution_kernel"] = '"mode": "kernel"' in text
    finally:
        rec.terminate()
        try:
            rec.wait(10)
        except subprocess.TimeoutExpired:
            rec.kill()
            rec.wait()
        shutil.rmtree(foreign, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str]) -> None:
    phases = argv[4:]
    warmup = 0.0
    if phases and phases[0].startswith("warmup="):
        warmup = float(phases.pop(0).partition("=")[2])
    emit(run(Path(argv[0]), float(argv[1]), float(argv[2]), argv[3], phases, warmup))


if __name__ == "__main__":
    main(sys.argv[1:])
