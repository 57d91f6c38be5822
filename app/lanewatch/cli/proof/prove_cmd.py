"""`lanewatch prove`: run a step in its lane and write its receipt."""

from __future__ import annotations

import sys

import click

from lanewatch.cli.common import fail, friendly_errors_around_cmd, say
from lanewatch.cli.exits import Exit
from lanewatch.cli.lanes.laneopts import command_after_dashes, lane_run_options
from lanewatch.cli.lanes.run_fast import LaneRun
from lanewatch.proof.prove import prove
from lanewatch.runner.fence import Mode


@click.command("prove", context_settings={"ignore_unknown_options": True})
@click.argument("step")
@lane_run_options
@click.option("--quiet", "-q", is_flag=True, help="Do not print the receipt line on stderr.")
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly_errors_around_cmd
def prove_command(step: str, where: LaneRun, quiet: bool, cmd: tuple[str, ...]) -> None:
    """Run CMD as STEP in its lane (as `lanewatch run` does) and write STEP's receipt.

    Put `--` before CMD: `lanewatch prove tests --lane agent-1 -- pytest -x`.

    The receipt goes to <namespace>/receipts/<STEP>.json and names this checkout, the lane,
    git HEAD, the dirty flag and a digest of the dirt, the outcome and the exit code;
    `lanewatch gate STEP` reads it. Inside a `lanewatch run` of the same lane, the receipt goes
    into that run's namespace instead of claiming the lane again.

    Exits with CMD's exit code (128+N when it died of signal N), 2 on a usage error (a bad lane
    or step name), 3 when another owner holds the lane, 6 when unbound, 125 when the receipt
    could not be written or this user's seal key cannot be trusted (then CMD does not run).
    """
    argv = command_after_dashes(cmd, "lanewatch prove STEP [OPTIONS] -- CMD [ARGS]...")
    try:
        result = prove(
            step,
            argv,
            lane=where.lane,
            root=where.root,
            checkout=where.checkout,
            heartbeat=where.heartbeat,
            fence=Mode(where.fence),
            shm=where.fence_shm,
        )
    except OSError as exc:
        fail(f"could not write the receipt of {step!r}: {exc}", Exit.RUN_FAILED)
    receipt = result.receipt
    if receipt is None or result.path is None:
        fail(f"{step!r} exited {result.exit_code} but no receipt was written", Exit.RUN_FAILED)
    if not quiet:
        inside = " (inside the outer run's lane)" if result.nested else ""
        state = (
            f"HEAD {receipt.git_head[:12]}, {'dirty' if receipt.dirty else 'clean'}"
            if receipt.git_head
            else f"HEAD UNKNOWN ({receipt.git_error}); a gate will refuse it"
        )
        say(
            f"lanewatch: receipt {step!r}: {receipt.outcome.value} (exit {receipt.exit_code}), "
            f"{state}{inside} -> {result.path}",
            err=True,
        )
        if receipt.changed_during_run:
            say(
                f"lanewatch: warning: {receipt.changed_during_run}; a gate will refuse it",
                err=True,
            )
    sys.exit(result.exit_code)
