"""`lanewatch forward LANE PORT [HOSTPORT]`: a net-fenced lane's port on the host's loopback.

Like `kubectl port-forward`: a listening socket on the host's 127.0.0.1, and for each
connection a socket made inside the lane's network namespace to its 127.0.0.1:PORT, the bytes
copied both ways by two threads. No other address is ever listened on or connected to.

Order (the promise: never act on a process whose identity was not re-checked at that moment):
the stamp is read and judged (local, this boot, its runner alive, released not, `net_ns`
recorded, ours or root's with `allow_other_user`); the host's socket is bound; the namespace
files of the lane's command (`child_pid`) are opened; then the command's identity (pid, start
ticks, boot id) and its uid are checked again, and the opened network namespace must be the
one the stamp names; only then are they entered (`linux/netns.py`). An open namespace file
stays that namespace, so a pid reused after the check cannot redirect it.

Why not slirp4netns's own port forwarding: its API socket adds a forward only while it runs,
listens where asked but needs a socket path of the lane's, and is gone with the runner; this
one is an ordinary foreground process the user stops with Ctrl-C (docs/fence.md).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from lanewatch.actions.authority import owner_label
from lanewatch.actions.targets import Target
from lanewatch.lanes.stamp import OwnerState, Stamp, read_stamp
from lanewatch.linux import netns
from lanewatch.linux.procid import (
    Liveness,
    ProcessIdentity,
    boot_id,
    hostname,
    liveness,
    owner_uid,
)

LOOPBACK = "127.0.0.1"
CHUNK = 256 * 1024
CHECK_EVERY = 1.0  # seconds between looks at whether the lane still runs


class ForwardRefused(Exception):
    """Why the forward cannot be made (the message is for people; the caller exits 3)."""


@dataclass
class Forward:
    """A forward being served: `url` is what to open; `serve` runs until `stop` or the lane
    ends."""

    lane: str
    port: int
    listener: socket.socket
    owner: ProcessIdentity
    _stopping: threading.Event

    @property
    def host_port(self) -> int:
        return int(self.listener.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.host_port}/"

    def stop(self) -> None:
        self._stopping.set()

    def serve(self, on_end: Callable[[str], None] | None = None) -> str:
        """Accept and copy until stopped or the lane's runner ends; returns why it stopped."""
        self.listener.settimeout(CHECK_EVERY)
        while not self._stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                state, _why = liveness(self.owner)
                if state not in (Liveness.ALIVE, Liveness.STOPPED, Liveness.UNKNOWN):
                    said = f"lane {self.lane!r} ended"
                    if on_end is not None:
                        on_end(said)
                    return said
                continue
            except OSError:
                if self._stopping.is_set():
                    break
                raise
            threading.Thread(target=self._carry, args=(conn,), daemon=True).start()
        return "stopped"

    def _carry(self, conn: socket.socket) -> None:
        try:
            inside = socket.create_connection((LOOPBACK, self.port), timeout=10)
        except OSError:
            conn.close()  # nothing listens in the lane: the client sees the connection close
            return
        inside.settimeout(None)
        conn.settimeout(None)
        back = threading.Thread(target=_copy, args=(inside, conn), daemon=True)
        back.start()
        _copy(conn, inside)
        back.join()
        conn.close()
        inside.close()


def _copy(src: socket.socket, dst: socket.socket) -> None:
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while n := src.recv_into(buf):
            dst.sendall(view[:n])
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def judge(stamp: Stamp | None, lane: str, allow_other_user: bool, unread: str = "") -> Stamp:
    """The stamp, when its lane may be forwarded from here; else ForwardRefused saying why
    (`unread`: why the stamp could not be read)."""
    if stamp is None:
        why = f" ({unread})" if unread else ""
        raise ForwardRefused(f"lane {lane!r}: its stamp cannot be read here{why}")
    if stamp.host != hostname():
        raise ForwardRefused(f"lane {lane!r} runs on {stamp.host}, not here")
    if stamp.state is OwnerState.RELEASED or stamp.released_at is not None:
        raise ForwardRefused(f"lane {lane!r} is gone (released)")
    if stamp.boot_id and stamp.boot_id != boot_id():
        raise ForwardRefused(f"lane {lane!r} is gone (its stamp is from another boot)")
    runner = ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id)
    state, why = liveness(runner)
    if state not in (Liveness.ALIVE, Liveness.STOPPED):
        raise ForwardRefused(f"lane {lane!r} is gone ({why})")
    if stamp.uid != os.getuid():
        if os.geteuid() != 0:
            raise ForwardRefused(
                f"lane {lane!r} is {owner_label(stamp.uid)}'s: you may forward only your own lanes"
            )
        if not allow_other_user:
            raise ForwardRefused(
                f"lane {lane!r} is {owner_label(stamp.uid)}'s: add --allow-other-user to "
                "forward another user's lane as root"
            )
    if not stamp.net_ns:
        why = f" ({stamp.net_note})" if stamp.net_note else ""
        raise ForwardRefused(
            f"lane {lane!r} is not net-fenced{why}: it shares the host's loopback, so its ports "
            "are reachable as they are (`lanewatch run --fence net` gives a lane its own)"
        )
    if stamp.child_pid is None or stamp.child_start_ticks is None:
        raise ForwardRefused(f"lane {lane!r} has not started its command yet: try again")
    return stamp


def open_forward(
    target: Target, port: int, host_port: int | None, allow_other_user: bool = False
) -> Forward:
    """Check the lane, bind the host's side, enter the lane's network namespace (this thread,
    and every thread started after: the caller must have no other thread yet)."""
    lane = target.name
    read = read_stamp(target.path)
    unread = f"{read.status.value}: {read.detail}" if read.detail else read.status.value
    stamp = judge(read.stamp if read.ok else None, lane, allow_other_user, unread)
    lane = stamp.lane
    listener = _listen(port if host_port is None else host_port, host_port is None)
    try:
        child = ProcessIdentity(stamp.child_pid or 0, stamp.child_start_ticks or 0, stamp.boot_id)
        try:
            opened = netns.open_namespaces(child.pid)
        except PermissionError:
            raise ForwardRefused(
                f"lane {lane!r}: its command's namespaces cannot be opened by "
                f"{owner_label(os.getuid())}"
            ) from None
        except OSError:
            raise ForwardRefused(
                f"lane {lane!r}: its command (pid {child.pid}) has exited"
            ) from None
        try:
            # Re-checked now the namespaces are open: the same process, still the lane's
            # user's, in the network namespace the stamp names.
            state, why = liveness(child)
            if state not in (Liveness.ALIVE, Liveness.STOPPED):
                raise ForwardRefused(f"lane {lane!r}: its command has exited ({why})")
            if owner_uid(child) != stamp.uid:
                raise ForwardRefused(f"lane {lane!r}: pid {child.pid} is not the lane's user's")
            if opened.net_id != stamp.net_ns:
                raise ForwardRefused(
                    f"lane {lane!r}: pid {child.pid} is in {opened.net_id}, not the lane's "
                    f"{stamp.net_ns}"
                )
            if threading.active_count() != 1:
                raise ForwardRefused("lanewatch forward must enter the namespace single-threaded")
            netns.enter(opened)
        finally:
            opened.close()
    except BaseException:
        listener.close()
        raise
    owner = ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id)
    return Forward(lane, port, listener, owner, threading.Event())


def _listen(port: int, defaulted: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        hint = " (give HOSTPORT; 0 takes any free port)" if defaulted else ""
        raise ForwardRefused(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror}{hint}") from None
    return sock
