"""Figure `corpus`: invented incidents on the real-workload corpus, with its
precision and recall.

    python -m tests.bench.fig_corpus WORK

Runs tests/corpus (real third-party work in lanes of two checkouts under `lanewatch record`,
plus six planted collisions) in WORK, as the current user (as root: kernel attribution), and
answers with the score `python -m tests.corpus.score` prints. Offline with no cached sdists it
answers with a note instead.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from tests.bench.common import emit
from tests.corpus.score import describe
from tests.corpus.sdists import Unavailable
from tests.corpus.session import run_corpus


def main(args: list[str]) -> None:
    try:
        outcome = run_corpus(Path(args[0]) / "corpus")
    except Unavailable as exc:
        emit({"note": f"the corpus cannot run here: {exc}"})
        return
    invented = [describe(i) for i in outcome.incidents if i["id"] in outcome.score.invented_ids]
    emit(
        {
            **asdict(outcome.score),
            "invented_incidents": invented[:20],
            "attribution": outcome.attribution,
            "seconds": round(outcome.seconds, 1),
            "cpu_seconds": round(outcome.cpu, 1),
            "workloads": {k: v["seconds"] for k, v in outcome.workloads.items()},
            "phases": outcome.phases,
            "failures": [f[:300] for f in outcome.failures],
            "versions": outcome.versions,
        }
    )


if __name__ == "__main__":
    main(sys.argv[1:])
