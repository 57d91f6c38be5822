"""Figures `fence` and `run_start`: what the fence adds to `lanewatch run -- true`, and what
`run` itself costs.

    python -m tests.bench.fig_fence WORK REPS

In a git repository made under WORK (with its own root): `lanewatch run --fence none -- true`
against `lanewatch run -- true` (fenced: the kernel way, or bubblewrap where only that works),
and `python -c pass` (the interpreter alone, the floor of any `run`). After one untimed run of
each, the three alternate REPS times; medians (the figures) and minimums of wall-clock time,
start to exit, and the load average before and after (the machine may be shared).

Bytecode is written and used as in any installed lanewatch: PYTHONDONTWRITEBYTECODE, when the
caller has it, is left out of the runs' environment (with it, each run compiles every module
of lanewatch again: about 80 ms more, which no user pays).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.common import emit


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(args: list[str]) -> None:
    work, reps = Path(args[0]), int(args[1])
    repo = work / "fence-repo"
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["LANEWATCH_ROOT"] = str(work / "fence-root")
    load_before = os.getloadavg()[0]
    run = [sys.executable, "-m", "lanewatch", "run", "--lane", "bench"]
    measures = {
        "python": [sys.executable, "-c", "pass"],
        "unfenced": [*run, "--fence", "none", "--", "true"],
        "fenced": [*run, "--", "true"],
    }
    times: dict[str, list[float]] = {name: [] for name in measures}
    for argv in measures.values():
        _timed(argv, repo, env)  # warm the caches
    for _ in range(reps):
        for name, argv in measures.items():
            times[name].append(_timed(argv, repo, env))
    how = subprocess.run(
        [*run, "--", "sh", "-c", 'echo "$LANEWATCH_FENCE"'],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    result: dict[str, Any] = {name: statistics.median(t) for name, t in times.items()}
    result.update({f"{name}_min": min(t) for name, t in times.items()})
    result["how"] = how
    # The interpreter's build moves this figure by a third: an unoptimized one (pyenv's
    # default, no PGO) against a distribution's (docs/performance.md, run_start).
    result["interpreter"] = f"{sys.version.split()[0]} {os.path.realpath(sys.executable)}"
    result["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    result.update({f"{name}_s": [round(x, 4) for x in t] for name, t in times.items()})
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
