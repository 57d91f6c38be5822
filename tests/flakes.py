"""The flake hunt: run chosen tests N times, each time in a new random order, beside CPU, fork
and (asked for) file-write load, and print each test's pass rate (docs/flakes.md).
`.ci/flakes` is the entry point.

    .ci/flakes tests/processes/test_collisions.py -m processes --runs 20
    .ci/flakes --runs 5 --load none tests/processes/test_run_cli.py::test_x   # no load
    .ci/flakes --seed 1234 --runs 1 tests/processes/test_fanotify.py          # replay one order
    .ci/flakes --load cpu=1,fork=1,write=1 tests/processes/test_tail.py      # a busy neighbour

Each run is one `python -m pytest -n 2` (like CI) with tests/flakes_plugin.py, which shuffles
the tests with that run's seed and records every outcome. Exit 0 when every test passed every
run, 1 when one did not, 2 when a run broke (a collection error, an internal error, no outcome
recorded).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    """One test's results over all runs: a run counts when the test passed or failed in it."""

    passes: int = 0
    failures: int = 0
    skips: int = 0
    first_failure: str = ""
    failed_runs: list[int] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return self.passes + self.failures


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    # SIGTERM (and ^C, which a shell's background job ignores) end the hunt through `finally`:
    # the load and the running pytest are stopped, not left behind.
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    seed = args.seed if args.seed is not None else random.randrange(1, 10**6)
    work = Path(tempfile.mkdtemp(prefix="lanewatch-flakes-"))
    tallies: dict[str, Tally] = defaultdict(Tally)
    broken: list[dict[str, object]] = []
    started = time.monotonic()
    with load(args.load, work):
        for run in range(1, args.runs + 1):
            code, recorded = one_run(args, run, seed + run - 1, work, tallies)
            if code not in (0, 1):
                broken.append({"run": run, "seed": seed + run - 1, "exit": code})
            elif not recorded:
                # pytest ran tests but no outcome reached the log: the plugin was not heard
                # (its variables gone from the environment); a silent run is not a green one.
                why = "no outcome was recorded"
                broken.append({"run": run, "seed": seed + run - 1, "exit": code, "why": why})
    report = {
        "seed": seed,
        "runs": args.runs,
        "workers": args.workers,
        "load": args.load,
        "seconds": round(time.monotonic() - started),
        "broken_runs": broken,
        "tests": {nodeid: vars(t) | {"runs": t.runs} for nodeid, t in sorted(tallies.items())},
    }
    flaky = any(t.failures for t in tallies.values())
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_table(report, tallies, show_all=args.all)
    if flaky or broken:
        print(f"flakes: each run's output is in {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 2 if broken else 1 if flaky else 0


def stopped(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=".ci/flakes", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("targets", nargs="*", default=["tests"], help="files or node ids")
    parser.add_argument("-m", dest="markers", help="pytest marker expression, e.g. processes")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--runs", type=int, default=5, help="runs of each test (default 5)")
    parser.add_argument("-n", dest="workers", type=int, default=2, help="xdist workers (2)")
    parser.add_argument(
        "--load",
        default="cpu=2,fork=1",
        help="load beside the tests: cpu=N,fork=N,write=N workers, or none (default cpu=2,fork=1)",
    )
    parser.add_argument("--seed", type=int, help="seed of the first run (run i: seed+i-1)")
    parser.add_argument("--all", action="store_true", help="a row for every test, not only flaky")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    args = parser.parse_args(argv)
    args.load = parse_load(parser, args.load)
    return args


def parse_load(parser: argparse.ArgumentParser, text: str) -> dict[str, int]:
    if text == "none":
        return {}
    load: dict[str, int] = {}
    for part in text.split(","):
        kind, _, count = part.partition("=")
        if kind not in ("cpu", "fork", "write") or not count.isdigit():
            parser.error(f"--load: {part!r} is not cpu=N, fork=N or write=N")
        load[kind] = int(count)
    return load


def one_run(
    args: argparse.Namespace, run: int, seed: int, work: Path, tallies: dict[str, Tally]
) -> tuple[int, int]:
    """One pytest run, its outcomes added to `tallies`: pytest's exit code and how many tests
    had an outcome in the log."""
    log = work / f"run-{run}.jsonl"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "tests.flakes_plugin"]
    command += ["-p", "no:randomly", "-p", "no:cacheprovider"]
    if args.workers:
        command += ["-n", str(args.workers)]
    if args.markers:
        command += ["-m", args.markers]
    if args.keyword:
        command += ["-k", args.keyword]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env |= {"LANEWATCH_FLAKES_SEED": str(seed), "LANEWATCH_FLAKES_LOG": str(log)}
    began = time.monotonic()
    with open(work / f"run-{run}.out", "wb") as out:
        pytest = subprocess.Popen(
            [*command, *args.targets], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        try:
            code = pytest.wait()
        finally:  # stopped (^C, SIGTERM): pytest ends its workers and their tests' processes
            if pytest.poll() is None:
                pytest.send_signal(signal.SIGINT)
                pytest.wait()
    outcomes = read_outcomes(log)
    failed = 0
    for nodeid, (outcome, message) in outcomes.items():
        tally = tallies[nodeid]
        if outcome == "passed":
            tally.passes += 1
        elif outcome == "skipped":
            tally.skips += 1
        else:
            failed += 1
            tally.failures += 1
            tally.failed_runs.append(run)
            tally.first_failure = tally.first_failure or message
    took = time.monotonic() - began
    print(
        f"run {run}/{args.runs} (seed {seed}): {len(outcomes)} tests, {failed} failed, "
        f"pytest exit {code}, {took:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return code, len(outcomes)


def read_outcomes(log: Path) -> dict[str, tuple[str, str]]:
    """Each test's outcome in one run, from its phases: failed if any phase failed (a failing
    teardown too), else passed if its call passed, else skipped."""
    outcomes: dict[str, tuple[str, str]] = {}
    if not log.exists():
        return outcomes
    for line in log.read_text(encoding="utf-8").splitlines():
        phase = json.loads(line)
        nodeid, outcome = phase["nodeid"], phase["outcome"]
        before = outcomes.get(nodeid, ("skipped", ""))
        if before[0] == "failed":
            continue
        if outcome == "failed":
            outcomes[nodeid] = ("failed", phase.get("message", ""))
        elif outcome == "passed" and phase["when"] == "call":
            outcomes[nodeid] = ("passed", "")
        else:
            outcomes.setdefault(nodeid, before)
    return outcomes


def print_table(report: dict, tallies: dict[str, Tally], show_all: bool) -> None:
    load = ", ".join(f"{k}={v}" for k, v in report["load"].items()) or "none"
    print(
        f"flakes: {report['runs']} runs, -n {report['workers']}, load {load}, "
        f"seeds {report['seed']}..{report['seed'] + report['runs'] - 1}, {report['seconds']} s"
    )
    files: dict[str, list[Tally]] = defaultdict(list)
    for nodeid, tally in tallies.items():
        files[nodeid.split("::")[0]].append(tally)
    rows = [("file", "tests", "runs", "passes", "rate", "skips")]
    for name, group in sorted(files.items()):
        runs, passes = sum(t.runs for t in group), sum(t.passes for t in group)
        skips = sum(t.skips for t in group)
        rows.append((name, str(len(group)), str(runs), str(passes), rate(passes, runs), str(skips)))
    print_rows(rows)
    chosen = [(n, t) for n, t in sorted(tallies.items()) if show_all or t.failures]
    if chosen:
        print()
        rows = [("test", "runs", "passes", "rate", "first failure (failed in runs)")]
        for nodeid, t in chosen:
            where = f" ({', '.join(map(str, t.failed_runs))})" if t.failures else ""
            cells = (str(t.runs), str(t.passes), rate(t.passes, t.runs), t.first_failure + where)
            rows.append((nodeid, *cells))
        print_rows(rows)
    for broken in report["broken_runs"]:
        why = f" ({broken['why']})" if "why" in broken else ""
        run, seed, code = broken["run"], broken["seed"], broken["exit"]
        print(f"run {run} (seed {seed}) broke: pytest exit {code}{why}")


def rate(passes: int, runs: int) -> str:
    return f"{100 * passes / runs:.0f} %" if runs else "-"


def print_rows(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]))


@contextmanager
def load(kinds: dict[str, int], work: Path) -> Iterator[None]:
    """stress-ng's CPU and fork stressors when it is installed (Debian: stress-ng), else
    processes of our own that do the same: spin, or fork children that exit at once. `write`
    workers are always ours: each writes and removes `WRITE_RATE` small files a second in a
    folder of `work` (another user's build or test suite on the same filesystem: what a
    filesystem-wide fanotify mark sees, outside every root the tests watch)."""
    with ExitStack() as stack:
        stressed = {k: n for k, n in kinds.items() if k in ("cpu", "fork") and n}
        if stressed:
            stack.enter_context(_stressed(stressed, work))
        if kinds.get("write"):
            stack.enter_context(_workers([(write_often, (work,))] * kinds["write"]))
            print(f"flakes: load: {kinds['write']} file writers of our own", file=sys.stderr)
        yield


@contextmanager
def _stressed(kinds: dict[str, int], work: Path) -> Iterator[None]:
    stress = shutil.which("stress-ng")
    if not stress:
        targets = {"cpu": spin, "fork": fork_often}
        jobs = [(targets[kind], ()) for kind, count in kinds.items() for _ in range(count)]
        with _workers(jobs):
            print(f"flakes: load: no stress-ng, {len(jobs)} workers of our own", file=sys.stderr)
            yield
        return
    command = [stress, "--quiet"]
    for kind, count in kinds.items():
        command += [f"--{kind}", str(count)]
    with open(work / "load.out", "wb") as out:  # its complaint when stopped, and any other
        proc = subprocess.Popen(
            command, start_new_session=True, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    print(f"flakes: load: {' '.join(command[1:])} (pid {proc.pid})", file=sys.stderr)
    try:
        yield
    finally:
        # stress-ng leads its own session, and is our child not yet reaped: its number (and
        # so its group's) cannot be handed to another process before `wait` below.
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


@contextmanager
def _workers(jobs: list[tuple[Callable[..., None], tuple[object, ...]]]) -> Iterator[None]:
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=fn, args=args, daemon=True) for fn, args in jobs]
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.terminate()
            worker.join()


def spin() -> None:
    while True:
        pass


def fork_often() -> None:
    while True:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


WRITE_RATE = 1000  # files a second each `write` worker writes (and removes)


def write_often(work: Path) -> None:
    """Write and remove small files, `WRITE_RATE` a second, 500 names at a time, in a folder of
    its own: a busy neighbour (a test suite, a build), not a flood. Unpaced, one such loop
    wrote ~10,000 files a second here; two of them were more than the suite's root recorders
    could read in shared temp beside the CPU load (docs/flakes.md, *A neighbour's writes*)."""
    folder = Path(tempfile.mkdtemp(prefix="write-load-", dir=work))
    start, done = time.monotonic(), 0
    while True:
        for i in range(500):
            (folder / f"f{i}").write_bytes(b"x")
        for i in range(500):
            (folder / f"f{i}").unlink()
        done += 500
        ahead = start + done / WRITE_RATE - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


if __name__ == "__main__":
    sys.exit(main())
