"""`lanewatch guard`: an agent's `PreToolUse` hook (agents/guard.py). `lanewatch guard` alone
runs without click (cli/entry.py); this command is what help and completion see, and what runs
the guard when it is given options."""

from __future__ import annotations

import sys

import click


@click.command("guard")
def guard_command() -> None:
    """Read a Claude Code PreToolUse payload on stdin; refuse (exit 2, one line on stderr) a
    write into another lane's namespace or checkout, or into shared temp from an unfenced lane.

    Install it with `lanewatch hook install --agent claude` (docs/agents.md).
    """
    from lanewatch.agents.guard import main

    sys.exit(main())
