"""A live unix socket is never moved: the check clear and purge make, for root and normal
users alike.

A server listening on a socket file inside a namespace (an ssh-agent started with `-a` there or
with the lane's TMPDIR, a tmux server's socket in the lane's private /tmp, a language server)
keeps no working directory and no path fd inside: its listening socket is a socket fd. A clear
that went by open files alone moved it: the server kept running with its socket in the trash,
its clients broke, and a later purge deleted the socket under it. So every socket file inside is
looked up in the kernel's table of bound sockets (`linux/unixsockets.py`, by device and inode,
which holds however the binder named the path: `/tmp/...` from inside a fence), and one that
is live refuses, naming the socket and the process that holds it (or why none can be named).

Where the kernel's table gives no file identity (netlink refused; /proc/net/unix only), a
socket file counts as live when a path in the table leads to that very file here; any other
socket file then cannot be told and refuses too. A socket file with no live socket (its server
gone) is an ordinary leftover and is moved with the rest.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from lanewatch.linux.unixsockets import BoundSocket, bound_unix_sockets, same_file
from lanewatch.processes.sockowners import SocketHolder, SocketOwners, socket_owners

MAX_LISTED = 5
COMMAND_WIDTH = 60  # characters of a process's command line in a message


def why_listening(path: Path) -> str | None:
    """Why `path` must not be moved because a live unix socket is bound inside, or None."""
    return _verdict([path]).get(str(path))


def listening_inside(paths: Sequence[Path]) -> dict[str, str]:
    """For each of `paths` that holds a live socket (or one that cannot be told), why."""
    return _verdict(paths)


def _verdict(paths: Sequence[Path]) -> dict[str, str]:
    bound = bound_unix_sockets()
    out: dict[str, str] = {}
    live: dict[str, list[tuple[str, BoundSocket]]] = {}
    untold: dict[str, list[str]] = {}
    for path in paths:
        files = [] if not _worth_walking(path, bound) else _socket_files(path)
        for where, st in files:
            match = _match(where, st, bound)
            if match is not None:
                live.setdefault(str(path), []).append((where, match))
            elif bound is None or not all(b.vfs is not None for b in bound):
                untold.setdefault(str(path), []).append(where)
    owners = socket_owners({b.inode for found in live.values() for _, b in found})
    for path in paths:
        key = str(path)
        if key in live:
            out[key] = _live_text(live[key], owners)
        elif key in untold:
            out[key] = _untold_text(untold[key], bound is None)
    return out


def _worth_walking(path: Path, bound: list[BoundSocket] | None) -> bool:
    """Skip the walk when the kernel's table proves no live socket can be inside: none is
    bound on the namespace's filesystem, and none by a path under it."""
    if bound is None or any(b.vfs is None for b in bound):
        return True
    try:
        dev = os.lstat(path).st_dev
    except OSError:
        return True
    prefix = f"{path}/"
    return any((b.vfs is not None and b.vfs[0] == dev) or b.path.startswith(prefix) for b in bound)


def _socket_files(path: Path) -> list[tuple[str, os.stat_result]]:
    """Every socket file under `path`, never through a symlink; unreadable folders skipped
    (what cannot be listed cannot be judged here: the holders' check reads /proc instead)."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [str(path)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                found.append((entry.path, st))
    return found


def _match(where: str, st: os.stat_result, bound: list[BoundSocket] | None) -> BoundSocket | None:
    for b in bound or ():
        if same_file(b, st):
            return b
        if b.vfs is None and b.path == where:
            try:
                here = os.lstat(b.path)
            except OSError:
                continue
            if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
                return b
    return None


def _live_text(found: list[tuple[str, BoundSocket]], owners: SocketOwners) -> str:
    parts = []
    for where, b in found[:MAX_LISTED]:
        named = "" if b.path == where else f", bound as {b.path}"
        parts.append(f"{where} ({_who(b, owners)}{named})")
    more = len(found) - MAX_LISTED
    listed = "; ".join(parts) + (f" and {more} more" if more > 0 else "")
    return (
        f"a live socket is bound inside: {listed}; moving it would leave its server running "
        "with its socket in the trash and break its clients: end the server first"
    )


def _who(b: BoundSocket, owners: SocketOwners) -> str:
    name = b.path.rpartition("/")[2]
    holders = owners.by_inode.get(b.inode, [])
    if holders:
        return "held by " + _named(holders, name)
    uid = f" of uid {b.uid}" if b.uid is not None else ""
    hidden = [h for h in owners.unreadable if b.uid is None or h.uid == b.uid]
    # Those whose command line names the socket first (`ssh-agent -a …/agent.sock`): its
    # server is likeliest among them, and only three are named.
    hidden.sort(key=lambda h: _naming(_words(h), name) is None)
    if hidden:
        return (
            f"its server{uid} is one of {len(hidden)} process(es) that could not be "
            f"inspected: {_named(hidden, name)}"
        )
    return f"its server{uid} is not among the processes visible here"


def _words(h: SocketHolder) -> tuple[str, ...]:
    """Its command line's words as the kernel keeps them; without them (an unreadable or
    empty cmdline: its command is its short name) that command, split."""
    return h.argv or tuple(h.command.split())


def _naming(argv: Sequence[str], name: str) -> str | None:
    """The argument of `argv` that is the file `name` or a path to it; None: none is."""
    if not name:
        return None
    return next((a for a in argv[1:] if a == name or a.endswith(f"/{name}")), None)


def _named(holders: Sequence[SocketHolder], name: str) -> str:
    listed = ", ".join(f"pid {h.pid} ({_short(h, name)})" for h in holders[:3])
    more = len(holders) - 3
    return listed + (f" and {more} more" if more > 0 else "")


def _short(h: SocketHolder, name: str, width: int = COMMAND_WIDTH) -> str:
    """Its command in about `width` characters. Cut at its end, it loses the argument naming
    the socket when a long path comes first (`ssh-agent -a /home/…/agent.sock`): that
    argument, the clue, is kept, its own start elided, after the program's name (a path with
    spaces in it is one word: the kernel's argv, not the joined line, is looked at)."""
    command, argv = h.command, _words(h)
    if len(command) <= width:
        return command
    naming = _naming(argv, name)
    if naming is None or command.find(naming) + len(naming) <= width - 1:
        return command[: width - 1] + "…"
    program = argv[0].rpartition("/")[2][:20]
    room = max(width - len(program) - 3, len(name))
    if len(naming) <= room:
        return f"{program} … {naming}"
    return f"{program} …{naming[-room:]}"


def _untold_text(files: list[str], no_table: bool) -> str:
    listed = ", ".join(files[:MAX_LISTED])
    why = (
        "the kernel's socket table cannot be read"
        if no_table
        else "the kernel's socket table names paths only here (netlink sock_diag refused)"
    )
    return (
        f"cannot tell whether a socket inside is live ({listed}): {why}; a live one must not "
        "be moved"
    )
