"""Which hosts there are and how to reach each: `hosts.toml` in the state folder, or `--host`.

    [hosts.build]
    ssh = "build.example.org"        # what `ssh` is given (default: the name): an alias of the
                                     # user's ~/.ssh/config works, with its keys and jump hosts
    lanewatch = "~/.local/bin/lanewatch"   # the command that runs lanewatch there
    default = true                   # shown without --host (dash, status)

`--host NAME` names one of them, or any ssh destination (then `lanewatch` runs there). The ssh
client itself is `$LANEWATCH_SSH` (a command line: "ssh -F ~/my_config"), else `ssh`.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lanewatch.errors import LanewatchError
from lanewatch.lanes.roots import state_dir

ENV_SSH = "LANEWATCH_SSH"
FILE_NAME = "hosts.toml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
# Never a prompt (a dashboard has no terminal for one) and a dead link noticed within seconds.
SSH_OPTIONS = (
    "-o",
    "BatchMode=yes",
    "-o",
    "ServerAliveInterval=2",
    "-o",
    "ServerAliveCountMax=3",
    "-o",
    "ConnectTimeout=10",
)


class HostConfigError(LanewatchError):
    """hosts.toml cannot be read, or a host's name cannot be one."""


@dataclass(frozen=True, slots=True)
class Host:
    name: str  # shown in the HOST column, and the prefix of its keys
    destination: str  # what ssh is given
    command: str = "lanewatch"  # the remote command line that runs lanewatch (`--rsync-path`)
    default: bool = False

    def ssh(self) -> list[str]:
        """The ssh client's argv up to (and with) the destination."""
        return [*ssh_command(), *SSH_OPTIONS, "--", self.destination]

    def argv(self, *args: str) -> list[str]:
        """`ssh … DEST 'COMMAND ARGS…'`: ssh hands the far side's shell one string, so each
        argument is quoted; the command itself is the user's, as written."""
        return [*self.ssh(), " ".join([self.command, *(shlex.quote(a) for a in args)])]


def ssh_command() -> list[str]:
    raw = os.environ.get(ENV_SSH, "").strip()
    return shlex.split(raw) if raw else ["ssh"]


def hosts_file() -> Path:
    return state_dir() / FILE_NAME


def configured(path: Path | None = None) -> dict[str, Host]:
    """Every host of hosts.toml, by name; {} when there is none."""
    path = path or hosts_file()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise HostConfigError(f"cannot read {path}: {exc}") from exc
    table = data.get("hosts", {})
    if not isinstance(table, dict):
        raise HostConfigError(f"{path}: `hosts` must be a table of hosts")
    found: dict[str, Host] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise HostConfigError(f"{path}: hosts.{name} must be a table")
        _check_name(name)
        found[name] = Host(
            name=name,
            destination=str(entry.get("ssh", name)),
            command=str(entry.get("lanewatch", "lanewatch")),
            default=bool(entry.get("default", False)),
        )
    return found


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise HostConfigError(
            f"host name {name!r}: letters, digits, '.', '_', '-', '@' only (it names its lanes)"
        )


def pick(names: Sequence[str], path: Path | None = None) -> list[Host]:
    """The hosts `--host` named (from hosts.toml, else the name as an ssh destination), or the
    file's `default = true` ones when none was named."""
    known = configured(path)
    if not names:
        return [h for h in known.values() if h.default]
    picked: list[Host] = []
    for name in dict.fromkeys(names):
        if name not in known:
            _check_name(name)
        picked.append(known.get(name) or Host(name=name, destination=name))
    return picked
