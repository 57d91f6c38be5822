"""`lanewatch run`: run a command inside its lane's namespace."""

from __future__ import annotations

import sys

import click

from lanewatch.cli.common import friendly_errors
from lanewatch.cli.laneopts import command_after_dashes, fence_options, lane_options
from lanewatch.lanes.fence import Mode
from lanewatch.lanes.lane import Lane
from lanewatch.lanes.run import run_in_lane


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@lane_options
@fence_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly_errors
def run_command(
    lane: str,
    root: str | None,
    checkout: str | None,
    heartbeat: float | None,
    fence: str,
    fence_shm: bool,
    cmd: tuple[str, ...],
) -> None:
    """Claim the lane's namespace and run CMD in it.

    CMD gets a private /tmp and /var/tmp, folders of the lane's namespace (--fence, see
    docs/fence.md). TMPDIR/TMP/TEMP point inside the namespace (/tmp inside the fence);
    LANEWATCH_LANE, LANEWATCH_NAMESPACE, LANEWATCH_CHECKOUT, LANEWATCH_ROOT and
    LANEWATCH_FENCE are exported. Exits with CMD's exit code (128+N when it died of signal
    N), 2 when unbound or on a usage error (a lane name that cannot be one: empty, or over 150
    characters once encoded), 3 when another owner holds the lane or --fence tmp cannot fence.
    """
    argv = command_after_dashes(cmd, "lanewatch run [OPTIONS] -- CMD [ARGS]...")
    owner = Lane(lane, root=root, checkout=checkout, heartbeat=heartbeat, command=argv)
    sys.exit(run_in_lane(owner, argv, Mode(fence), shm=fence_shm))
