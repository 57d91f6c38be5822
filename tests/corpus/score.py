"""The corpus's figures: which recorded incidents are the planted ones, which were invented.

    python -m tests.corpus.score [--no-plant] [--unfenced] [--json] [--keep DIR]

runs the whole corpus as the current user (as root: kernel attribution) and prints planted,
found, invented, precision and recall, then each invented incident. Exit 0 when nothing was
invented and every planted collision was found, 1 otherwise, 2 when the corpus could not run
here (offline with no cached sdists). The test (`test_corpus.py`) and the benchmark's `corpus`
figure read the same `Score`.

An incident is a planted one's when its kind is the plant's, and its victim (the namespace
written into or taken over) and path, where the plant names them, are the plant's. Precision:
of the incidents recorded, the share that are planted ones; recall: of the planted, the share
found.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests.corpus` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@dataclass(frozen=True)
class Plant:
    kind: str
    what: str  # for people
    victim: str | None = None  # the namespace (incident `victim`)
    path: str | None = None  # the file (incident `path`, or an evidence path)


@dataclass(frozen=True)
class Score:
    planted: int
    found: int
    invented: int
    incidents: int
    precision: float | None  # None: no incident at all
    recall: float | None  # None: nothing planted
    missed: tuple[str, ...]  # the plants not found (their `what`)
    invented_ids: tuple[str, ...]

    def ok(self) -> bool:
        return self.invented == 0 and self.found == self.planted

    def line(self) -> str:
        def fmt(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.2f}"

        return (
            f"planted {self.planted}  found {self.found}  invented {self.invented}  "
            f"precision {fmt(self.precision)}  recall {fmt(self.recall)}"
        )


def _paths(incident: dict[str, Any]) -> set[str]:
    """The paths an incident names: its own, its evidence's (`incidents --json`), the latest
    write's (a `record --json` line, which carries no evidence)."""
    latest = incident.get("latest") or {}
    found = {incident.get("path"), latest.get("path")}
    found |= {e.get("path") for e in incident.get("evidence") or ()}
    return {p for p in found if isinstance(p, str)}


def matches(plant: Plant, incident: dict[str, Any]) -> bool:
    if incident.get("kind") != plant.kind:
        return False
    if plant.victim is not None and incident.get("victim") != plant.victim:
        return False
    return plant.path is None or plant.path in _paths(incident)


def score(plants: Sequence[Plant], incidents: Sequence[dict[str, Any]]) -> Score:
    found = [p for p in plants if any(matches(p, i) for i in incidents)]
    invented = [i for i in incidents if not any(matches(p, i) for p in plants)]
    true = len(incidents) - len(invented)
    return Score(
        planted=len(plants),
        found=len(found),
        invented=len(invented),
        incidents=len(incidents),
        precision=round(true / len(incidents), 3) if incidents else None,
        recall=round(len(found) / len(plants), 3) if plants else None,
        missed=tuple(p.what for p in plants if p not in found),
        invented_ids=tuple(str(i.get("id")) for i in invented),
    )


def describe(incident: dict[str, Any]) -> str:
    """One line for an incident: kind, id, its summary (the untrusted text kept printable)."""
    summary = str(incident.get("summary") or "")
    text = f"{incident.get('kind')} {incident.get('id')}: {summary}"
    return text.encode("unicode_escape").decode("ascii")


def main(argv: list[str] | None = None) -> int:
    from tests.corpus.sdists import Unavailable
    from tests.corpus.session import run_corpus

    parser = argparse.ArgumentParser(description="the corpus's precision and recall")
    parser.add_argument("--no-plant", action="store_true", help="run the corpus alone")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--keep", type=Path, help="work in DIR (created) and keep it")
    parser.add_argument(
        "--unfenced", action="store_true", help="every workload with --fence none (no fence here)"
    )
    args = parser.parse_args(argv)
    try:
        outcome = run_corpus(
            args.keep, plant=not args.no_plant, unfenced=args.unfenced, keep=bool(args.keep)
        )
    except Unavailable as exc:
        print(f"corpus: cannot run here: {exc}", file=sys.stderr)
        return 2
    result = outcome.score
    if args.json:
        print(json.dumps({**outcome.to_json(), "score": asdict(result)}, indent=2))
    else:
        print(outcome.summary())
        print(result.line())
        for incident in outcome.incidents:
            if str(incident.get("id")) in result.invented_ids:
                print(f"  invented: {describe(incident)}")
        for what in result.missed:
            print(f"  missed: {what}")
    return 0 if result.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
