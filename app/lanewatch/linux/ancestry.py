"""A process's parent and the variables it was started with, read from /proc the cheap way.

For the asking lane (`agents/me.py`), which looks for `$LANEWATCH_*` in its ancestors'
environments when its own has none. It runs in the guard, before every tool call of an agent,
so this module imports nothing: `linux/proc.py`, the full reader (pinned handles, parsed stat
and status), costs `dataclasses` and `signal`. A process that is gone, or not ours to
read, answers nothing: an empty environment, parent 0.
"""

from __future__ import annotations

MAX_ENVIRON = 1 << 20  # bytes of one /proc/PID/environ read
MAX_STAT = 4096  # bytes of one /proc/PID/stat read (the command name is at most 64)


def environ_of(pid: int, wanted: tuple[str, ...]) -> dict[str, str]:
    """The variables named in `wanted` that `pid` was started with (its `execve` environment,
    readable for one's own processes); {} when it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(MAX_ENVIRON)
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key.decode("ascii", "replace") in wanted:
            out[key.decode()] = value.decode("utf-8", "surrogateescape")
    return out


def parent_of(pid: int) -> int:
    """`pid`'s parent (field 4 of /proc/PID/stat); 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read(MAX_STAT)
    except OSError:
        return 0
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return 0
