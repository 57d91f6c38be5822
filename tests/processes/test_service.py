"""`lanewatch service`: the unit it writes, how it degrades without systemd, the heartbeat
`status` judges, and a privileged recorder's files in a user's root (owned by that user).

systemd cannot run here (no user manager in a container or a CI runner, and a real one on a
developer's machine must not be touched by a test): `systemctl` is a script in tmp_path that
fails as systemd does without a user manager ("Failed to connect to bus"), first on PATH.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.cli.service.service_unit import manual_command, unit_text
from lanewatch.records import service as svc
from lanewatch.records.evidence import EvidenceStore
from lanewatch.records.incident_log import IncidentLog
from lanewatch.records.writes import WriteEntry, WriteLog
from tests.conftest import LANEWATCH, Spawn, wait_for
from tests.kits.actionkit import NOBODY

pytestmark = pytest.mark.unprivileged


def systemd_word(word: str) -> str:
    """`word` as one word of a unit's ExecStart= (systemd.service(5), "Command lines"): `%` and
    `$` doubled, quoted where it holds a space, a quote, a backslash or a semicolon."""
    doubled = word.replace("%", "%%").replace("$", "$$")
    if not any(c in doubled for c in " \t\"'\\;"):
        return doubled
    return '"' + doubled.replace("\\", "\\\\").replace('"', '\\"') + '"'


# The interpreter as the unit and the shell line spell it: the checkout may lie under a path
# with a space or a quote in it (`/srv/a b/ç`), which each then quotes in its own way.
UNIT_PYTHON = systemd_word(sys.executable)
SHELL_PYTHON = shlex.quote(sys.executable)


def no_user_manager(tmp_path: Path) -> dict[str, str]:
    """An environment whose `systemctl` fails the way it does with no user manager, and whose
    HOME is a fake one in tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text("#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n")
    fake.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("XDG_CONFIG_HOME", None)
    env["LANEWATCH_SYSTEM_STATE_DIR"] = str(tmp_path / "system-state")
    return env


def lanewatch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_install_writes_the_user_unit_and_says_what_to_run_without_systemd(
    tmp_path: Path, isolated_state: Path
) -> None:
    env = no_user_manager(tmp_path)
    done = lanewatch(env, "service", "install")
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "lanewatch.service"
    assert done.returncode == 1, done.stdout + done.stderr
    # One line says what happened and why; stdout is the one command to run instead.
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"wrote {unit}" in done.stderr
    assert "no systemd user manager is reachable here (Failed to connect to bus" in done.stderr
    command = done.stdout.strip()
    assert command.count("\n") == 0
    assert command.startswith(f"nohup {SHELL_PYTHON} -m lanewatch record --service >>")
    assert command.endswith(f"{isolated_state / 'service.log'} 2>&1 &")
    text = unit.read_text()
    assert f"ExecStart={UNIT_PYTHON} -m lanewatch record --service\n" in text
    assert f"Environment=LANEWATCH_STATE_DIR={isolated_state}\n" in text
    assert "WantedBy=default.target" in text and "Restart=on-failure" in text
    # --no-systemd: the command only; nothing is written.
    unit.unlink()
    done = lanewatch(env, "service", "install", "--no-systemd")
    assert done.returncode == 0 and done.stdout.strip() == command and not unit.exists()
    # uninstall removes the unit and says so, although systemd could not disable it.
    lanewatch(env, "service", "install")
    done = lanewatch(env, "service", "uninstall")
    assert done.returncode == 0 and not unit.exists(), done.stdout + done.stderr
    assert f"removed {unit}" in done.stdout
    # status: no service, said as one line, exit 1.
    done = lanewatch(env, "service", "status")
    assert done.returncode == 1
    assert done.stdout.startswith("service: none: nothing records while no dashboard runs")


