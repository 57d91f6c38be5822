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

    Without a terminal on stdin there is nobody to ask: stop (exit 7) rather than assume. An
    answer of no is the same outcome, said so: nothing was done because nobody confirmed (exit 7,
    never the 1 of an action that tried and failed).
    """
    if yes:
        return
    for line in lines:
        click.echo(inert(line))
    if sys.stdin is None or not sys.stdin.isatty():
        fail("not a terminal, so nobody can confirm: pass --yes to act", Exit.NEEDS_CONFIRMATION)
    if not click.confirm(question, default=False):
        fail("declined: nothing done", Exit.NEEDS_CONFIRMATION)
