"""`lanewatch hello`: what this host runs, for the many-host view's handshake (docs/hosts.md).

A dashboard or `status --host NAME` runs `ssh NAME lanewatch hello --json` first: the answer
says which lanewatch and which scheme (`lanes/scheme.py`) the far side keeps, who it runs as and
which roots it knows, before any stream starts. It reads the registry and nothing else: cheap,
and it works where the engine would not (no inotify), so a host is named even then.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

import click

from lanewatch import __version__
from lanewatch.cli.common import friendly_errors, say
from lanewatch.cli.reports import report
from lanewatch.errors import LanewatchError
from lanewatch.lanes.roots import Registry, default_root, state_dir
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.linux.procid import hostname


def hello_json() -> dict[str, Any]:
    try:
        roots = [str(p) for p in Registry().paths()]
    except LanewatchError:
        roots = []  # an unreadable registry: the stream's own health lines say so
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {
        "version": __version__,
        "scheme": SCHEME_VERSION,
        "hostname": hostname(),
        "user": user,
        "uid": os.getuid(),
        "roots": roots,
        "default_root": str(default_root()),
        "state_dir": str(state_dir()),
        # What this `record` accepts beyond 0.1's: the far side of a many-host
        # dashboard asks for no option its host's lanewatch does not list here.
        "record": ["views", "until-eof", "beats"],
    }


@click.command("hello")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (what the far side reads).")
@friendly_errors
def hello_command(as_json: bool) -> None:
    """Say which lanewatch and scheme this host runs, as whom, and its roots."""
    data = hello_json()
    if as_json:
        report("hello", data)
        return
    for key, value in data.items():
        say(f"{key:12} {value}")
