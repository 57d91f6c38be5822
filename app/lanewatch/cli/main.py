"""The `lanewatch` command group. Each command group lives in its own module."""

from __future__ import annotations

import click

from lanewatch import __version__
from lanewatch.cli import (
    clear_cmd,
    dash_cmd,
    demo_cmd,
    gate_cmd,
    history_cmd,
    hook_cmd,
    id_cmd,
    incidents_cmd,
    kill_cmd,
    prove_cmd,
    record_cmd,
    roots_cmd,
    run_cmd,
    smoke_cmd,
    status_cmd,
    trash_cmd,
)


@click.group(invoke_without_command=True)
@click.version_option(__version__, prog_name="lanewatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Per-lane scratch namespaces for parallel agents, watched live.

    Without a command, opens the dashboard on every known scratch root.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(dash_cmd.dash_command)


# Register commands here, one line per module.
cli.add_command(id_cmd.id_command)
cli.add_command(run_cmd.run_command)
cli.add_command(roots_cmd.roots_command)
cli.add_command(dash_cmd.dash_command)
cli.add_command(demo_cmd.demo_command)
cli.add_command(prove_cmd.prove_command)
cli.add_command(gate_cmd.gate_command)
cli.add_command(hook_cmd.hook_command)
cli.add_command(smoke_cmd.smoke_command)
cli.add_command(status_cmd.status_command)
cli.add_command(incidents_cmd.incidents_command)
cli.add_command(kill_cmd.kill_command)
cli.add_command(clear_cmd.clear_command)
cli.add_command(trash_cmd.trash_command)
cli.add_command(trash_cmd.restore_command)
cli.add_command(trash_cmd.purge_command)
cli.add_command(record_cmd.record_command)
cli.add_command(history_cmd.history_command)


def main() -> None:
    cli(prog_name="lanewatch")
