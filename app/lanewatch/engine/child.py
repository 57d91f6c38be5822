"""The engine process: `python -m lanewatch.engine.child`, started by `EngineProcess`.

It reads its settings as the first frame on stdin, runs an `Engine` on them, and sends what the
engine delivers as frames on the stdout it was given (`wire`). Commands follow on stdin; the
end of stdin (the dashboard closed it, or died) stops the engine and ends the process, so it
never outlives the dashboard. Anything else written to fd 1 by accident (a stray print) goes
to stderr instead, so it cannot corrupt the frames.

Frames it sends: ("alive",) once a second from the moment it has its settings (the dashboard's
watchdog counts silence from the last frame of any kind), ("started",), ("failed", message),
("changes", Changes), ("applied", at, paths) when asked, ("first_picture",), ("settled",),
("answer", request, value), ("log", level, logger name, text). Commands: ("rescan",), ("ack",
incident id, user), ("stats", request), ("threads", request), ("stop",).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

from lanewatch.engine import wire
from lanewatch.linux import heap
from lanewatch.processes.ownpids import count_as_own

DELIVERY_INTERVAL = 1 / 60  # one a frame: for a feed to another host's dashboard, and `events`
# This process, the dashboard's own engine, delivers four times a frame, as often as the
# dashboard drains (`picture_feed.DRAIN_GAP`). Textual paints once a frame on a clock of its
# own: a change that also waits for a delivery once a frame waits for two clocks in series
# (~8 ms more at the median). Cheap since a drain builds only the rows that can be seen
# (`tui/screens/main_rows.py`); docs/perf-notes/offscreen-rows.md.
DASHBOARD_INTERVAL = DELIVERY_INTERVAL / 4
KEEP_ALIVE = 1.0  # seconds between two ("alive",) frames: one tiny pickle, one wake-up


class _ToParent(logging.Handler):
    """Log records travel to the dashboard, which logs them where its own logs go."""

    def __init__(self, out: wire.Writer) -> None:
        super().__init__(logging.WARNING)
        self._out = out

    def emit(self, record: logging.LogRecord) -> None:
        # The dashboard may be gone: the end of stdin stops us next.
        with contextlib.suppress(OSError, ValueError):
            self._out.send(("log", record.levelno, record.name, self.format(record)))


def _frames_stream() -> IO[bytes]:
    """The stdout we were given, kept for frames; fd 1 itself now points at stderr."""
    frames_fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(frames_fd, "wb", buffering=0)


def _send_when(
    event: threading.Event, out: wire.Writer, message: tuple[str], *, freeze: bool = False
) -> None:
    """Send `message` once `event` is set; with `freeze`, first take the heap the engine
    holds then out of the collector's full walks (`heap.freeze`): before the message, so its
    pause is over when the dashboard (or the bench) acts on it."""

    def wait() -> None:
        event.wait()
        if freeze:
            heap.freeze()
        with contextlib.suppress(OSError, ValueError):
            out.send(message)

    threading.Thread(target=wait, name=f"lanewatch-tell-{message[0]}", daemon=True).start()


def _keep_alive(out: wire.Writer, done: threading.Event) -> None:
    """An idle engine sends nothing else: without this, a stopped or wedged process and a quiet
    one would look the same to the dashboard."""

    def beat() -> None:
        beats = 0
        while not done.wait(KEEP_ALIVE):
            try:
                out.send(("alive",))
            except (OSError, ValueError):  # the dashboard is gone: the end of stdin stops us
                return
            beats += 1
            if beats % int(heap.REFREEZE_EVERY / KEEP_ALIVE) == 0:
                heap.refreeze()  # the collector's cyclic garbage, once in ten minutes
            if beats % int(heap.TRIM_EVERY / KEEP_ALIVE) == 0:
                heap.trim()  # free pages of the malloc arenas back to the kernel (linux/heap.py)

    threading.Thread(target=beat, name="lanewatch-keep-alive", daemon=True).start()


def serve(commands: IO[bytes], out: wire.Writer) -> int:
    settings: Any = wire.receive(commands)
    if not isinstance(settings, dict):
        return 2
    done = threading.Event()
    _keep_alive(out, done)
    try:
        return _serve(settings, commands, out)
    finally:
        done.set()


def _serve(settings: dict[str, Any], commands: IO[bytes], out: wire.Writer) -> int:
    from lanewatch.engine.engine import Engine

    on_applied = None
    if settings.get("report_applied"):

        def on_applied(at: float, paths: Sequence[str]) -> None:
            out.send(("applied", at, list(paths)))

    for pid in settings.get("ignore_pids", ()):
        count_as_own(pid)
    try:
        engine = Engine(
            settings["roots"],
            poll=settings.get("poll", False),
            attribution=settings.get("attribution"),
            on_applied=on_applied,
            # Out of the UI's process, a delivery no longer takes the UI's share of one
            # interpreter: changes may go out as often as the UI drains them.
            min_interval=DASHBOARD_INTERVAL,
        )
        engine.start(lambda changes: out.send(("changes", changes)))
    except Exception as exc:  # said to the dashboard, which shows it instead of a picture
        out.send(("failed", f"{type(exc).__name__}: {exc}"))
        return 1
    out.send(("started",))
    _send_when(engine.first_picture, out, ("first_picture",))
    _send_when(engine.settled, out, ("settled",), freeze=True)
    try:
        while True:
            command = wire.receive(commands)
            if not isinstance(command, tuple) or not command or command[0] == "stop":
                return 0  # None: stdin ended, the dashboard is gone
            if command[0] == "rescan":
                engine.rescan()
            elif command[0] == "ack":
                engine.acknowledge(command[1])
            elif command[0] == "stats":  # and how much of the heap is frozen (linux/heap.py)
                stats = {**engine.stats, "heap_frozen": gc.get_freeze_count()}
                out.send(("answer", command[1], stats))
            elif command[0] == "threads":  # for the bench's CPU by thread
                names = {t.native_id: t.name for t in threading.enumerate()}
                out.send(("answer", command[1], names))
    finally:
        engine.stop()


def main() -> int:
    # ^C in the terminal reaches the whole process group: the dashboard decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    heap.cap_arenas()  # before any thread: runs for as long as the dashboard (linux/heap.py)
    out = wire.Writer(_frames_stream())
    logging.basicConfig(handlers=[_ToParent(out)], level=logging.WARNING, force=True)
    try:
        return serve(sys.stdin.buffer, out)
    except (wire.WireError, OSError) as exc:
        print(f"lanewatch engine: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
