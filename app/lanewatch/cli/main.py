"""The `lanewatch` command group."""

from __future__ import annotations

import click

from lanewatch import __version__


@click.group(invoke_without_command=True)
@click.version_option(__version__, prog_name="lanewatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Per-lane scratch namespaces for parallel agents, watched live."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def main() -> None:
    cli(prog_name="lanewatch")
