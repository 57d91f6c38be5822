"""Hand the engine's changes from its thread to the UI without ever touching a widget.

The engine calls `on_changes` on its own thread. The bridge merges every batch into one pending
`Changes` under a lock and posts a single `ChangesPending` when the buffer goes from empty to
non-empty; the UI drains the buffer at most once per frame (and not at all while paused or while
a modal is open, so the buffer keeps merging: its size is bounded by namespaces, not events).
Only the first batch into an empty buffer wakes the UI: a wake-up lost after that leaves the
buffer full and the screen still, so the buffer also says how long its oldest change has
waited (`waiting_for`), which the picture's watchdog (`tui.watch`) checks every second.
Posting raises once the app's loop has closed: that is swallowed here, because a watchdog
callback during shutdown must not crash the engine's thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from lanewatch.model.views import Changes, merge_changes


class ChangeBuffer:
    """Thread-safe merge buffer between the engine's thread and the UI."""

    def __init__(self, notify: Callable[[], object]) -> None:
        self._lock = threading.Lock()
        self._pending: Changes | None = None
        self._since = 0.0  # monotonic time the buffer last went from empty to non-empty
        self._notify = notify
        self._closed = False
        self.batches = 0
        """Batches received from the engine (for tests and the bench)."""

    def put(self, changes: Changes) -> None:
        """Called on the engine's thread."""
        with self._lock:
            if self._closed:
                return
            was_empty = self._pending is None
            if was_empty:
                self._since = time.monotonic()
            self._pending = (
                changes if self._pending is None else merge_changes(self._pending, changes)
            )
            self.batches += 1
        if was_empty:
            # The app's loop may have closed under us (shutdown): nothing left to tell.
            with contextlib.suppress(RuntimeError):
                self._notify()

    def take(self) -> Changes | None:
        """Called on the UI thread: everything merged since the last take, or None."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def waiting_for(self) -> float | None:
        """Seconds the oldest change not yet taken has waited; None when there is none."""
        with self._lock:
            return None if self._pending is None else time.monotonic() - self._since

    @property
    def pending(self) -> bool:
        with self._lock:
            return self._pending is not None

    def close(self) -> None:
        """Drop further batches (the app is going away)."""
        with self._lock:
            self._closed = True
            self._pending = None
