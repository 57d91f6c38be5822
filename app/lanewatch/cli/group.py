"""The `lanewatch` command group. Each command lives in its own module, imported only when
that command runs: `lanewatch run` and `lanewatch gate` sit in hooks and agent loops, and
must not pay for the dashboard, the engine or psutil."""

from __future__ import annotations

import importlib

import click

from lanewatch import __version__
from lanewatch.cli.common import fail
from lanewatch.cli.exits import Exit
from lanewatch.lanes.logs import inert_warnings
from lanewatch.linux.support import INOTIFY, PROC, missing

# name -> "module:attribute" under lanewatch.cli (a group: lanes, actions, proof, records,
# service, tools). Register new commands here, one line each.
COMMANDS: dict[str, str] = {
    "id": "lanes.id_cmd:id_command",
    "run": "lanes.run_cmd:run_command",
    "roots": "lanes.roots_cmd:roots_command",
    "dash": "lanes.dash_cmd:dash_command",
    "demo": "tools.demo_cmd:demo_command",
    "prove": "proof.prove_cmd:prove_command",
    "gate": "proof.gate_cmd:gate_command",
    "hook": "proof.hook_cmd:hook_command",
    "drill": "tools.drill_cmd:drill_command",
    "audit": "tools.audit_cmd:audit_command",
    "status": "lanes.status_cmd:status_command",
    "ports": "lanes.ports_cmd:ports_command",
    "forward": "lanes.forward_cmd:forward_command",
    "incidents": "records.incidents_cmd:incidents_command",
    "kill": "actions.kill_cmd:kill_command",
    "clear": "actions.clear_cmd:clear_command",
    "trash": "actions.trash_cmd:trash_command",
    "restore": "actions.trash_cmd:restore_command",
    "purge": "actions.trash_cmd:purge_command",
    "reap": "actions.reap_cmd:reap_command",
    "record": "service.record_cmd:record_command",
    "history": "records.history_cmd:history_command",
    "hello": "service.hello_cmd:hello_command",
    "files": "lanes.files_cmd:files_command",
    "service": "service.service_cmd:service_command",
    "completion": "tools.completion_cmd:completion_command",
    "mcp": "service.mcp_cmd:mcp_command",
    "guard": "service.guard_cmd:guard_command",
    "events": "service.events_cmd:events_command",
    "doctor": "tools.doctor_cmd:doctor_command",
}


# Old names that still work but are not listed: `smoke` was the drill's first name.
ALIASES: dict[str, str] = {"smoke": "drill"}

# What each command needs from the system (linux/support.py); a command not listed needs
# both. `id`, `gate`, `hook` and `roots` read only git and files: they work anywhere.
_ANYWHERE: tuple[str, ...] = ()
_PROC_ONLY = (PROC,)
NEEDS: dict[str, tuple[str, ...]] = {
    "id": _ANYWHERE,
    "gate": _ANYWHERE,
    "hook": _ANYWHERE,
    "roots": _ANYWHERE,
    "completion": _ANYWHERE,
    "files": _ANYWHERE,  # reads one namespace's folder: the far end of a dashboard's files view
    "hello": _ANYWHERE,  # the many-host handshake: names a host even where the engine cannot run
    "guard": _ANYWHERE,  # an agent's hook: judges paths by their names and stamps
    "doctor": _ANYWHERE,  # says itself what this system lacks
    "mcp": _PROC_ONLY,  # who asks: the lane in an ancestor's environment
    "run": _PROC_ONLY,  # the owner's identity: start time and boot id
    "prove": _PROC_ONLY,
    "drill": _PROC_ONLY,
    "audit": _PROC_ONLY,
    "forward": _PROC_ONLY,  # the lane's command's namespaces, re-checked before entering
    "kill": _PROC_ONLY,  # who holds what, and a pidfd re-check before the signal
    "clear": _PROC_ONLY,
    "restore": _PROC_ONLY,
    "purge": _PROC_ONLY,
    "reap": _PROC_ONLY,
    "trash": _PROC_ONLY,
}


def check_platform(name: str) -> None:
    """One line and exit 9 where this system lacks what command `name` needs."""
    needs = NEEDS.get(ALIASES.get(name, name), (PROC, INOTIFY))
    lacking = missing(needs)
    if lacking:
        what = " and ".join("Linux's /proc" if n == PROC else "inotify" for n in lacking)
        fail(
            f"`{name}` needs {what}, which this system lacks "
            "(`lanewatch id`, `gate` and `hook` work anywhere)",
            Exit.UNSUPPORTED,
        )


def load_command(name: str) -> click.Command:
    module_name, attribute = COMMANDS[ALIASES.get(name, name)].split(":")
    module = importlib.import_module(f"lanewatch.cli.{module_name}")
    command: click.Command = getattr(module, attribute)
    return command


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        known = cmd_name in COMMANDS or cmd_name in ALIASES
        return load_command(cmd_name) if known else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # Before the command runs (its module is loaded, nothing of it ran): not for help or
        # shell completion, which work anywhere.
        own = rest[: rest.index("--")] if "--" in rest else rest  # not CMD's own `-h`
        if name and not ctx.resilient_parsing and not _HELP.intersection(own):
            check_platform(name)
        return name, command, rest


_HELP = {"--help", "-h"}


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits both
)
@click.version_option(__version__, prog_name="lanewatch")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Per-lane scratch namespaces for parallel agents, watched live.

    Without a command, opens the dashboard on every known scratch root.
    """
    if ctx.invoked_subcommand is None:
        check_platform("dash")
        ctx.invoke(load_command("dash"))


def main() -> None:
    inert_warnings()
    cli(prog_name="lanewatch")
