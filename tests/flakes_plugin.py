"""The pytest half of the flake hunt (tests/flakes.py loads it with `-p tests.flakes_plugin`).

It shuffles the collected tests with the seed in $LANEWATCH_FLAKES_SEED (the same seed in every
xdist worker, so they agree on the order, as xdist requires) and, in the process that gathers
the results (the controller under xdist), appends one JSON line per test phase to
$LANEWATCH_FLAKES_LOG. Inert when those variables are unset."""

from __future__ import annotations

import json
import os
import random

import pytest

MESSAGE_CHARS = 300
_worker = False  # this process is an xdist worker (its reports reach the controller)


def pytest_configure(config: pytest.Config) -> None:
    # By the config, not by $PYTEST_XDIST_WORKER: a hunt started from inside a worker (the
    # suite's own test of this tool under `-n 2`) inherits that variable in its controller.
    global _worker
    _worker = hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seed = os.environ.get("LANEWATCH_FLAKES_SEED")
    if seed is not None:
        random.Random(int(seed)).shuffle(items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    log = os.environ.get("LANEWATCH_FLAKES_LOG")
    if not log or _worker:
        return  # a worker's reports reach the controller, which writes them once
    outcome = report.outcome
    if hasattr(report, "wasxfail") and report.skipped:
        outcome = "passed"  # an expected failure (xfail) is the test passing
    line = {"nodeid": report.nodeid, "when": report.when, "outcome": outcome}
    if outcome == "failed":
        line["message"] = failure_message(report)
    with open(log, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def failure_message(report: pytest.TestReport) -> str:
    """The line that says what went wrong (pytest's crash line: `AssertionError: …`)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr).strip()
    first = " ".join(text.split())
    return f"{report.when}: {first[:MESSAGE_CHARS]}"
