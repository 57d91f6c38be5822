"""Figures `fence` and `run_start`: what the fence adds to `lanewatch run -- true`, and what
`run` itself costs.

    python -m tests.bench.fig_fence WORK REPS

In a git repository made under WORK (with its own root): `lanewatch run --fence none -- true`
against `lanewatch run -- true` (fenced: the kernel way, or bubblewrap where only that works),
and `python -c pass` (the interpreter alone, the floor of any `run`). After one untimed run of
each, the three alternate REPS times; medians (the figures) and minimums of wall-clock time,
start to exit, and the load average before and after (the machine may be shared). The
repository, the timing and the environment's bytecode rule: `run_timing.py`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.bench.common import emit
from tests.bench.run_timing import RUN, alternate, every_time, medians, run_repo, said


def main(args: list[str]) -> None:
    work, reps = Path(args[0]), int(args[1])
    repo, env = run_repo(work, "fence")
    load_before = os.getloadavg()[0]
    measures = {
        "python": [sys.executable, "-c", "pass"],
        "unfenced": [*RUN, "--fence", "none", "--", "true"],
        "fenced": [*RUN, "--", "true"],
    }
    times = alternate(measures, reps, repo, env)
    how = said([*RUN, "--", "sh", "-c", 'echo "$LANEWATCH_FENCE"'], repo, env)
    result = medians(times)
    result["how"] = how
    # The interpreter's build moves this figure by a third: an unoptimized one (pyenv's
    # default, no PGO) against a distribution's (docs/performance.md, run_start).
    result["interpreter"] = f"{sys.version.split()[0]} {os.path.realpath(sys.executable)}"
    result["load"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    result.update(every_time(times))
    emit(result)


if __name__ == "__main__":
    main(sys.argv[1:])
