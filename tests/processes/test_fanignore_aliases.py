"""Which paths one folder has, through every mount of its filesystem (`ForeignDirs._aliases`):
an ignore mark is refused when any of them lies at or under a prefix. Pure: a mount table given."""

from __future__ import annotations

from lanewatch.kernel.fanignore import ForeignDirs

DEV = 7


def dirs(*mounts: tuple[int, str, str]) -> ForeignDirs:
    fd = ForeignDirs(-1, lambda: ("/r/root/",), 0)
    fd._watchable = {DEV: ("/", "/")}
    fd._mounts = list(mounts)
    return fd


def test_a_bind_mount_gives_a_folder_a_second_path() -> None:
    fd = dirs(
        (DEV, "/", "/"),
        (DEV, "/home/u/foreign", "/r/root/ns/alias"),  # a folder bound under the root
        (DEV, "/etc/hostsfile", "/etc/hosts"),  # a file bind mount: no folder's path
        (8, "/", "/dev/shm"),  # another filesystem
    )
    assert fd._aliases(DEV, "/home/u/foreign/sub") == [
        "/home/u/foreign/sub",
        "/r/root/ns/alias/sub",
    ]
    assert fd._aliases(DEV, "/r/root/ns/alias/x") == ["/home/u/foreign/x", "/r/root/ns/alias/x"]
    assert fd._aliases(DEV, "/home/u/other") == ["/home/u/other"]


def test_a_folder_seen_through_no_known_mount_has_no_known_paths() -> None:
    assert dirs((DEV, "/sub", "/mnt"))._aliases(DEV, "/elsewhere") is None
