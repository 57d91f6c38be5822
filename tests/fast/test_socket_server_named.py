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
