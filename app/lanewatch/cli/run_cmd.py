"""`lanewatch run`: run a command inside its lane's namespace."""

from __future__ import annotations

import sys

import click

from lanewatch.cli.common import friendly_errors_around_cmd
from lanewatch.cli.laneopts import command_after_dashes, lane_options
from lanewatch.lanes.lane import Lane
from lanewatch.lanes.run import run_in_lane


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@lane_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly_errors_around_cmd
def run_command(
    lane: str, root: str | None, checkout: str | None, heartbeat: float | None, cmd: tuple[str, ...]
) -> None:
    """Claim the lane's namespace and run CMD in it.

    TMPDIR/TMP/TEMP point inside the namespace; LANEWATCH_LANE, LANEWATCH_NAMESPACE,
    LANEWATCH_CHECKOUT and LANEWATCH_ROOT are exported. Exits with CMD's exit code
    (128+N when it died of signal N), 2 on a usage error (a lane name that cannot be one:
    empty, or over 150 characters once encoded), 3 when another owner holds the lane, 6 when
    unbound (docs/exit-codes.md).
    """
    argv = command_after_dashes(cmd, "lanewatch run [OPTIONS] -- CMD [ARGS]...")
    owner = Lane(lane, root=root, checkout=checkout, heartbeat=heartbeat, command=argv)
    sys.exit(run_in_lane(owner, argv))
