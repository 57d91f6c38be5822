"""Asking before an action: show the target, then ask on the terminal; refuse without one."""

from __future__ import annotations

import sys
from collections.abc import Iterable

import click

from lanewatch.cli.common import fail
from lanewatch.cli.exits import Exit
from lanewatch.inert import inert

# A lane name, path or command as plain text: a terminal escape in it is shown, never sent.
safe = inert


def confirm(lines: Iterable[str], question: str, yes: bool) -> None:
    """Print `lines` (what will be done to what) and ask; `--yes` skips the question.

    Without a terminal on stdin there is nobody to ask: stop (exit 7) rather than assume.
    """
    if yes:
        return
    for line in lines:
        click.echo(inert(line))
    if sys.stdin is None or not sys.stdin.isatty():
        fail("not a terminal, so nobody can confirm: pass --yes to act", Exit.NEEDS_CONFIRMATION)
    click.confirm(question, default=False, abort=True)
