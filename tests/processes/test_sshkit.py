"""The test kit's ssh server (tests/kits/sshkit.py): its far side never depends on the shell
start-up files of whoever runs the suite (a broken ~/.bashrc, a stale pyenv lock, once hung
every far-host test). docs/flakes.md."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess

import pytest

from tests.kits.sshkit import ALIAS, SshServer
from tests.kits.sshkit import ssh_server as ssh_server  # a fixture

pytestmark = pytest.mark.unprivileged  # also as a normal user, whose home is its own


def test_a_login_starts_the_users_shell_with_the_kits_own_home(
    ssh_server: SshServer,
) -> None:
    # A start-up file in the kit's login home is read (the shell still runs, as on a real
    # host); the user's own home is not where it comes from.
    marker = "read-the-kits-bashrc"
    (ssh_server.login_home / ".bashrc").write_text(f"echo {marker} >&2\n")
    done = subprocess.run(
        [*shlex.split(ssh_server.ssh), ALIAS, 'printf %s "$HOME"'],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == str(ssh_server.login_home)
    if os.path.basename(pwd.getpwuid(os.getuid()).pw_shell) == "bash":
        assert marker in done.stderr  # bash started by sshd reads ~/.bashrc: the kit's
