"""A real OpenSSH server on loopback, as whoever runs the test: the "second host" of the
many-host tests (docs/hosts.md).

`make_server` writes a host key and a user key (`session_keys`: made once per session and copied),
an sshd_config (a free high port on 127.0.0.1, no PAM, that authorized_keys, a login HOME of its
own) and a client ssh_config (alias `far` → that port, that key, its own known_hosts, BatchMode),
and starts `sshd -D -e`. A normal user can run sshd on a high port and log in as itself; root needs
/run/sshd (the package's service makes it; `.ci/run` too). Tests point lanewatch at it with
$LANEWATCH_SSH="ssh -F cfg" and take one of two fixtures: `ssh_server`, a server of the test's own
(for a test that stops and restarts it: the host going away), or `shared_ssh`, one server for the
module's tests that only log in (each still has its own far home, root and lanes under its own
tmp_path, so none depends on another having run). The far side is this same machine with its own
state folder, root and TMPDIR: `far_command`; `far_live` is a live far lane.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from lanewatch.hosts.config import Host
from tests.conftest import wait_for

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ALIAS = "far"


def skip_reason() -> str | None:
    if not os.access(SSHD, os.X_OK):
        return "no OpenSSH server (apt-get install openssh-server; .ci/run does)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "no OpenSSH client (ssh, ssh-keygen)"
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        return "sshd as root needs /run/sshd (mkdir -m 755 /run/sshd; .ci/run makes it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SshServer:
    home: Path
    port: int
    client_config: Path
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.home / "sshd.log"

    @property
    def login_home(self) -> Path:
        """$HOME of a login through this server (its shell's start-up files come from here)."""
        return self.home / "login-home"

    @property
    def ssh(self) -> str:
        """$LANEWATCH_SSH for this server."""
        return f"ssh -F {shlex.quote(str(self.client_config))}"

    def start(self) -> None:
        cfg = self.home / "sshd_config"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(cfg)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                process_group=0,
            )
        wait_for(self._listening, 20, what=f"sshd listening on {self.port} ({self.log})")

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"sshd exited: {self.log.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        """sshd and every session it forked (they run in sessions of their own): the links
        through it drop, as when a host goes away."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            family = psutil.Process(proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        for p in [psutil.Process(proc.pid), *family]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                p.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        psutil.wait_procs(family, timeout=10)


def far_command(home: Path, root: Path | None = None) -> str:
    """The far side's lanewatch: this interpreter with its own state folder, root and TMPDIR
    (ssh starts the user's shell with a clean environment; its HOME is the server's
    `login_home`)."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {
        "LANEWATCH_STATE_DIR": home / "state",
        "LANEWATCH_ROOT": root or home / "root",
        "TMPDIR": home / "tmp",
    }
    assigns = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
    return f"env {assigns} {shlex.quote(sys.executable)} -m lanewatch"


def write_hosts(state: Path, entries: dict[str, str], destination: str = ALIAS) -> Path:
    """hosts.toml in the local state folder: name → remote command, all through `far`."""
    state.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, command in entries.items():
        # JSON's strings are TOML's basic strings: quotes in the command (a checkout path with
        # a space, quoted by far_command) stay inside it.
        ssh, lanewatch = json.dumps(destination), json.dumps(command)
        lines += [f"[hosts.{name}]", f"ssh = {ssh}", f"lanewatch = {lanewatch}", ""]
    path = state / "hosts.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


KEYS = ("host_key", "host_key.pub", "user_key", "user_key.pub")


def make_keys(folder: Path) -> Path:
    """A host key and a user key (ed25519, no passphrase) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-f", str(folder / "host_key")], check=True)
    subprocess.run([*keygen, "-f", str(folder / "user_key")], check=True)
    return folder


def make_server(home: Path, keys: Path | None = None) -> SshServer:
    """Keys (copied from `keys`, else generated), configs and a started sshd under `home` (the
    fixtures', and the benchmark's)."""
    home.mkdir(parents=True)
    home.chmod(0o700)
    if keys is None:
        make_keys(home)
    else:
        for name in KEYS:  # copy2 keeps the private keys' mode 0600, which sshd and ssh demand
            shutil.copy2(keys / name, home / name)
    shutil.copy(home / "user_key.pub", home / "authorized_keys")
    # The far login's own HOME, empty: the user's shell still starts the far command, as on a
    # real host, but reads its start-up files from here, not the user's (a broken ~/.bashrc, a
    # stale pyenv lock, must not hang the suite). docs/flakes.md.
    login_home = home / "login-home"
    login_home.mkdir(mode=0o700)
    port = _free_port()
    (home / "sshd_config").write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {home / 'host_key'}",
                f"AuthorizedKeysFile {home / 'authorized_keys'}",
                f"PidFile {home / 'sshd.pid'}",
                "UsePAM no",
                "StrictModes no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "PrintMotd no",
                "Banner none",
                "LogLevel ERROR",
                "ClientAliveInterval 2",
                f'SetEnv "HOME={login_home}"',
                "",
            ]
        )
    )
    client = home / "ssh_config"
    client.write_text(
        "\n".join(
            [
                f"Host {ALIAS}",
                "    HostName 127.0.0.1",
                f"    Port {port}",
                f"    User {psutil.Process().username()}",
                f"    IdentityFile {home / 'user_key'}",
                "    IdentitiesOnly yes",
                f"    UserKnownHostsFile {home / 'known_hosts'}",
                "    StrictHostKeyChecking accept-new",
                "    BatchMode yes",
                "    LogLevel ERROR",
                "",
            ]
        )
    )
    client.chmod(0o600)
    server = SshServer(home, port, client)
    server.start()
    return server


