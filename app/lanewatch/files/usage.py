"""Disk allocated to a tree, as `du` counts it: `st_blocks` × 512 of every file and folder, a
file with several hard links counted once (the first of its names met).

Apparent size (the sum of `st_size`) says how long the files are; a lane of 3,587 small files
read 449 kB that way while `du` said 28.8 MB (each file takes at least a block, folders take
blocks too). What a disk alert or a clear frees is the allocated figure, so both are kept.

`Usage` is kept up to date path by path (a write the tail saw, a folder gone), so a hard link
removed after its twin hands the blocks on instead of losing them. Blind spots: a folder that
grew by new entries keeps the size it had when it was last read (the next walk reads it); a
hard link whose twin lies outside the tree is counted here (as `du` of this tree alone does).
"""

from __future__ import annotations

import os

BLOCK = 512  # st_blocks counts 512-byte units, whatever the filesystem's block size

Inode = tuple[int, int]  # (st_dev, st_ino)


class Usage:
    """Allocated bytes of a set of paths, each hard-linked inode counted once."""

    __slots__ = ("_inodes", "_linked", "_plain", "blocks")

    def __init__(self) -> None:
        # Kept in 512-byte blocks, not bytes: a small file's count (8 for 4 KiB) is one of
        # Python's shared small ints, so 100,000 paths cost a dict slot each and no int.
        self.blocks = 0
        self._plain: dict[str, int] = {}  # path -> blocks, for entries with one link
        self._linked: dict[str, Inode] = {}  # path -> inode, for files with several links
        self._inodes: dict[Inode, list[int]] = {}  # inode -> [names here, blocks]

    @property
    def allocated(self) -> int:
        return self.blocks * BLOCK

    def __len__(self) -> int:
        return len(self._plain) + len(self._linked)

    def set(self, path: str, st: os.stat_result | None) -> None:
        """`path` is now `st` (None: gone)."""
        self.remove(path)
        if st is None:
            return
        if st.st_nlink < 2:
            self._plain[path] = st.st_blocks
            self.blocks += st.st_blocks
        else:
            self._add_linked(path, (st.st_dev, st.st_ino), st.st_blocks)

    def merge(self, other: Usage) -> None:
        """Every path of `other` (a walk of a new folder) as it is there."""
        for path, size in other._plain.items():
            self.remove(path)
            self._plain[path] = size
            self.blocks += size
        for path, inode in other._linked.items():
            self.remove(path)
            self._add_linked(path, inode, other._inodes[inode][1])

    def _add_linked(self, path: str, inode: Inode, size: int) -> None:
        self._linked[path] = inode
        entry = self._inodes.get(inode)
        if entry is None:
            self._inodes[inode] = [1, size]
            self.blocks += size
        else:  # another name of a file already counted: its blocks may have changed since
            entry[0] += 1
            self.blocks += size - entry[1]
            entry[1] = size

    def remove(self, path: str) -> None:
        size = self._plain.pop(path, None)
        if size is not None:
            self.blocks -= size
            return
        inode = self._linked.pop(path, None)
        if inode is None:
            return
        entry = self._inodes[inode]
        entry[0] -= 1
        if entry[0] == 0:
            del self._inodes[inode]
            self.blocks -= entry[1]

    def drop_under(self, folder: str) -> None:
        """`folder` and everything under it are gone."""
        prefix = folder + "/"
        for path in [p for p in self._plain if p.startswith(prefix)]:
            self.remove(path)
        for path in [p for p in self._linked if p.startswith(prefix)]:
            self.remove(path)
        self.remove(folder)
