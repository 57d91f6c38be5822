"""Who holds a live socket inside a namespace, when its server's fds cannot be read: the
processes that could not be inspected are listed, three at most, those whose command line names
the socket first. Pure: the kernel's table and the process list are built here."""

from __future__ import annotations

from lanewatch.actions.sockets import _who
from lanewatch.linux.unixsockets import BoundSocket
from lanewatch.processes.sockowners import SocketHolder, SocketOwners


def test_a_hidden_server_whose_command_names_the_socket_is_named_first() -> None:
    """Under load, other processes of the user that cannot be inspected (other lanes' fenced
    processes) came first by pid, and the ssh-agent was one of "2 more"."""
    sock = BoundSocket("/proc/77/fd/13/agent.sock", inode=9, vfs=(1, 2), uid=1001)
    others = [SocketHolder(pid, "sleep 30", 1001) for pid in (101, 102, 103, 104)]
    agent = SocketHolder(900, "ssh-agent -D -a /proc/77/fd/13/agent.sock", 1001)
    root = SocketHolder(50, "ssh-agent -a /root/agent.sock", 0)  # another uid: never named
    said = _who(sock, SocketOwners(unreadable=[root, *others, agent]))
    assert said.startswith("its server of uid 1001 is one of 5 process(es) that could not be "
                           "inspected: pid 900 (ssh-agent -D -a /proc/77/fd/13/agent.sock), "
                           "pid 101 (sleep 30), pid 102 (sleep 30) and 2 more"), said  # fmt: skip
    # A command naming no such file keeps the process list's order ("s" is in every command
    # above, but is none's argument).
    plain = BoundSocket("/proc/77/fd/13/s", inode=9, vfs=(1, 2), uid=1001)
    assert "inspected: pid 101 (sleep 30)," in _who(
        plain, SocketOwners(unreadable=[*others, agent])
    )


def test_a_long_command_keeps_the_argument_that_names_the_socket() -> None:
    """Cut at 60 characters, `ssh-agent -a /home/<user>/<a long checkout path>/agent.sock`
    lost the socket's name, the one clue that it is the server."""
    long_dir = "/home/lanewatch-ci/projects/some-long-checkout-name/.scratch/ns.agent/tmp"
    sock = BoundSocket(f"{long_dir}/agent.sock", inode=9, vfs=(1, 2), uid=1001)
    agent = SocketHolder(900, f"/usr/bin/ssh-agent -D -a {long_dir}/agent.sock", 1001)
    said = _who(sock, SocketOwners(by_inode={9: [agent]}))
    assert said.startswith("held by pid 900 (ssh-agent …"), said
    assert said.endswith("/agent.sock)"), said
    shown = said[len("held by pid 900 (") : -1]
    assert len(shown) <= 60, shown
    # A long command whose naming argument is within the width, or names nothing: cut at its end.
    near = SocketHolder(901, "srv -a agent.sock " + "x" * 80, 1001)
    assert f"(srv -a agent.sock {'x' * 41}…)" in _who(sock, SocketOwners(by_inode={9: [near]}))
    whole = SocketHolder(903, f"ssh-agent -a /s/agent.sock {'-x ' * 30}", 1001)
    assert "(ssh-agent -a /s/agent.sock -x" in _who(sock, SocketOwners(by_inode={9: [whole]}))
    short = SocketHolder(902, "python3 -m server", 1001)
    assert "(python3 -m server)" in _who(sock, SocketOwners(by_inode={9: [short]}))


def test_a_program_whose_path_has_spaces_is_named_by_its_own_name() -> None:
    """The joined command line cannot tell a space in a path from one between words: the
    kernel's argv can (a clone in `/tmp/s22 mid ü/ci` named its Python `s22`)."""
    argv = ("/tmp/s22 mid ü/ci/.venv/bin/python", "-c", "import socket\n" * 8, "/tmp/lsp.sock")
    server = SocketHolder(24757, " ".join(argv), 0, 9, argv)
    sock = BoundSocket("/tmp/lsp.sock", inode=9, vfs=(1, 2), uid=0)
    said = _who(sock, SocketOwners(by_inode={9: [server]}))
    assert said == "held by pid 24757 (python … /tmp/lsp.sock)", said
