"""`lanewatch completion bash|zsh|fish`: the shell's completion script, from click.

Commands, options, lane names, namespace names and trash ids complete (cli/completers.py).
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")
# What click's completion scripts call back with: `_<PROG>_COMPLETE` for the program `lanewatch`.
COMPLETE_VAR = "_LANEWATCH_COMPLETE"


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish).

    \b
    bash:  eval "$(lanewatch completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(lanewatch completion zsh)"    (in ~/.zshrc)
    fish:  lanewatch completion fish > ~/.config/fish/completions/lanewatch.fish
    """
    root = ctx.find_root().command
    cls = get_completion_class(shell)
    assert cls is not None  # every name in SHELLS is one of click's own
    click.echo(cls(root, {}, "lanewatch", COMPLETE_VAR).source())