def test_install_writes_the_metrics_options_into_the_unit_and_the_service_serves_them(
    tmp_path: Path, isolated_state: Path, spawn: Spawn
) -> None:
    """`--metrics` and `--metrics-textfile` reach the unit's ExecStart (the textfile made
    absolute, quoted for systemd) and the nohup line; that line, run as docs/service.md says,
    is a recorder that really writes the textfile."""
    env = no_user_manager(tmp_path)
    work = tmp_path / "work"
    metrics = ("--metrics", "127.0.0.1:0", "--metrics-textfile", "prom dir/lane%s.prom")
    (work / "prom dir").mkdir(parents=True)
    done = subprocess.run(
        [*LANEWATCH, "service", "install", *metrics],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # written; no systemd to start it
    textfile = work / "prom dir" / "lane%s.prom"
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "lanewatch.service"
    exec_start = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    assert exec_start == (
        f"ExecStart={UNIT_PYTHON} -m lanewatch record --service --metrics 127.0.0.1:0 "
        f'--metrics-textfile "{work}/prom dir/lane%%s.prom"'
    )
    manual = done.stdout.strip()
    assert f"--metrics 127.0.0.1:0 --metrics-textfile '{textfile}' >>" in manual

    # The documented line, as a shell runs it: a recorder that keeps the textfile.
    isolated_state.mkdir(parents=True, exist_ok=True)  # where its log goes
    spawn(["sh", "-c", manual], cwd=tmp_path, env=env)
    try:
        wait_for(
            lambda: textfile.exists() and "lanewatch_engine_up 1.0" in textfile.read_text(),
            30,
            what=f"the service's metrics in {textfile}",
        )
    finally:
        lanewatch(env, "service", "uninstall")
    assert unit.exists() is False


@pytest.mark.parametrize("bad", ["nope:x", "127.0.0.1:70000", "host:"])
def test_install_refuses_a_bad_metrics_address_before_writing_anything(
    tmp_path: Path, isolated_state: Path, bad: str
) -> None:
    env = no_user_manager(tmp_path)
    done = lanewatch(env, "service", "install", "--metrics", bad)
    assert done.returncode == 2, done.stdout + done.stderr  # as `record --metrics` refuses it
    assert "--metrics" in done.stderr and "is not ADDR:PORT" in done.stderr
    assert not (tmp_path / "home" / ".config" / "systemd").exists()
    record = lanewatch(env, "record", "--metrics", bad)  # the same check, the same words
    assert record.returncode == 2 and "is not ADDR:PORT" in record.stderr


def test_the_system_unit_watches_every_users_roots() -> None:
    text = unit_text(system=True)
    assert f"ExecStart={UNIT_PYTHON} -m lanewatch record --service --system\n" in text
    assert "WantedBy=multi-user.target" in text and "Environment=" not in text
    assert "--service --system >>/" in manual_command(system=True)


def test_quoting_in_the_unit_is_systemds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    odd = tmp_path / "a dir" / "100%$HOME"
    monkeypatch.setenv("LANEWATCH_STATE_DIR", str(odd))
    line = next(x for x in unit_text(system=False).splitlines() if x.startswith("Environment="))
    assert line == f'Environment="LANEWATCH_STATE_DIR={tmp_path}/a dir/100%%$$HOME"'


def test_a_beat_is_judged_by_its_process_and_its_age(tmp_path: Path) -> None:
    assert svc.judge(tmp_path) is None
    beat = svc.Beat.mine("user", [str(tmp_path)])
    path = svc.write_beat(tmp_path, beat)
    state = svc.judge(tmp_path)
    assert state is not None and state.watching and f"pid {os.getpid()} alive" in state.reason
    old = state.heartbeat_at - svc.OVERDUE - 1  # type: ignore[operator]
    os.utime(path, (old, old))
    state = svc.judge(tmp_path)
    assert state is not None and not state.watching and "no heartbeat for over" in state.reason
    # A beat naming a process that is gone (this pid with other start ticks) is not watching.
    svc.write_beat(tmp_path, replace(beat, start_ticks=beat.start_ticks + 1))
    state = svc.judge(tmp_path)
    assert state is not None and not state.watching and "another process" in state.reason
    svc.write_beat(tmp_path, svc.stopped(beat))
    state = svc.judge(tmp_path)
    assert state is not None and not state.watching and state.reason.startswith("stopped at")
    (tmp_path / svc.BEAT_FILE).write_text("not json")
    assert svc.judge(tmp_path) is None


@pytest.mark.privileged
@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another uid needs root")
def test_a_privileged_recorders_files_in_a_users_root_are_the_users(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.chown(root, NOBODY, NOBODY)
    IncidentLog(str(root)).persist([_an_incident_record(str(root))])
    WriteLog(str(root)).append([WriteEntry.from_json(_a_write(str(root)))])  # type: ignore[list-item]
    assert EvidenceStore(str(root)).put(b"evidence")
    made = list(root.rglob("*"))
    assert len(made) >= 6, made  # .lanewatch-root, incidents + lock, writes + dir, evidence
    others = [(str(p), p.lstat().st_uid) for p in made if p.lstat().st_uid != NOBODY]
    assert others == []


def _an_incident_record(root: str) -> object:
    from lanewatch.model.incidents import record_from_json

    rec = record_from_json(
        {
            "id": "foreign-writer-0123456789ab",
            "kind": "foreign-writer",
            "victim": f"{root}/ns",
            "intruder": {"lane": "B"},
            "first_seen": 1.0,
            "last_seen": 1.0,
            "count": 1,
            "grade": "inferred",
            "evidence": [],
        },
        root,
    )
    assert rec is not None
    return rec


def _a_write(root: str) -> dict[str, object]:
    return {"path": f"{root}/ns/f", "time": 1.0, "pid": 1, "event": "modify"}
