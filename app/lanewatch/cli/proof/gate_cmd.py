"""`lanewatch gate`: exit 0 only on this checkout's own, current, passing receipt."""

from __future__ import annotations

import os
import sys

import click

from lanewatch.cli import completers
from lanewatch.cli.common import say
from lanewatch.cli.duration import Duration
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import lane_root
from lanewatch.lanes.lane import ENV_LANE
from lanewatch.proof.gate import EXIT_CODES, check_gate

PRE_COMMIT_TO_REF = "PRE_COMMIT_TO_REF"
_CODES = ", ".join(f"{code} {reason.value}" for reason, code in EXIT_CODES.items())


def _pushed_commits(text: str) -> list[str]:
    """The local commit ids of git's pre-push input: `<ref> <sha> <remote ref> <sha>` lines."""
    commits: list[str] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            commits.append(parts[1])
    return commits


def _push_range() -> list[str]:
    """What is being pushed: git's lines on stdin, else (pre-commit's pre-push stage, which
    reads git's lines itself and passes the hook an empty stdin) $PRE_COMMIT_TO_REF, the local
    commit pre-commit runs the push's hooks for. Neither: only HEAD is checked."""
    pushed = _pushed_commits(sys.stdin.read())
    if not pushed and os.environ.get(PRE_COMMIT_TO_REF):
        pushed = [os.environ[PRE_COMMIT_TO_REF]]
    return pushed


@click.command(
    "gate",
    help=f"""Exit 0 only if STEP's receipt proves this checkout as it is now.

The receipt must exist in this checkout's lane namespace, carry this user's seal (written by
`lanewatch prove`, not edited since), name this checkout, lane and step, have passed, match the
current HEAD (and the dirty digest, unless --allow-dirty), not be dated in the future, and be
younger than --max-age. The gate reads that one file only: never the ledger, never another
checkout's namespace. One line says why; the exit code says which reason:
{_CODES}.""",
)
@click.argument("step")
@click.option(
    "--lane",
    "lane",
    envvar=ENV_LANE,
    help=f"Lane (default: ${ENV_LANE}, else 'default').",
    shell_complete=completers.lanes,
)
@lane_root
@click.option("--checkout", type=click.Path(), help="Bind to this checkout instead of cwd.")
@click.option("--allow-dirty", is_flag=True, help="Do not compare the working tree's dirt.")
@click.option("--max-age", type=Duration(), help="Refuse receipts older than this (90s, 10m, 2h).")
@click.option(
    "--pre-push",
    "pre_push",
    is_flag=True,
    help="Read git's pre-push lines on stdin (else pre-commit's $PRE_COMMIT_TO_REF); every "
    "pushed commit must be the proven HEAD.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def gate_command(
    step: str,
    lane: str | None,
    root: str | None,
    checkout: str | None,
    allow_dirty: bool,
    max_age: float | None,
    pre_push: bool,
    as_json: bool,
) -> None:
    pushed = _push_range() if pre_push else None
    result = check_gate(
        step,
        lane=lane,
        checkout=checkout,
        root=root,
        allow_dirty=allow_dirty,
        max_age=max_age,
        pushed=pushed,
    )
    if as_json:
        report("gate", result.to_json())
    elif result.ok:
        say(f"lanewatch gate: pass: {result.message}")
    else:
        say(f"lanewatch gate: refused ({result.reason.value}): {result.message}", err=True)
    sys.exit(result.exit_code)
