"""What the `lanewatch run` figures share (`fig_fence`, `fig_netfence`): a git repository of
their own under WORK, with a scratch root of its own, and commands timed as whole processes,
alternating, after one untimed run of each.

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

RUN = [sys.executable, "-m", "lanewatch", "run", "--lane", "bench"]


def run_repo(work: Path, name: str) -> tuple[Path, dict[str, str]]:
    """`WORK/NAME-repo` (a git repository) and the runs' environment (root `WORK/NAME-root`)."""
    repo = work / f"{name}-repo"
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["LANEWATCH_ROOT"] = str(work / f"{name}-root")
    return repo, env


def said(argv: list[str], repo: Path, env: dict[str, str]) -> str:
    """What `argv` prints, stripped (how a run was fenced: `echo "$LANEWATCH_FENCE"`)."""
    return subprocess.run(
        argv, cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def alternate(
    measures: dict[str, list[str]], reps: int, repo: Path, env: dict[str, str]
) -> dict[str, list[float]]:
    """Each command's wall-clock times, start to exit: one untimed run of each (the caches
    warm), then all of them in turn, `reps` times."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    for argv in measures.values():
        _timed(argv, repo, env)
    for _ in range(reps):
        for name, argv in measures.items():
            times[name].append(_timed(argv, repo, env))
    return times


def medians(times: dict[str, list[float]]) -> dict[str, Any]:
    """The figures: each command's median (its name) and minimum (`NAME_min`)."""
    result: dict[str, Any] = {name: statistics.median(t) for name, t in times.items()}
    result.update({f"{name}_min": min(t) for name, t in times.items()})
    return result


def every_time(times: dict[str, list[float]]) -> dict[str, list[float]]:
    """The detail: every time of each command (`NAME_s`), in the order they ran."""
    return {f"{name}_s": [round(x, 4) for x in t] for name, t in times.items()}
