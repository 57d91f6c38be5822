"""Figure `guard`: what `lanewatch guard` costs an agent before each tool call.

    python -m tests.bench.fig_guard WORK CALLS

In a git repository made under WORK, with a root holding two lanes' namespaces (A, whose
environment the calls get, as Claude Code's hook inherits its agent's, and B): CALLS calls of
`python -m lanewatch guard`, each fed a real PreToolUse payload on stdin, rotating a Write into
A's own namespace (passes), a Write into B's (refused, exit 2), an Edit in the checkout and a
Bash redirection into shared temp (A unfenced: refused). After a few untimed calls, every call
is timed, start to exit (wall clock, and the CPU it used); the same for `python -c pass` (the
floor: the interpreter alone), alternating. Exit codes are checked: a wrong verdict fails the
figure.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.bench.common import emit, quantile

WARM = 5


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(
    argv: list[str], data: bytes, env: dict[str, str], cwd: Path
) -> tuple[float, int, float]:
    """Wall clock, exit code and CPU (user + system) of one run."""
    c0, t0 = _cpu(), time.perf_counter()
    done = subprocess.run(argv, input=data, env=env, cwd=cwd, capture_output=True)
    return time.perf_counter() - t0, done.returncode, _cpu() - c0


def main(args: list[str]) -> None:
    from lanewatch.lanes.checkout import resolve_checkout
    from lanewatch.lanes.names import namespace_name

    work, calls = Path(args[0]), int(args[1])
    repo = work / "guard-repo"
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    root = (work / "guard-root").resolve()
    cid = resolve_checkout(repo).checkout_id
    mine, theirs = (root / namespace_name(cid, lane) for lane in ("A", "B"))
    for ns in (mine, theirs):
        (ns / "tmp").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(
        LANEWATCH_ROOT=str(root), LANEWATCH_LANE="A", LANEWATCH_NAMESPACE=str(mine),
        LANEWATCH_CHECKOUT=str(repo.resolve()), LANEWATCH_FENCE="none",
    )  # fmt: skip

    def hook(tool: str, **given: Any) -> bytes:
        return json.dumps(
            {
                "session_id": "bench",
                "transcript_path": str(work / "t.jsonl"),
                "cwd": str(repo),
                "permission_mode": "default",
                "hook_event_name": "PreToolUse",
                "tool_name": tool,
                "tool_input": given,
                "tool_use_id": "toolu_bench",
            }
        ).encode()

    cases = [
        (hook("Write", file_path=str(mine / "tmp" / "r.json"), content="x"), 0),
        (hook("Write", file_path=str(theirs / "tmp" / "r.json"), content="x"), 2),
        (hook("Edit", file_path=str(repo / "README"), old_string="a", new_string="b"), 0),
        (hook("Bash", command="make > /tmp/build.log 2>&1", description="build"), 2),
    ]
    guard = [sys.executable, "-m", "lanewatch", "guard"]
    python = [sys.executable, "-c", "pass"]
    load_before = os.getloadavg()[0]
    for i in range(WARM):
        _timed(guard, cases[i % len(cases)][0], env, repo)
        _timed(python, b"", env, repo)
    times: list[float] = []
    floor: list[float] = []
    cpu: list[float] = []
    floor_cpu: list[float] = []
    wrong = 0
    for i in range(calls):
        data, expected = cases[i % len(cases)]
        took, code, used = _timed(guard, data, env, repo)
        times.append(took)
        cpu.append(used)
        wrong += code != expected
        took, _, used = _timed(python, b"", env, repo)
        floor.append(took)
        floor_cpu.append(used)
    emit(
        {
            "calls": calls,
            "wrong": wrong,
            "p50": statistics.median(times),
            "p90": quantile(times, 0.90),
            "p99": quantile(times, 0.99),
            "max": max(times),
            "floor_p50": statistics.median(floor),
            "floor_p99": quantile(floor, 0.99),
            # CPU (user + system) of each call: what the call costs a quiet machine, whatever
            # the load of others did to its wall clock
            "cpu_p50": statistics.median(cpu),
            "cpu_p99": quantile(cpu, 0.99),
            "floor_cpu_p50": statistics.median(floor_cpu),
            "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        }
    )


if __name__ == "__main__":
    main(sys.argv[1:])
