"""Frames between the dashboard and its engine process: a length, then a pickle.

Only the two halves of `engine_process` speak this, over the pipes of a child they started
themselves, so pickle is safe here: nothing else can write to these pipes. The model's
mappings are read-only `MappingProxyType`s, which pickle cannot take as they are: a private
dispatch table sends them as plain dicts and rebuilds the proxies on the other side, without
touching the process-wide `copyreg` table.
"""

from __future__ import annotations

import copyreg
import io
import pickle
import struct
import threading
from types import MappingProxyType
from typing import IO, Any

_LENGTH = struct.Struct("!I")
MAX_FRAME = 1 << 30  # a frame this large is a broken stream, not a picture


def read_only(mapping: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    """Rebuilds a proxy on the reading side (pickle finds it by this module's name)."""
    return MappingProxyType(mapping)


def _proxy(mapping: MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return read_only, (dict(mapping),)


_DISPATCH = copyreg.dispatch_table.copy()
_DISPATCH[MappingProxyType] = _proxy


def dumps(message: object) -> bytes:
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(message)
    return buf.getvalue()


class WireError(Exception):
    """The stream is broken: a short read inside a frame, or a frame that cannot be read."""


class Writer:
    """Whole frames onto a binary stream, from any thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: object) -> None:
        """Raises OSError (BrokenPipeError, ValueError on a closed file) when the reader is gone."""
        body = dumps(message)
        with self._lock:
            self._stream.write(_LENGTH.pack(len(body)) + body)
            self._stream.flush()


def receive(stream: IO[bytes]) -> object | None:
    """The next message, or None at a clean end of stream (between frames)."""
    head = _read_exactly(stream, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    if size > MAX_FRAME:
        raise WireError(f"a frame of {size} bytes")
    body = _read_exactly(stream, size)
    if body is None:
        raise WireError("the stream ended inside a frame")
    try:
        return pickle.loads(body)
    except Exception as exc:  # a pickle error names the class it could not find, and more
        raise WireError(f"unreadable frame: {exc}") from exc


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    if size == 0:
        return b""
    chunks: list[bytes] = []
    got = 0
    while got < size:
        chunk = stream.read(size - got)
        if not chunk:
            if got:
                raise WireError("the stream ended inside a frame")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
