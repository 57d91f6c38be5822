"""The systemd unit of the always-on recorder, where it lives, and the one command that does
its job where there is no systemd (a container, a CI runner, a machine without a user manager).

The unit runs this very interpreter (`sys.executable -m lanewatch`), so a venv install works
without `lanewatch` on systemd's PATH. ExecStart arguments are quoted for systemd (its own
rules: double quotes, `%` and `$` doubled), never handed to a shell.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from lanewatch.lanes.roots import ENV_STATE_DIR, state_dir

UNIT_NAME = "lanewatch.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")


def user_unit_dir() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "systemd" / "user"


def unit_path(system: bool) -> Path:
    return (SYSTEM_UNIT_DIR if system else user_unit_dir()) / UNIT_NAME


def record_args(system: bool, extra: Sequence[str] = ()) -> list[str]:
    """The recorder's command line: the headless engine, as the service. `extra`: more
    `record` options, checked by the caller (`--metrics`, `--metrics-textfile`)."""
    return [
        sys.executable,
        "-m",
        "lanewatch",
        "record",
        "--service",
        *(["--system"] if system else []),
        *extra,
    ]


def _systemd_quote(arg: str) -> str:
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if escaped and not any(c in escaped for c in " \t\"'\\;"):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_text(system: bool, extra: Sequence[str] = ()) -> str:
    """The unit file: restarts on failure, stops on SIGTERM (the recorder writes `stopped_at`
    in its beat and exits 0). A state folder chosen by $LANEWATCH_STATE_DIR at install time is
    kept, so the service and the user's commands read the same registry."""
    exec_start = " ".join(_systemd_quote(a) for a in record_args(system, extra))
    env = os.environ.get(ENV_STATE_DIR)
    lines = [
        "# Written by `lanewatch service install`; `lanewatch service uninstall` removes it.",
        "[Unit]",
        "Description=lanewatch: record lane collisions in "
        + ("every user's scratch roots" if system else "your scratch roots")
        + " while no dashboard runs",
        "",
        "[Service]",
        "Type=simple",
        f"ExecStart={exec_start}",
        *(
            [f"Environment={_systemd_quote(f'{ENV_STATE_DIR}={env}')}"]
            if env and not system
            else []
        ),
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        f"WantedBy={'multi-user.target' if system else 'default.target'}",
        "",
    ]
    return "\n".join(lines)


def log_path(system: bool) -> Path:
    from lanewatch.records.service import system_state_dir

    return (system_state_dir() if system else state_dir()) / "service.log"


def manual_command(system: bool, extra: Sequence[str] = ()) -> str:
    """The one command that runs the service without systemd (docs/service.md)."""
    args = " ".join(shlex.quote(a) for a in record_args(system, extra))
    return f"nohup {args} >>{shlex.quote(str(log_path(system)))} 2>&1 &"
