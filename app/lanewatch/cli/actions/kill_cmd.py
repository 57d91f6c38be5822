"""`lanewatch kill TARGET`: stop a live lane's command (its process group) and every process of
the lane outside it, or a headless lane's processes (its runner is gone), after asking.

Exit codes (docs/exit-codes.md): 0 the lane ended, or had no owner to kill (stale, released,
orphan: nothing to do); 1 the signal was sent but the lane still runs; 3 refused (another host,
not ours, its stamp's claims do not match, pid reused, state unknown); 7 nobody to confirm, or
the answer was no; 8 no such namespace or lane. Root kills another user's lane only with
--allow-other-user, and the confirmation names whose lane it is.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import click

from lanewatch.actions.assess import Assessment, Seen, assess
from lanewatch.actions.authority import is_other_user, owner_label
from lanewatch.actions.checks import members_text
from lanewatch.actions.kill import DEFAULT_WAIT, KILLABLE, SIGNALS, KillResult, kill
from lanewatch.actions.targets import resolve
from lanewatch.cli import completers
from lanewatch.cli.actions.ask import confirm, safe
from lanewatch.cli.common import friendly_errors
from lanewatch.cli.exits import Exit
from lanewatch.cli.reports import report
from lanewatch.model.views import NsState


@click.command("kill")
@click.argument("target", shell_complete=completers.targets)
@click.option(
    "--signal",
    "sig_name",
    type=click.Choice(sorted(SIGNALS), case_sensitive=False),
    default="TERM",
    show_default=True,
    help="The signal for the lane's process group.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="Send SIGKILL to whatever still runs after SECONDS (default: never).",
)
@click.option("--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--allow-other-user",
    is_flag=True,
    help="As root, allow killing another user's lane (refused otherwise); the lane's stamp "
    "file, folder and processes must all be that user's.",
)
@click.option(
    "--if-owner",
    "if_owner",
    metavar="PID:STARTED_AT",
    help="Refuse unless the lane's owner is still this one (its pid and `started_at`, as "
    "`status --json` showed it): what another host's dashboard sends (docs/hosts.md).",
)
@friendly_errors
def kill_command(
    target: str,
    sig_name: str,
    grace: float | None,
    yes: bool,
    as_json: bool,
    allow_other_user: bool,
    if_owner: str | None,
) -> None:
    """Stop the live lane TARGET: its command's process group and every other process of the lane
    (a headless lane: each of its processes), each checked at the moment of the signal.

    TARGET is a namespace name, its path, or a lane name that is unambiguous across the known
    roots. The owner's identity (pid, start time, boot id) is re-checked through a pidfd right
    before the signal, so a pid reused since is never hit. Written to the lane's ledger.
    """
    sig = SIGNALS[sig_name.upper()]
    resolved = resolve(target)
    seen = assess(resolved)
    # Another user's lane without --allow-other-user: nothing to ask, kill refuses and says why.
    if seen.state in KILLABLE and (allow_other_user or not is_other_user(seen)):
        confirm(_plan(seen, sig, grace), "Kill it?", yes)
    result = kill(
        resolved,
        sig=sig,
        grace=grace,
        allow_other_user=allow_other_user,
        seen=_shown(if_owner) if if_owner else Seen.of(seen.stamp),
        check=False,
    )
    if as_json:
        report("kill", kill_json(result))
    else:
        click.echo(safe(result.message), err=result.outcome == "refused")
    if result.outcome == "refused":
        sys.exit(Exit.REFUSED)
    if result.outcome == "running":
        sys.exit(Exit.FAILED)


def _shown(value: str) -> Seen:
    pid, _, started = value.partition(":")
    try:
        return Seen(int(pid), float(started))
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: PID:STARTED_AT, as status --json shows them", param_hint="--if-owner"
        ) from None


def kill_json(r: KillResult) -> dict[str, Any]:
    return {
        "outcome": r.outcome,  # stopped | running | refused | gone (nothing to kill)
        "key": r.target,
        "label": r.label,
        "signal": r.signal,
        "escalated": r.escalated,
        "method": r.method,
        "message": r.message,
        "owner_host": r.owner_host,  # another host's owner: refused, kill it there
    }


def _whose(a: Assessment) -> str:
    assert a.stamp is not None
    if is_other_user(a):
        return f"the lane of {safe(owner_label(a.stamp.uid))}: ANOTHER USER'S LANE, not yours"
    return safe(owner_label(a.stamp.uid))


def _plan(a: Assessment, sig: int, grace: float | None) -> list[str]:
    stamp = a.stamp
    assert stamp is not None
    name = signal.Signals(sig).name
    if a.state is NsState.HEADLESS:
        who = f"each of its {len(a.members)} processes ({safe(members_text(a.members))})"
    elif stamp.child_pid and stamp.pgid == stamp.child_pid:
        who = f"process group {stamp.pgid} (its command, pid {stamp.child_pid})"
    else:
        who = f"its owner, pid {stamp.pid}"
    outside = [m for m in a.members if m.pgid != stamp.pgid]
    if a.state is not NsState.HEADLESS and outside:
        who += f", and each of its {len(outside)} processes outside that group"
    then = (
        f"SIGKILL to whatever still runs after {grace:g}s"
        if grace is not None and sig != signal.SIGKILL
        else f"watch up to {DEFAULT_WAIT:g}s for it to end"
    )
    return [
        f"{safe(a.target.label)} in {safe(a.target.root)}",
        f"  state:    {safe(a.describe())}",
        f"  owner:    pid {stamp.pid}, {_whose(a)}",
        f"  checkout: {safe(stamp.checkout_path)}",
        f"  command:  {safe(' '.join(stamp.command))[:200]}",
        f"  will send {name} to {who}, then {then}",
    ]
