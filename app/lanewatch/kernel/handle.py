"""The engine's handle on kernel attribution: start it where fanotify works, say which it is.

`KernelAttribution` is owned by the `Engine`. It starts `kernel.attribution.Attribution` when
fanotify is available (never raising: without the privilege the engine simply stays on
inferred attribution) and feeds its batches to the worker's queue as `("kernel", batch)`.
`mode` is "kernel" or "inferred" and `hint` one line for people; `stamp` puts both on every
`Changes` the engine hands out (docs/architecture.md).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from lanewatch.kernel.attribution import (
    HINT_INFERRED,
    HINT_KERNEL,
    Attribution,
    KernelBatch,
    attribution_status,
)
from lanewatch.kernel.fanotify import FanotifyError
from lanewatch.lanes.stamp import Stamp
from lanewatch.linux import procid
from lanewatch.model.model import NsRecord
from lanewatch.model.views import Changes
from lanewatch.processes.pidlane import OwnerId, owner_of

log = logging.getLogger(__name__)


class KernelAttribution:
    def __init__(
        self,
        roots: Sequence[str],
        put: Callable[[tuple[str, KernelBatch]], None],
        namespaces: Callable[[], Mapping[str, NsRecord]],
        *,
        ignore: Sequence[str] = (),
        enabled: bool | None = None,
        on_attributed: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        """`enabled` None: kernel attribution where fanotify works; False: never."""
        self.roots = list(roots)
        self._put = put
        self._namespaces = namespaces
        self._ignore = ignore
        self.enabled = enabled
        self._on_attributed = on_attributed
        self._attribution: Attribution | None = None
        self._host = procid.hostname()
        self.mode: str | None = None  # None until started or asked
        self.hint = ""
        self._lock = threading.Lock()  # start (engine thread) against stop (any thread)
        self._stopped = False
        # The owners as last made, and from what: unchanged namespaces give the very same list
        # (the attribution thread asks twice a second; 1,000 lanes cost ms to convert again).
        self._owners_from: Mapping[str, NsRecord] | None = None
        self._owners_made: dict[str, tuple[Stamp, str, OwnerId]] = {}
        self._owners_list: list[OwnerId] = []

    @property
    def attribution(self) -> Attribution | None:
        return self._attribution

    def _owners(self) -> Iterable[OwnerId]:
        namespaces = self._namespaces()
        if namespaces is self._owners_from:
            return self._owners_list
        made: dict[str, tuple[Stamp, str, OwnerId]] = {}
        out: list[OwnerId] = []
        for key, rec in namespaces.items():
            s = rec.owner
            if s is None or s.host != self._host:
                continue
            before = self._owners_made.get(key)
            if before is not None and before[0] is s and before[1] == rec.root:
                o = before[2]  # the same stamp object: the same owner, no new object
            else:
                o = owner_of(key, rec.root, s)
            made[key] = (s, rec.root, o)
            out.append(o)
        self._owners_from, self._owners_made, self._owners_list = namespaces, made, out
        return out

    def start(self) -> None:
        """Start kernel attribution if it is wanted and possible; never raises."""
        if self.enabled is False:
            self.mode, self.hint = "inferred", f"{HINT_INFERRED} (kernel attribution is off)"
            return
        attr = Attribution(
            self.roots,
            lambda batch: self._put(("kernel", batch)),
            owners=self._owners,
            ignore=self._ignore,
            on_attributed=self._on_attributed,
        )
        with self._lock:
            if self._stopped:
                return
            try:
                attr.start()
            except FanotifyError as exc:
                self.mode, self.hint = "inferred", f"{HINT_INFERRED} ({exc.reason})"
                return
            except OSError as exc:
                log.warning("kernel attribution could not start: %s", exc)
                self.mode, self.hint = "inferred", f"{HINT_INFERRED} (fanotify: {exc})"
                return
            self._attribution = attr
        self.mode, self.hint = "kernel", HINT_KERNEL + attr.filter_note()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            attr = self._attribution
        if attr is not None:
            attr.stop()

    def counts(self) -> dict[str, int]:
        """What kernel attribution has read so far ({} while it does not run)."""
        attr = self._attribution
        watcher = attr.watcher if attr is not None else None
        if attr is None or watcher is None:
            return {}
        foreign = getattr(watcher, "foreign", None)
        return {
            "kernel_records": getattr(watcher, "records", 0),
            "kernel_events": attr.stats.events,
            "kernel_ignored_folders": foreign.placed if foreign is not None else 0,
        }

    def status(self) -> tuple[str, str]:
        """What this engine does, or (not started) what it would do here."""
        if self.mode is None:
            if self.enabled is False:
                return "inferred", f"{HINT_INFERRED} (kernel attribution is off)"
            probe = next((r for r in self.roots if os.path.isdir(r)), None)
            self.mode, self.hint = attribution_status(probe)
        return self.mode, self.hint

    def stamp(self, changes: Changes) -> Changes:
        mode, hint = self.status()
        return replace(changes, attribution=mode, attribution_hint=hint)
