"""`lanewatch run`'s usual forms without click, and what `run` does with its arguments.

`run` sits in hooks and agent loops, and click with what it imports is a fifth of its start
(`run_start` in docs/performance.md). `lanewatch run [--lane L] [--root R] [--checkout C]
[--heartbeat S] [--fence M] [--fence-shm] [--lane-auto] [--wait[=S]] -- CMD...` is parsed
here; anything else (help, a value click would refuse, an unknown option, CMD without `--`,
shell completion) goes to the click command (cli/lanes/run_cmd.py), which says what is wrong.
tests/processes/test_run_fast.py holds the two parsers equal on what this one takes."""

from __future__ import annotations

import math
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NoReturn

from lanewatch.cli.common import friendly_errors_around_cmd, say
from lanewatch.errors import ClaimRefused
from lanewatch.lanes.lane import DEFAULT_LANE, ENV_LANE, Lane
from lanewatch.lanes.stamp import MAX_HEARTBEAT
from lanewatch.linux.support import PROC, missing
from lanewatch.runner.fence import Mode
from lanewatch.runner.pick import Interrupted, claim_next_free, claim_waiting
from lanewatch.runner.run import run_in_lane

_VALUED = {"--lane", "--root", "--checkout", "--heartbeat", "--fence", "--wait"}
_FLAGS = {"--fence-shm", "--lane-auto"}
_COMPLETE = "_LANEWATCH_COMPLETE"  # click's shell completion asks through this


@dataclass(frozen=True, slots=True)
class LaneRun:
    """Which lane CMD runs in, and fenced how: the options `run` and `prove` share
    (cli/lanes/laneopts.py `lane_run_options`), as one value."""

    lane: str
    root: str | None
    checkout: str | None
    heartbeat: float | None
    fence: str  # a `Mode` value
    fence_shm: bool

    @classmethod
    def take(cls, params: dict[str, Any]) -> LaneRun:
        """The options, popped off a command's keyword arguments (the rest stay)."""
        return cls(**{f.name: params.pop(f.name) for f in fields(cls)})


@friendly_errors_around_cmd
def run_lane(where: LaneRun, lane_auto: bool, wait: float | None, argv: list[str]) -> NoReturn:
    """Claim the lane's namespace, run CMD (`argv`) in it, exit with its code."""
    lane = where.lane

    def make(name: str) -> Lane:
        return Lane(
            name, root=where.root, checkout=where.checkout, heartbeat=where.heartbeat, command=argv
        )

    def next_free(_interrupted: Interrupted) -> Lane:
        taken = claim_next_free(make, lane)
        if taken.name != lane:
            say(f"lanewatch: lane {lane!r} is busy; running in lane {taken.name!r}", err=True)
        return taken

    def waiting(interrupted: Interrupted) -> Lane:
        limit = None if wait is None or math.isinf(wait) else wait
        until = "" if limit is None else f" up to {limit:g}s"
        return claim_waiting(
            owner,
            limit,
            interrupted,
            lambda: say(f"lanewatch: lane {lane!r} is busy; waiting for it{until}", err=True),
        )

    owner = make(lane)
    if not lane_auto:
        _refuse_own_lane(owner)
    claim = next_free if lane_auto else waiting if wait is not None else None
    sys.exit(run_in_lane(owner, argv, claim=claim, fence=Mode(where.fence), shm=where.fence_shm))


def _refuse_own_lane(owner: Lane) -> None:
    """A run nested in the run that holds its lane (`$LANEWATCH_LANE` is inherited) could
    never claim it, and `--wait` would wait for its own parent for ever: say so at once, with
    no claim attempt, so no refused-claim incident is recorded for what is no collision."""
    from lanewatch.lanes.nested import outer_owner

    outer = outer_owner(owner.target)
    if outer is not None:
        raise ClaimRefused(
            f"lane {owner.name!r} is held by the run this command runs inside (pid {outer.pid});"
            " a nested run needs a lane of its own: --lane NAME or --lane-auto"
        )


def parse(args: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The click command's parameters (`LaneRun`'s, `lane_auto`, `wait`) and `argv` from
    `run`'s own arguments (after `run`), or None: click must parse these."""
    if environ.get(_COMPLETE):
        return None
    given: dict[str, str] = {}
    flags: set[str] = set()
    rest = list(args)
    while rest and rest[0] != "--":
        name, eq, value = rest.pop(0).partition("=")
        if name in _FLAGS and not eq:
            flags.add(name)
        elif name == "--wait" and not eq and (not rest or _option_like(rest[0])):
            given[name] = "inf"  # a bare --wait: for ever (click's flag_value)
        elif name in _VALUED and not eq:
            if not rest or rest[0].startswith("-"):
                return None  # click would take `--` or an option as the value
            given[name] = rest.pop(0)
        elif name in _VALUED:
            given[name] = value
        else:
            return None  # -h, --help, an unknown option, CMD without `--`
    argv = rest[1:]
    if not argv or argv[0] == "--":
        return None
    try:
        heartbeat = _number(given.get("--heartbeat"), 0.05, MAX_HEARTBEAT)
        wait = _number(given.get("--wait"), 0.0, math.inf)
    except ValueError:
        return None
    fence = given.get("--fence", Mode.AUTO.value)
    root, checkout = given.get("--root"), given.get("--checkout")
    if (
        fence not in {m.value for m in Mode}
        or not _path_ok(root, folder=True)
        or not _path_ok(checkout, folder=False)
        or ("--lane-auto" in flags and wait is not None)
    ):
        return None
    return {
        "lane": given.get("--lane", environ.get(ENV_LANE) or DEFAULT_LANE),
        "root": root,
        "checkout": checkout,
        "heartbeat": heartbeat,
        "fence": fence,
        "fence_shm": "--fence-shm" in flags,
        "lane_auto": "--lane-auto" in flags,
        "wait": wait,
        "argv": argv,
    }


def _option_like(arg: str) -> bool:
    """What click does not take as the value of an option whose value may be left out."""
    return arg.startswith("-") and arg != "-"


def _number(text: str | None, low: float, high: float) -> float | None:
    """The option's value within [low, high] (click's FloatRange), None when not given;
    ValueError where click must say why not (not a number, out of range, NaN)."""
    if text is None:
        return None
    value = float(text)
    if math.isnan(value) or not low <= value <= high:
        raise ValueError(text)
    return value


def _path_ok(path: str | None, *, folder: bool) -> bool:
    """What click.Path checks: nothing where nothing is; else readable, and not a file for a
    folder option."""
    if path is None:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return True
    if folder and stat.S_ISREG(mode):
        return False
    return os.access(path, os.R_OK)


def run_fast(args: Sequence[str]) -> None:
    """Run `lanewatch run ARGS` and exit, or return when click must parse ARGS."""
    params = parse(args, os.environ)
    if params is None or missing((PROC,)):  # cli/group.py's NEEDS["run"]; click says it
        return
    try:
        run_lane(LaneRun.take(params), **params)
    except (EOFError, KeyboardInterrupt):  # as click's standalone mode says it
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