_KEYS: dict[Path, Path] = {}  # the session's base temp folder → its keys


def session_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host and user keys of every server of this session (of this xdist worker), made
    once. A helper, not a fixture: a module that imports `ssh_server` needs nothing else."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    base = tmp_path_factory.getbasetemp()
    if base not in _KEYS:
        _KEYS[base] = make_keys(tmp_path_factory.mktemp("ssh-keys"))
    return _KEYS[base]


@pytest.fixture
def ssh_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SshServer]:
    """A server of this test's own: it may stop and restart it."""
    server = make_server(tmp_path / "ssh", session_keys(tmp_path_factory))
    monkeypatch.setenv("LANEWATCH_SSH", server.ssh)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shared_ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """The module's server, for the tests that only log in through it (none stops it); from
    its first test to the module's end $LANEWATCH_SSH names it (a test's own `ssh_server`
    overrides that for the test)."""
    home = tmp_path_factory.mktemp("shared-ssh") / "ssh"
    server = make_server(home, session_keys(tmp_path_factory))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("LANEWATCH_SSH", server.ssh)
            yield server
    finally:
        server.stop()


def far_env(home: Path) -> dict[str, str]:
    """This process's environment as the far side's lanewatch sees its own."""
    return {
        **os.environ,
        "LANEWATCH_STATE_DIR": str(home / "state"),
        "LANEWATCH_ROOT": str(home / "root"),
        "TMPDIR": str(home / "tmp"),
    }


def far_lane(
    procs: list[subprocess.Popen[bytes]],
    repo: Path,
    home: Path,
    lane: str,
    cmd: Sequence[str] = ("sleep", "600"),
    fence: str = "auto",
    heartbeat: float | None = None,
) -> tuple[subprocess.Popen[bytes], Path]:
    """A real `lanewatch run` lane in the far side's root (its state folder, its registry);
    returns once its stamp names CMD. `fence="none"`: a lane that reaches the far shared temp;
    `heartbeat`: its interval (else the default, 5 s)."""
    from lanewatch.lanes.names import namespace_name
    from lanewatch.lanes.stamp import read_stamp
    from tests.kits.enginekit import _checkout_id

    root = home / "root"
    root.mkdir(parents=True, exist_ok=True)
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "lanewatch", "run", "--root", str(root), "--lane", lane]
    if heartbeat is not None:
        args += ["--heartbeat", str(heartbeat)]
    proc = subprocess.Popen(
        [*args, "--fence", fence, "--", *cmd],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        process_group=0,
        env=far_env(home),
    )
    procs.append(proc)
    ns = root.resolve() / namespace_name(_checkout_id(repo), lane)

    def ready() -> bool:
        s = read_stamp(ns).stamp
        return s is not None and s.pid == proc.pid and s.child_pid is not None

    wait_for(lambda: ready() or proc.poll() is not None, 20, what=f"far lane {lane}")
    assert proc.poll() is None, f"far lane {lane} ended: {proc.returncode}"
    return proc, ns


@dataclass
class FarLive:
    """A live far lane `far-lane` (`far_lane`) and the host that reaches its far side."""

    home: Path
    proc: subprocess.Popen[bytes]
    ns: Path
    host: Host

    @property
    def key(self) -> str:
        """Its key as the near side shows it."""
        from lanewatch.hosts.farviews import remote_key

        return remote_key(ALIAS, str(self.ns))


def start_far_live(
    procs: list[subprocess.Popen[bytes]], repo: Path, tmp_path: Path, heartbeat: float | None = None
) -> FarLive:
    home = tmp_path / "farhome"
    proc, ns = far_lane(procs, repo, home, "far-lane", heartbeat=heartbeat)
    return FarLive(home, proc, ns, Host(ALIAS, ALIAS, far_command(home)))


@pytest.fixture
def far_live(repo: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> FarLive:
    return start_far_live(procs, repo, tmp_path)


def refused_far_claim(repo: Path, home: Path, lane: str) -> None:
    """A second claim of the live far lane `lane`, there: refused by its lock (exit 3), and
    recorded by the far engine as an incident."""
    claim = ["run", "--root", str(home / "root"), "--lane", lane, "--", "true"]
    again = subprocess.run(
        [sys.executable, "-m", "lanewatch", *claim],
        cwd=repo,
        env=far_env(home),
        capture_output=True,
        timeout=60,
    )
    assert again.returncode == 3, again.stderr


def old_scheme_script(home: Path, far: str) -> str:
    """A far "lanewatch" that keeps scheme 0: its hello says so, the rest is the real one."""
    home.mkdir(parents=True, exist_ok=True)
    script = home / "old-lanewatch"
    hello = (
        '{"schema": "lanewatch.hello/1", "version": "0.0.9", "scheme": 0, "hostname": "old", '
        '"user": "u", "uid": 0, "roots": [], "default_root": "/", "state_dir": "/"}'
    )
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = hello ]; then echo \'{hello}\'; exit 0; fi\nexec {far} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)
