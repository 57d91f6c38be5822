"""Abstract unix socket names as the kernel lists them (`linux/unixsockets.py`): read from
/proc/net/unix's text and from a sock_diag message, shown as `ss` shows them; and an X
display's lane told by its server's lock file (`processes/socketlanes.py`)."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from lanewatch.linux import unixsockets
from lanewatch.linux.unixsockets import AbstractListener, BoundSocket
from lanewatch.model.views import LaneMember, NamespaceView, NsState
from lanewatch.processes import socketlanes

UNIX = b"""\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 4242 @/tmp/.X11-unix/X99
0000000000000000: 00000002 00000000 00000000 0001 01 4243 @/tmp/.X11-unix/X98
0000000000000000: 00000002 00000000 00010000 0001 01 4244 /tmp/.X11-unix/X99
0000000000000000: 00000003 00000000 00000000 0001 03 4245
0000000000000000: 00000002 00000000 00010000 0001 01 4246 @dbus@x
0000000000000000: garbage
"""


def test_the_proc_table_gives_listening_abstract_names_only() -> None:
    found = unixsockets.parse_abstract_listeners(UNIX)
    assert found == [
        AbstractListener("@/tmp/.X11-unix/X99", 4242),  # the bound, unlistened X98: left out
        AbstractListener("@dbus@x", 4246),  # the path socket: not abstract
    ]
    assert [a.display for a in found] == [":99", None]
    assert [a.display_number for a in found] == [99, None]
    assert [a.said for a in found] == ["@/tmp/.X11-unix/X99 (display :99)", "@dbus@x"]
    assert unixsockets.parse_abstract_listeners(b"") == []


def test_a_display_is_only_an_x_servers_name() -> None:
    assert AbstractListener("@/tmp/.X11-unix/X7", 1).display == ":7"
    for other in ("@/tmp/.X11-unix/X7x", "@/tmp/.X11-unix/Xa", "@X7", "/tmp/.X11-unix/X7"):
        assert AbstractListener(other, 1).display is None


def _diag(inode: int, name: bytes, uid: int) -> bytes:
    def rta(kind: int, value: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(value), kind) + value
        return raw + b"\0" * (-len(raw) % 4)

    head = struct.pack("=BBBBIII", socket.AF_UNIX, socket.SOCK_STREAM, 10, 0, inode, 0, 0)
    return (
        head
        + rta(unixsockets.UNIX_DIAG_NAME, name)
        + rta(unixsockets.UNIX_DIAG_UID, struct.pack("=I", uid))
    )


def test_a_sock_diag_message_tells_an_abstract_name_from_a_path() -> None:
    abstract = unixsockets._message(_diag(77, b"\0/tmp/.X11-unix/X5\0tail", 1001))
    assert abstract == AbstractListener("@/tmp/.X11-unix/X5@tail", 77, 1001)
    path = unixsockets._message(_diag(78, b"/run/user/1001/bus\0", 1001))
    assert path == BoundSocket("/run/user/1001/bus", 78, None, 1001)  # ends at its NUL
    assert unixsockets.abstract_name(b"\xff\0x") == "@\udcff@x"  # bytes kept, never raised on


def _view(key: Path, *members: LaneMember) -> NamespaceView:
    return NamespaceView(
        str(key), str(key.parent), key.name, "web", None, None, None, 1, None, (), NsState.LIVE,
        "", "known", None, None, None, None, None, None, None, None, (), "ok", (),
        members=members,
    )  # fmt: skip


def test_an_x_lock_file_names_the_lanes_server_only_if_it_is_a_running_member(
    tmp_path: Path,
) -> None:
    """Where open files cannot be read, an X server's lock file (its pid, as Xvfb writes it)
    tells the display's lane: in the lane's own tmp/, or in the shared folder."""
    ns, shared = tmp_path / "root" / "co.web", tmp_path / "shared"
    (ns / "tmp").mkdir(parents=True)
    shared.mkdir()
    (ns / "tmp" / ".X77-lock").write_text("      4242\n")
    lock_time = (ns / "tmp" / ".X77-lock").stat().st_mtime
    xvfb = LaneMember(4242, 9, "Xvfb :77", lock_time - 5, "descendant")
    (found,) = socketlanes.x_lock_lanes(77, [_view(ns, xvfb)], shared)
    assert found[1] is xvfb and found[0].key == str(ns)
    # The pid handed out again, to a process that started after the lock: no one's.
    later = LaneMember(4242, 10, "sleep 9", lock_time + 5, "descendant")
    assert socketlanes.x_lock_lanes(77, [_view(ns, later)], shared) == []
    # Not a member; another display; a lock that is no pid.
    other = LaneMember(4343, 9, "Xvfb :77", lock_time - 5, "descendant")
    assert socketlanes.x_lock_lanes(77, [_view(ns, other)], shared) == []
    assert socketlanes.x_lock_lanes(78, [_view(ns, xvfb)], shared) == []
    (ns / "tmp" / ".X77-lock").write_text("not a pid\n")
    assert socketlanes.x_lock_lanes(77, [_view(ns, xvfb)], shared) == []
    # Unfenced: the lock in the shared folder.
    (ns / "tmp" / ".X77-lock").unlink()
    (shared / ".X77-lock").write_text("      4242\n")
    os.utime(shared / ".X77-lock", (lock_time, lock_time))
    assert len(socketlanes.x_lock_lanes(77, [_view(ns, xvfb)], shared)) == 1


def test_a_symlinked_lock_or_tmp_is_never_followed(tmp_path: Path) -> None:
    ns, elsewhere = tmp_path / "root" / "co.web", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / ".X77-lock").write_text("      4242\n")
    ns.mkdir(parents=True)
    (ns / "tmp").symlink_to(elsewhere)  # a lane's process may plant one
    now = (elsewhere / ".X77-lock").stat().st_mtime
    xvfb = LaneMember(4242, 9, "Xvfb :77", now - 5, "descendant")
    empty = tmp_path / "shared"
    empty.mkdir()
    assert socketlanes.x_lock_lanes(77, [_view(ns, xvfb)], empty) == []
    (empty / ".X77-lock").symlink_to(elsewhere / ".X77-lock")
    assert socketlanes.x_lock_lanes(77, [_view(ns, xvfb)], empty) == []
