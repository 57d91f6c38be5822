"""What whoever started a lane handed it: the regular files on its stdin, stdout and stderr.

`pytest -p lanewatch -n 2 > /tmp/log` writes /tmp/log from the lane's processes, but the shell
opened it, before the lane began, for whoever runs the command: it is not the lane's write.
The kernel says which process wrote which file (fanotify), not through which descriptor, nor
when that descriptor was opened; what can be known is which files the lane was started with.
So the process that starts a lane records the files on its fds 0-2 as it began (`stdio_now`),
as (device, inode) pairs in the stamp (`Stamp.stdio`); a write by the lane's processes to one
of those files is judged handed, whatever fd it went through and however it was renamed since.

Blind spots: a lane that opens, by name, the very file it was handed counts as handed too (the
same file the user chose); terminals, pipes and /dev/null are not recorded (no file in shared
temp to collide on). pytest's capture moves fds 1 and 2 once it starts: the plugin takes its
picture when pytest loads it, before (`pytest_plugin.py`).
"""

from __future__ import annotations

import os
import stat

STDIO = (0, 1, 2)


def stdio_now() -> list[list[int]]:
    """[st_dev, st_ino] of each regular file on this process's fds 0-2, each once."""
    out: list[list[int]] = []
    for fd in STDIO:
        try:
            st = os.fstat(fd)
        except OSError:
            continue  # closed
        pair = [st.st_dev, st.st_ino]
        if stat.S_ISREG(st.st_mode) and pair not in out:
            out.append(pair)
    return out
