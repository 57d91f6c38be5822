"""`lanewatch dash` (and bare `lanewatch`): the dashboard. Textual is imported only here, inside
the command, so `lanewatch run` and friends never load it."""

from __future__ import annotations

from pathlib import Path

import click

from lanewatch.cli.common import friendly_errors, mute_dead_streams, needs_terminal


@click.command("dash")
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Watch this scratch root (repeatable; default: every known root).",
)
@click.option("--poll", is_flag=True, help="Poll instead of inotify (network filesystems).")
@click.option(
    "--self-check",
    "--smoke",
    "self_check",
    is_flag=True,
    hidden=True,
    help="Start headless, wait for the first picture, print a summary and exit (for tests).",
)
@click.option(
    "--host",
    "host_names",
    multiple=True,
    metavar="NAME",
    help="Also show this host's lanes, live over ssh (repeatable; a name of hosts.toml or an "
    "ssh destination; docs/hosts.md). Default: the hosts.toml hosts marked `default`.",
)
@friendly_errors
def dash_command(
    roots: tuple[Path, ...], poll: bool, self_check: bool, host_names: tuple[str, ...]
) -> None:
    """Open the dashboard: live lanes, collisions and stale namespaces.

    Press ? inside for every key.
    """
    if not self_check:
        needs_terminal("for a picture in a script or CI: lanewatch status (or status --json)")
    from lanewatch.hosts import config
    from lanewatch.tui.app import make_app

    hosts = config.pick(host_names)
    engine = None
    if hosts:
        from lanewatch.engine.process import EngineProcess
        from lanewatch.hosts.many import ManyHosts
        from lanewatch.hosts.stream import HostStream

        local = EngineProcess(list(roots) or None, poll=poll)
        engine = ManyHosts(local, [HostStream(h) for h in hosts])
    app = make_app(list(roots) or None, poll=poll, engine=engine, long_lived=True)
    if self_check:
        from lanewatch.tui.selfcheck import self_check_run

        raise SystemExit(self_check_run(app))
    app.run()
    if app.leaving.code is not None:  # SIGTERM, SIGHUP or a hung-up terminal: 128+N
        mute_dead_streams()  # its unflushed bytes must not make the exit code 120
        raise SystemExit(app.leaving.code)
