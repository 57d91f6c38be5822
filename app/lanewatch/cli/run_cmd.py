"""`lanewatch run`: run a command inside its lane's namespace."""

from __future__ import annotations

import sys

import click

from lanewatch.cli.common import friendly_errors
from lanewatch.runner import run_in_lane
from lanewatch.scheme.lane import DEFAULT_LANE, ENV_LANE, Lane
from lanewatch.scheme.stamp import MAX_HEARTBEAT


@click.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--lane",
    "lane",
    envvar=ENV_LANE,
    default=DEFAULT_LANE,
    show_default=True,
    help=f"Lane name (default: ${ENV_LANE}, else '{DEFAULT_LANE}').",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False),
    help="Scratch root (default: $LANEWATCH_ROOT or the state dir).",
)
@click.option("--checkout", type=click.Path(), help="Bind to this checkout instead of cwd.")
@click.option(
    "--heartbeat",
    type=click.FloatRange(min=0.05, max=MAX_HEARTBEAT),
    help="Heartbeat interval in seconds (default: $LANEWATCH_HEARTBEAT, else 5).",
)
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@friendly_errors
def run_command(
    lane: str, root: str | None, checkout: str | None, heartbeat: float | None, cmd: tuple[str, ...]
) -> None:
    """Claim the lane's namespace and run CMD in it.

    TMPDIR/TMP/TEMP point inside the namespace; LANEWATCH_LANE, LANEWATCH_NAMESPACE,
    LANEWATCH_CHECKOUT and LANEWATCH_ROOT are exported. Exits with CMD's exit code
    (128+N when it died of signal N), 2 when unbound, 3 when another owner holds the lane.
    """
    argv = list(cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError("no command given: lanewatch run [OPTIONS] -- CMD [ARGS]...")
    owner = Lane(lane, root=root, checkout=checkout, heartbeat=heartbeat, command=argv)
    sys.exit(run_in_lane(owner, argv))
