"""What a process holds under a prefix, as a /proc scan reports it: one `HeldPath` per cwd,
root, fd, mapping or listening socket. Below `holders.py` (the scan) and `memo.py` (what the
last scan saw), which both speak of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "socket": an fd on a listening socket the caller named (`scan(sockets=...)`): its path is the
# fd's link, `socket:[INODE]` (`linux/netsockets.py`).
HoldKind = Literal["cwd", "root", "fd", "map", "socket"]
# How an fd was opened; "path" is an O_PATH fd (neither reads nor writes). A mapping is
# "write" only when it is shared and writable (a private writable mapping never reaches the file).
Access = Literal["read", "write", "readwrite", "path"]


@dataclass(frozen=True, slots=True)
class HeldPath:
    """One path a process holds under a prefix."""

    path: str  # as the kernel prints it, without the " (deleted)" suffix
    kind: HoldKind
    prefix: str  # the caller's prefix (made absolute) that this path lies under
    fd: int | None = None
    access: Access | None = None  # None for cwd and root
    deleted: bool = False
    directory: bool = False  # a cwd, a root, or an fd open on a folder
    # (device, inode) of a file open for writing: which file, whatever its name now (a file
    # handed to a lane by whoever started it, `model/family.py`); None: not read.
    file_id: tuple[int, int] | None = None

    @property
    def writable(self) -> bool:
        return self.access in ("write", "readwrite")
