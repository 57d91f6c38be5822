"""`lanewatch run`: run a command inside its lane's namespace. Its usual forms start without
click (cli/lanes/run_fast.py, which does the run for both); this command parses the rest."""

from __future__ import annotations

import math

import click

from lanewatch.cli.lanes.laneopts import command_after_dashes, lane_run_options
from lanewatch.cli.lanes.run_fast import LaneRun, run_lane


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@lane_run_options
@click.option(
    "--lane-auto",
    "lane_auto",
    is_flag=True,
    help="When the lane is busy, take the next free one (LANE-2, LANE-3, …) instead of exit 3.",
)
@click.option(
    "--wait",
    "wait",
    type=click.FloatRange(min=0),
    is_flag=False,
    flag_value=math.inf,
    default=None,
    metavar="[SECONDS]",
    help="When the lane is busy, wait for it (for ever, or up to SECONDS; then exit 3).",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(where: LaneRun, lane_auto: bool, wait: float | None, cmd: tuple[str, ...]) -> None:
    """Claim the lane's namespace and run CMD in it.

    CMD gets a private /tmp and /var/tmp, folders of the lane's namespace (--fence, see
    docs/fence.md). TMPDIR/TMP/TEMP point inside the namespace (/tmp inside the fence);
    LANEWATCH_LANE, LANEWATCH_NAMESPACE, LANEWATCH_CHECKOUT, LANEWATCH_ROOT and
    LANEWATCH_FENCE are exported. Exits with CMD's exit code (128+N when it died of signal
    N), 2 on a usage error (a lane name that cannot be one: empty, or over 150 characters once
    encoded), 3 when another owner holds the lane (after --wait SECONDS, or when all of
    --lane-auto's lanes are busy) or --fence require (tmp, $LANEWATCH_FENCE_REQUIRE=1) cannot
    fence here, 6 when unbound (docs/exit-codes.md). Unfenced where the kernel refuses (auto),
    it says so in one line on stderr. --fence net adds a loopback and network of the lane's
    own (slirp4netns; `lanewatch forward` publishes a port), or says why it could not.
    """
    argv = command_after_dashes(cmd, "lanewatch run [OPTIONS] -- CMD [ARGS]...")
    if lane_auto and wait is not None:
        raise click.UsageError("--lane-auto and --wait exclude each other: take another, or wait")
    run_lane(where, lane_auto, wait, argv)
