"""The corpus: real third-party work in lanes of two checkouts under a recorder
that runs the whole time, plus six planted collisions. Nothing may be invented, and every
planted collision must be found: as root the recorder attributes writes by the kernel; in the
unprivileged tier (.ci/unprivileged) it runs as a normal user and infers them.

The corpus needs the pinned sdists (tests/corpus/sdists.py): cached after the first download;
offline with an empty cache the test skips, saying so. `python -m tests.corpus.score` runs
the same and prints the figures.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from lanewatch.kernel.fanotify import fanotify_available
from tests.corpus.score import describe
from tests.corpus.sdists import Unavailable
from tests.corpus.session import run_corpus

pytestmark = [pytest.mark.corpus, pytest.mark.unprivileged]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("unfenced", [False, True], ids=["fenced", "unfenced"])
def test_the_corpus_invents_no_incident_and_finds_every_planted_one(
    tmp_path: Path, unfenced: bool
) -> None:
    """`unfenced`: every workload with `--fence none`, as where the fence cannot be built."""
    try:
        outcome = run_corpus(tmp_path / "corpus", unfenced=unfenced)
    except Unavailable as exc:
        pytest.skip(f"the corpus cannot run here: {exc}")
    print(outcome.summary())
    print(outcome.score.line())
    assert not outcome.failures, "a workload failed:\n" + "\n\n".join(outcome.failures)
    if os.geteuid() == 0 and fanotify_available()[0]:
        assert outcome.attribution == "kernel"
    invented = [i for i in outcome.incidents if i["id"] in outcome.score.invented_ids]
    kinds = Counter(str(i["kind"]) for i in invented)
    assert not invented, (
        f"{len(invented)} invented incidents ({', '.join(f'{k} {n}' for k, n in kinds.items())})"
        + "; the first 20:\n"
        + "\n".join(describe(i) for i in invented[:20])
    )
    assert not outcome.score.missed, f"planted but not found: {outcome.score.missed}"
    assert outcome.score.found == outcome.score.planted == 6
