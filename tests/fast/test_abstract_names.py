"""Abstract unix socket names as the kernel lists them (`linux/unixsockets.py`): read from
/proc/net/unix's text and from a sock_diag message, shown as `ss` shows them."""

from __future__ import annotations

import socket
import struct

from lanewatch.linux import unixsockets
from lanewatch.linux.unixsockets import AbstractListener, BoundSocket

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
