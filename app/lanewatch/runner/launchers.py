"""Commands that hand their work to a server already running outside the lane.

`tmux new -d …` does not run anything itself: it asks the tmux server on its socket to start
the session. When that server was started before this `lanewatch run` (by the user, or by
another lane), the session's processes are the server's children: not the lane's, and with
the server's environment (another lane's TMPDIR). That is told before CMD starts, with the
recipe that works: a server of the lane's own (docs/launchers.md).

Inside a tmux pane `$TMUX` names the pane's server, and tmux uses that socket as it is. The
fence hides it (it lies in the real /tmp), and tmux inside the lane could neither reach it nor
start a server there (its folder is missing in the lane's /tmp): nothing ran, exit 0. So a
tmux CMD in a fence that hides `$TMUX`'s socket gets no `$TMUX` (`tmux_in_lane`): tmux then
starts, or finds, the lane's own server in the lane's /tmp, as it does outside tmux.

GNU screen does the same from inside a screen window, and the fence does not stop it: `$STY`
names the window's session, whose socket lies in /run/screen (Debian's SCREENDIR), not in
/tmp, so `screen CMD` hands CMD to that session as a new window (outside the lane, with the
session's environment) and returns 0 at once. A screen CMD that would start something gets no
`$STY` (`screen_in_lane`), as `screen -m` would: it starts a session of the lane's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from lanewatch.linux.proc import through_fd

_TMUX_FLAGS_WITH_VALUE = "cfLST"  # tmux [-2CDlNuVv] [-c cmd] [-f file] [-L name] [-S path] [-T f]
# Commands that only ask about or stop a server: nothing is handed over.
_TMUX_HARMLESS = frozenset(
    {"kill-server", "kill-session", "ls", "list-sessions", "has-session", "has", "info"}
)


def _tmux_socket(
    args: Sequence[str], env: Mapping[str, str]
) -> tuple[str, str | None, list[str], bool]:
    """The socket path tmux would use, its subcommand (None: tmux's default, new-session),
    the arguments without the socket options (-L, -S), and whether the path is `$TMUX`'s."""
    name = path = None
    kept: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break
        j, value = 1, None
        while j < len(arg):
            flag = arg[j]
            if flag in _TMUX_FLAGS_WITH_VALUE:
                value = arg[j + 1 :] or (args[i + 1] if i + 1 < len(args) else "")
                used = [arg] if arg[j + 1 :] else args[i : i + 2]
                i += len(used) - 1
                if flag in "LS":
                    name, path = (value, path) if flag == "L" else (name, value)
                    if j > 1:
                        kept.append(arg[:j])  # the flags before it: -2uL x keeps -2u
                else:
                    kept.extend(used)
                break
            j += 1
        if value is None:
            kept.append(arg)
        i += 1
    rest = list(args[i:])
    command = next((a for a in rest if a != "--"), None)
    from_env = not path and name is None and bool(env.get("TMUX"))
    if path:
        where = path
    elif from_env:
        where = env["TMUX"].split(",")[0]
    else:
        base = env.get("TMUX_TMPDIR") or "/tmp"
        where = os.path.join(base, f"tmux-{os.getuid()}", name or "default")
    return where, command, kept + rest, from_env


def listening(path: str) -> bool:
    """Whether a server answers on the unix socket `path` (a connect, closed at once). A path
    too long for sun_path (a socket in a deep lane's /tmp) is reached through its folder's
    descriptor, `/proc/self/fd/N/NAME`."""
    import socket  # only for a tmux command: `run` starts without it

    folder, name = os.path.split(path)
    fd = -1
    try:
        if len(os.fsencode(path)) >= 100:
            fd = os.open(folder or ".", os.O_PATH | os.O_DIRECTORY)
            path = through_fd(fd, name)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect(path)
        return True
    except (OSError, ValueError):
        return False
    finally:
        if fd >= 0:
            os.close(fd)


def tmux_in_lane(
    cmd: Sequence[str], env: Mapping[str, str], lane: str, hides: Callable[[str], bool]
) -> tuple[dict[str, str], str | None]:
    """CMD's environment for a tmux CMD, and what to tell the user before it starts (or None).

    `hides(path)`: whether the lane's fence hides that path from CMD (`Fence.hides`). A
    `$TMUX` whose socket the fence hides is dropped: tmux then uses the lane's own server
    (made in the lane's /tmp), and the line says so. Otherwise `handed_outside`'s warning."""
    out = dict(env)
    if not cmd or os.path.basename(cmd[0]) != "tmux":
        return out, None
    path, command, _rest, from_env = _tmux_socket(cmd[1:], env)
    if command in _TMUX_HARMLESS or not hides(path):
        return out, handed_outside(cmd, env, lane)
    if not from_env:
        return out, None  # tmux starts (or finds) a server in the lane's /tmp: the lane's own
    out.pop("TMUX")
    out.pop("TMUX_PANE", None)
    if not hides(_tmux_socket(cmd[1:], out)[0]):
        return out, handed_outside(cmd, out, lane)  # $TMUX_TMPDIR outside the fence
    return out, (
        f"lanewatch: $TMUX names a tmux server outside lane {lane}'s fence ({path}), which "
        "CMD cannot reach: tmux runs this in a server of the lane's own instead, in the "
        "lane's /tmp (docs/launchers.md)"
    )


def handed_outside(cmd: Sequence[str], env: Mapping[str, str], lane: str) -> str | None:
    """The warning for a CMD that will hand its work to a server running outside the lane, or
    None. Called before CMD starts: any server already listening is not the lane's."""
    if not cmd or os.path.basename(cmd[0]) != "tmux":
        return None
    path, command, rest, _ = _tmux_socket(cmd[1:], env)
    if command in _TMUX_HARMLESS or not listening(path):
        return None
    own = lane.replace("/", "-") or "lane"
    import shlex  # only for this advice: `run` does not load it otherwise

    fixed = shlex.join(["tmux", "-L", own, *rest])
    return (
        f"lanewatch: tmux will hand this command to the tmux server already running on "
        f"{path}, outside lane {lane}: the session's processes will not belong to the lane, "
        f"and they get that server's environment (its TMPDIR), not the lane's. Start a server "
        f"of the lane's own instead: lanewatch run --lane {shlex.quote(lane)} -- {fixed} "
        f"(attach with: tmux -L {shlex.quote(own)} attach). See docs/launchers.md."
    )


# screen options that talk to sessions already running (attach, list, send a command, wipe):
# these are left as typed. Any other screen CMD starts a session or a window.
_SCREEN_EXISTING = frozenset({"-r", "-R", "-RR", "-x", "-X", "-Q", "-ls", "-list", "-wipe"})


def screen_in_lane(
    cmd: Sequence[str], env: Mapping[str, str], lane: str
) -> tuple[dict[str, str], str | None]:
    """CMD's environment for a GNU screen CMD run from inside a screen window, and the line
    to tell the user (or None): `$STY` dropped, so screen starts a session of the lane's own
    instead of a window in the outer session (module doc)."""
    out = dict(env)
    if not cmd or os.path.basename(cmd[0]) != "screen" or not env.get("STY"):
        return out, None
    if any(a in _SCREEN_EXISTING for a in cmd[1:]) or _screen_new_session(cmd[1:]):
        return out, None
    outer = out.pop("STY")
    return out, (
        f"lanewatch: $STY names a screen session outside lane {lane} ({outer}), which would "
        "run CMD as a window of its own, outside the lane: screen starts a session of the "
        "lane's own instead (`screen -ls` lists it; docs/launchers.md)"
    )


def _screen_new_session(args: Sequence[str]) -> bool:
    """Whether screen's options include -m (`-m`, `-dm`, `-dmS NAME`): a new session whatever
    `$STY` says. Only the options before the command are read."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        flags = args[i][1:]
        if flags.isalpha() and "m" in flags and set(flags) <= set("aAdDmOqRrUlifS"):
            return True
        if flags[-1:] in _SCREEN_VALUED:
            i += 1  # its value is the next argument (`-S name`, `-dS name`)
        i += 1
    return False


_SCREEN_VALUED = frozenset("SceHhpstT")
