"""Options every command that runs CMD in a lane takes (`run`, `prove`), declared once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from lanewatch.cli import completers
from lanewatch.cli.common import options
from lanewatch.cli.lanes.run_fast import LaneRun
from lanewatch.cli.rootopts import lane_root
from lanewatch.lanes.lane import DEFAULT_LANE, ENV_LANE
from lanewatch.lanes.stamp import MAX_HEARTBEAT
from lanewatch.runner.fence import Mode

F = TypeVar("F", bound=Callable[..., Any])


# --lane, --root, --checkout, --heartbeat.
lane_options = options(
    click.option(
        "--lane",
        "lane",
        envvar=ENV_LANE,
        default=DEFAULT_LANE,
        show_default=True,
        help=f"Lane name (default: ${ENV_LANE}, else '{DEFAULT_LANE}').",
        shell_complete=completers.lanes,
    ),
    lane_root,
    click.option("--checkout", type=click.Path(), help="Bind to this checkout instead of cwd."),
    click.option(
        "--heartbeat",
        type=click.FloatRange(min=0.05, max=MAX_HEARTBEAT),
        help="Heartbeat interval in seconds (default: $LANEWATCH_HEARTBEAT, else 5).",
    ),
)


def fence_options(func: F) -> F:
    """--fence, --fence-shm (runner/fence.py, docs/fence.md)."""
    func = click.option(
        "--fence-shm",
        "fence_shm",
        is_flag=True,
        help="Make /dev/shm private to the lane too (a folder of its namespace).",
    )(func)
    return click.option(
        "--fence",
        "fence",
        type=click.Choice([m.value for m in Mode]),
        default=Mode.AUTO.value,
        show_default=True,
        help="Private /tmp and /var/tmp: auto (where the kernel allows, else say so), "
        "require or tmp (or refuse: exit 3; also $LANEWATCH_FENCE_REQUIRE=1), none; net: "
        "auto and a private loopback and network (slirp4netns; else say so).",
    )(func)


def lane_run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """`lane_options` and `fence_options`, handed to the command as one `LaneRun` (its
    keyword argument `where`)."""

    @functools.wraps(func)
    def packed(*args: Any, **kwargs: Any) -> Any:
        return func(*args, where=LaneRun.take(kwargs), **kwargs)

    return lane_options(fence_options(packed))


def command_after_dashes(cmd: tuple[str, ...], usage: str) -> list[str]:
    """CMD as given after `--`; a usage error when there is none."""
    argv = list(cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError(f"no command given: {usage}")
    return argv
