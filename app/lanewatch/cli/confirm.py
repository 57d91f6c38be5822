"""Asking before an action: show the target, then ask on the terminal; refuse without one."""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Iterable

import click

from lanewatch.cli.common import EXIT_REFUSED, fail


def safe(text: object) -> str:
    """A lane name, path or command as plain text: control characters (a terminal escape in a
    lane name) are shown as escapes, never sent to the terminal."""
    return "".join(
        ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else ascii(ch)[1:-1]
        for ch in str(text)
    )


def confirm(lines: Iterable[str], question: str, yes: bool) -> None:
    """Print `lines` (what will be done to what) and ask; `--yes` skips the question.

    Without a terminal on stdin there is nobody to ask: refuse (exit 3) rather than assume.
    """
    if yes:
        return
    for line in lines:
        click.echo(line)
    if sys.stdin is None or not sys.stdin.isatty():
        fail("not a terminal, so nobody can confirm: pass --yes to act", EXIT_REFUSED)
    click.confirm(question, default=False, abort=True)
