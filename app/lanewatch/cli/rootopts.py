"""`--root`, declared once for every command: a folder (a file is a usage error, exit 2) that
need not exist yet. Commands that read take it again and again and read only those roots;
commands that act in one lane take one, the lane's (README: "Scripts, shells and other systems")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

ROOT = click.Path(file_okay=False)

# status, incidents, history, record: `roots` is a tuple, empty for every known root.
read_roots: Callable[[F], F] = click.option(
    "--root",
    "roots",
    multiple=True,
    type=ROOT,
    help="Read only this scratch root (repeat; default: every known root).",
)

# status: the same, but a root it cannot read is no usage error: it is shown degraded and
# `status` exits 5 ("a root could not be read"), as for a registered root.
status_roots: Callable[[F], F] = click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, readable=False),
    help="Read only this scratch root (repeat; default: every known root).",
)

# run, prove, gate: `root` is the lane's one root, or None.
lane_root: Callable[[F], F] = click.option(
    "--root",
    type=ROOT,
    help="The lane's scratch root (default: $LANEWATCH_ROOT or the state dir).",
)
