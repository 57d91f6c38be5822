"""`lanewatch hook`: install or remove a git hook that runs the gate, or (`--agent claude`) the
guard as a Claude Code hook (agents/claude_settings.py)."""

from __future__ import annotations

import click

from lanewatch.cli.common import EXIT_REFUSED, fail, friendly_errors, say
from lanewatch.cli.duration import Duration
from lanewatch.proof.hooks import KINDS, HookRefused, install_hook, uninstall_hook


@click.group("hook")
def hook_command() -> None:
    """Git hooks that refuse a push or commit unless `lanewatch gate STEP` passes."""


@hook_command.command("install")
@click.argument("kind", type=click.Choice(KINDS), default="pre-push", required=False)
@click.option("--gate", "step", help="The step whose receipt the hook checks.")
@click.option(
    "--agent",
    type=click.Choice(["claude"]),
    help="Instead: the guard as the agent's hook (.claude/settings.json; docs/agents.md).",
)
@click.option("--dry-run", is_flag=True, help="With --agent: show the settings, write nothing.")
@click.option(
    "--lane", help="Gate this lane (default: $LANEWATCH_LANE at hook time, else 'default')."
)
@click.option("--allow-dirty", is_flag=True, help="Let the gate ignore the working tree's dirt.")
@click.option("--max-age", type=Duration(), help="Refuse receipts older than this (10m, 2h).")
@click.option("--checkout", type=click.Path(), help="Install for this checkout instead of cwd.")
@click.option(
    "--chain",
    is_flag=True,
    help="Keep a hook that is not ours and run it first; the gate runs only if it passed.",
)
@click.option("--force", is_flag=True, help="Replace a hook that is not ours (a backup is kept).")
@friendly_errors
def install(
    kind: str,
    step: str | None,
    agent: str | None,
    dry_run: bool,
    lane: str | None,
    allow_dirty: bool,
    max_age: float | None,
    checkout: str | None,
    chain: bool,
    force: bool,
) -> None:
    """Write a KIND hook (pre-push or pre-commit; default pre-push) calling the gate.

    The hook goes where git looks for this worktree's hooks (`git rev-parse --git-path hooks`,
    which honours core.hooksPath; linked worktrees share the repository's hooks). Each worktree
    is gated on its own receipt. Exits 3 when a hook that is not ours is in the way (unless
    --chain or --force). Installing again is harmless: a chained hook stays chained.

    With `--agent claude`: `lanewatch guard` as a PreToolUse hook in the checkout's
    .claude/settings.json, keeping the settings and hooks already there (exit 3 when the file
    is not JSON; `--dry-run` prints it and writes nothing).
    """
    if agent is not None:
        _install_agent(agent, checkout, dry_run)
        return
    if step is None:
        raise click.UsageError("--gate STEP is required (or --agent claude for the guard)")
    if dry_run:
        raise click.UsageError("--dry-run is for --agent")
    if chain and force:
        raise click.UsageError("--chain keeps the hook in the way, --force replaces it: pick one")
    try:
        done = install_hook(
            kind,
            step,
            checkout=checkout,
            lane=lane,
            allow_dirty=allow_dirty,
            max_age=max_age,
            force=force,
            chain=chain,
        )
    except HookRefused as exc:
        fail(str(exc), EXIT_REFUSED)
    verb = {"none": "installed", "ours": "updated"}.get(done.previous, "replaced")
    say(f"{verb} {kind} hook gating {step!r}: {done.path}")
    if done.chained is not None:
        say(f"the hook that was there runs first, kept as {done.chained}")
    if done.backup is not None:
        say(f"the previous hook was kept as {done.backup}")
    if done.outside:
        say(
            f"note: core.hooksPath points outside this repository ({done.path.parent}); "
            "every repository using that folder now runs this gate",
            err=True,
        )


@hook_command.command("uninstall")
@click.argument("kind", type=click.Choice(KINDS), default="pre-push", required=False)
@click.option("--checkout", type=click.Path(), help="Act on this checkout instead of cwd.")
@click.option(
    "--agent",
    type=click.Choice(["claude"]),
    help="Instead: remove the guard from the agent's hooks.",
)
@friendly_errors
def uninstall(kind: str, checkout: str | None, agent: str | None) -> None:
    """Remove our KIND hook (putting back the hook it chained); a hook that is not ours is left
    alone (exit 3). With `--agent claude`: our entry in .claude/settings.json, nothing else."""
    if agent is not None:
        _uninstall_agent(agent, checkout)
        return
    try:
        removed = uninstall_hook(kind, checkout=checkout)
    except HookRefused as exc:
        fail(str(exc), EXIT_REFUSED)
    if removed is None:
        say(f"no {kind} hook installed")
    elif removed.restored:
        say(f"removed the lanewatch hook; the hook it chained is back at {removed.path}")
    else:
        say(f"removed {removed.path}")


def _install_agent(agent: str, checkout: str | None, dry_run: bool) -> None:
    from lanewatch.agents.claude_settings import SettingsRefused
    from lanewatch.agents.claude_settings import install as install_settings
    from lanewatch.lanes.checkout import resolve_checkout

    where = resolve_checkout(checkout).root
    try:
        done = install_settings(where, dry_run=dry_run)
    except SettingsRefused as exc:
        fail(str(exc), EXIT_REFUSED)
    if dry_run:
        say(f"would write {done.path}:")
        click.echo(done.text, nl=False)
        return
    verb = {"none": "installed", "ours": "updated", "same": "already installed:"}[done.previous]
    say(f"{verb} the lanewatch guard as a {agent} PreToolUse hook in {done.path}")


def _uninstall_agent(agent: str, checkout: str | None) -> None:
    from lanewatch.agents.claude_settings import SettingsRefused
    from lanewatch.agents.claude_settings import uninstall as uninstall_settings
    from lanewatch.lanes.checkout import resolve_checkout

    try:
        path = uninstall_settings(resolve_checkout(checkout).root)
    except SettingsRefused as exc:
        fail(str(exc), EXIT_REFUSED)
    if path is None:
        say(f"no lanewatch guard in {agent}'s settings")
    else:
        say(f"removed the lanewatch guard from {path}")
