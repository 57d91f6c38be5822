"""`lanewatch service install | uninstall | status`: the always-on watcher (docs/service.md).

`install` writes the systemd unit (`service_unit.py`) and enables it with `systemctl --user`
(`--system`, as root: the system manager, every user's roots). Where systemd cannot be reached
(no systemctl, no user manager: containers, most CI runners) the unit is still written, and one
line says so, followed by the one command that does the same job (`nohup … record --service
&`); exit 1, since nothing was started. `--no-systemd` asks for that command without trying.
`status` judges the service's heartbeat (`records/service.py`): a process re-checked by its
identity, with a fresh beat.

Exit codes: 0 done (status: a service watches); 1 nothing was started (install) or none
watches (status).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import click

from lanewatch.cli.actions.reapopts import install_reaper, reap_options
from lanewatch.cli.common import echo_json, fail, friendly_errors, say
from lanewatch.cli.service.metricsopts import metrics_args, metrics_options
from lanewatch.cli.service.service_unit import UNIT_NAME, manual_command, unit_path, unit_text
from lanewatch.lanes.fsutil import write_atomic
from lanewatch.lanes.roots import state_dir
from lanewatch.records import service as svc

EXIT_OK = 0
EXIT_NOT_RUNNING = 1


def systemctl(system: bool, *args: str) -> tuple[bool, str]:
    """Run `systemctl [--user] ARGS`; (worked, its first line of complaint). systemctl cannot
    run in the test environment (no user manager): the failure path is what tests see."""
    exe = shutil.which("systemctl")
    if exe is None:
        return False, "systemctl is not installed"
    scope = [] if system else ["--user"]
    try:
        done = subprocess.run(
            [exe, *scope, *args],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"systemctl {' '.join(args)}: {exc}"
    if done.returncode == 0:
        return True, ""
    said = (done.stderr or done.stdout).strip().splitlines()
    return False, said[0] if said else f"systemctl exited {done.returncode}"


def _check_scope(system: bool) -> None:
    if system and os.geteuid() != 0:
        fail("--system installs root's service: run it with sudo")


@click.group("service")
def service_command() -> None:
    """The always-on watcher: record collisions while no dashboard runs (docs/service.md)."""


@service_command.command("install")
@click.option("--system", is_flag=True, help="As root: every user's roots, kernel attribution.")
@click.option("--no-systemd", is_flag=True, help="Only print the command to run without systemd.")
@metrics_options
@reap_options
@friendly_errors
def install_command(
    system: bool,
    no_systemd: bool,
    metrics_at: str | None,
    metrics_textfile: str | None,
    **reap: Any,
) -> None:
    """Write and enable the systemd unit that runs `lanewatch record --service`
    (with --metrics / --metrics-textfile: the service exposes Prometheus metrics; with
    --reap-age, --reap-trash-retention, --reap-budget: it also clears and purges by that
    policy, written to reap.toml; docs/reaper.md)."""
    _check_scope(system)
    extra = metrics_args(metrics_at, metrics_textfile) + install_reaper(system, **reap)
    if no_systemd:
        say(manual_command(system, extra))
        return
    path = unit_path(system)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, unit_text(system, extra).encode())
    ok, why = systemctl(system, "daemon-reload")
    if ok:
        ok, why = systemctl(system, "enable", "--now", UNIT_NAME)
    if ok:
        say(f"installed {path} and started it: `lanewatch service status` tells what it does")
        return
    scope = "systemd" if system else "systemd user manager"
    say(f"wrote {path}, but no {scope} is reachable here ({why}); run instead:", err=True)
    say(manual_command(system, extra))
    raise SystemExit(EXIT_NOT_RUNNING)


@service_command.command("uninstall")
@click.option("--system", is_flag=True, help="Root's service (every user's roots).")
@friendly_errors
def uninstall_command(system: bool) -> None:
    """Stop and disable the unit, remove it; stop a recorder started by hand too."""
    _check_scope(system)
    path = unit_path(system)
    if path.exists() or path.is_symlink():
        ok, why = systemctl(system, "disable", "--now", UNIT_NAME)
        if not ok:
            say(f"systemd did not disable it ({why})", err=True)
        path.unlink()
        systemctl(system, "daemon-reload")
        say(f"removed {path}")
    else:
        say(f"no unit at {path}")
    _stop_manual(system)


def _stop_manual(system: bool) -> None:
    """SIGTERM a recorder still beating in our folder (started with the nohup line), after
    re-checking at that moment that its pid is still that process and runs as us."""
    from lanewatch.actions.signals import send_checked
    from lanewatch.linux.procid import ProcessIdentity

    folder = svc.system_state_dir() if system else state_dir()
    state = svc.judge(folder)
    if state is None or not state.watching or state.beat is None:
        return
    b = state.beat
    identity = ProcessIdentity(b.pid, b.start_ticks, b.boot_id)
    result = send_checked(identity, signal.SIGTERM, expect_uid=os.getuid())
    say(f"the recorder pid {b.pid}: {result.reason}")
    deadline = time.monotonic() + 15
    while result.sent and time.monotonic() < deadline:
        now = svc.judge(folder)
        if now is None or not now.watching:
            break
        time.sleep(0.1)


@service_command.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@friendly_errors
def status_command(as_json: bool) -> None:
    """Whether a service watches (heartbeat and process re-checked), and its unit."""
    states = svc.services()
    watching = any(s.watching for s in states)
    units = {}
    for system in (False, True):
        path = unit_path(system)
        units["system" if system else "user"] = {"path": str(path), "installed": path.exists()}
    open_incidents = _open_incidents(states)
    if as_json:
        echo_json(
            {
                "watching": watching,
                "services": [s.to_json() for s in states],
                "units": units,
                "open_incidents": open_incidents,
            }
        )
    else:
        for line in svc.describe(states):
            say(line)
        for scope, unit in units.items():
            if unit["installed"]:
                say(f"unit ({scope}): {unit['path']}")
        if watching:
            say(f"open incidents in its roots: {open_incidents} (`lanewatch status`)")
    raise SystemExit(EXIT_OK if watching else EXIT_NOT_RUNNING)


def _open_incidents(states: list[svc.ServiceState]) -> int:
    from lanewatch.records.incident_log import read_all

    roots = sorted({r for s in states if s.beat for r in s.beat.roots if Path(r).is_dir()})
    with contextlib.suppress(OSError):
        return sum(r.ack_at is None for r in read_all(roots).values())
    return 0
