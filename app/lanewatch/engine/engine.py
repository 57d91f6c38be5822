"""The `Engine` of the engine → UI contract (docs/architecture.md): threads owned, stoppable.

Threads, all started by `start` and joined by `stop`:
- the worker (`lanewatch-engine`): first picture, then tail batches, scans and probe reports;
- the delivery thread (`lanewatch-deliver`): hands coalesced `Changes` to the callback at most
  every 50 ms, slower when the callback is slow (back-pressure: pending changes merge, so
  memory is bounded by namespaces, not by events); the counted first picture goes at once;
- the prober (`lanewatch-prober`): one run every `probe_interval`, never overlapping;
- watchdog's observer threads, one set per root, owned by `tail.RootWatch`.
"""

from __future__ import annotations

import getpass
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from lanewatch.engine.heldversions import HeldVersions
from lanewatch.engine.worker import MAX_BATCH, TICK, Worker
from lanewatch.kernel.handle import KernelAttribution
from lanewatch.lanes.roots import Registry, canonical_root
from lanewatch.linux.paths import is_under
from lanewatch.model.views import (
    Changes,
    HealthStatus,
    Incident,
    NamespaceView,
    SourceHealth,
    merge_changes,
)
from lanewatch.processes.prober import Prober
from lanewatch.records.incident_log import IncidentLog

log = logging.getLogger(__name__)

MIN_INTERVAL = 0.05  # at most ~20 callbacks a second
MAX_INTERVAL = 1.0


def resolve_roots(roots: Sequence[str | os.PathLike[str]] | None) -> list[str]:
    paths = Registry().paths() if roots is None else [Path(r) for r in roots]
    return list(dict.fromkeys(str(canonical_root(p)) for p in paths))


def acting_user() -> str | None:
    """Who acknowledges an incident here (its `acknowledged_by`): the login name, else None."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


class _Delivery:
    """Coalesces Changes and calls the callback on its own thread, paced by how long it takes."""

    def __init__(self, callback: Callable[[Changes], None], min_interval: float) -> None:
        self.callback = callback
        self.min_interval = min_interval
        self.interval = min_interval
        self._pending: Changes | None = None
        self._cond = threading.Condition()
        self._stopping = False
        self._hurry = False  # deliver what is pending now, without waiting for the interval
        self._last = 0.0
        self.calls = 0
        self.thread = threading.Thread(target=self._run, name="lanewatch-deliver", daemon=True)

    def offer(self, changes: Changes) -> None:
        with self._cond:
            p = self._pending
            self._pending = changes if p is None else merge_changes(p, changes)
            if p is None:  # else the thread already waits for the interval: no wake-up
                self._cond.notify()

    def hurry(self) -> None:
        """Hand what is pending over at once (the counted first picture): the pacing is for
        a stream of changes, not for the one picture a caller waits for."""
        with self._cond:
            self._hurry = True
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                wait = self._last + self.interval - time.monotonic()
                while wait > 0 and not self._stopping and not self._hurry:
                    self._cond.wait(wait)
                    wait = self._last + self.interval - time.monotonic()
                if self._stopping:
                    return
                changes, self._pending = self._pending, None
                self._hurry = False
            if changes is None:
                continue
            t0 = time.monotonic()
            try:
                self.callback(changes)
            except Exception:  # the UI may be gone (call_from_thread after exit): never fatal
                log.exception("the changes callback failed")
            took = time.monotonic() - t0
            self._last = time.monotonic()
            self.calls += 1
            self.interval = min(MAX_INTERVAL, max(self.min_interval, 2 * took))


class _Picture:
    """The whole current picture for `Engine.snapshot`: every delivered `Changes` merged in
    place (`merge_changes` semantics), so a delivery costs what it changed, not the picture."""

    def __init__(self) -> None:
        self.base: Changes | None = None  # what the merged fields are on top of
        self.upserts: dict[str, NamespaceView] = {}
        self.removed: set[str] = set()
        self.incidents: dict[str, Incident] = {}
        self._made: Changes | None = None

    def add(self, changes: Changes) -> None:
        base, self._made = self.base, None
        if base is None or changes.full:
            self.base = changes
            self.upserts, self.removed = dict(changes.upserts), set(changes.removed)
            self.incidents = dict(changes.incidents)
            return
        for key in changes.removed:
            self.upserts.pop(key, None)
            self.removed.add(key)
        for key, view in changes.upserts.items():
            self.upserts[key] = view
            self.removed.discard(key)
        if base.full:
            self.removed.clear()  # a full picture lists what exists; nothing to remove from it
        self.incidents.update(changes.incidents)
        self.base = replace(
            base,
            health=changes.health or base.health,
            at=changes.at,
            attribution=changes.attribution or base.attribution,
            attribution_hint=changes.attribution_hint or base.attribution_hint,
        )

    def changes(self) -> Changes | None:
        if self.base is None:
            return None
        if self._made is None:
            self._made = replace(
                self.base,
                upserts=MappingProxyType(dict(self.upserts)),
                removed=frozenset(self.removed),
                incidents=MappingProxyType(dict(self.incidents)),
            )
        return self._made


class Engine:
    def __init__(
        self,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        *,
        poll: bool = False,
        probe_interval: float = 2.0,
        poll_interval: float = 2.0,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
        attribution: bool | None = None,
        min_interval: float = MIN_INTERVAL,
    ) -> None:
        """`roots` None: every registered root. `on_applied(time, paths)` is called on the
        worker thread after each batch is in the model (for benchmarks and tests).
        `attribution` None: kernel write attribution (fanotify) where it works; False: off.
        `min_interval`: the shortest pause between two deliveries (the dashboard's engine
        process delivers four times a frame)."""
        self.roots = resolve_roots(roots)
        self.poll = poll
        self.probe_interval = probe_interval
        self._min_interval = min_interval
        self._worker = Worker(
            self.roots, poll=poll, poll_interval=poll_interval, on_applied=on_applied
        )
        self._delivery: _Delivery | None = None
        self._prober: Prober | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._picture = _Picture()
        self.first_picture = threading.Event()  # set once states are known
        self.settled = threading.Event()  # set once sizes are counted and one probe is in
        w = self._worker
        self.kernel = KernelAttribution(
            self.roots,
            w.queue.put,
            w.keeper.namespaces,
            ignore=w.probes.ignore,
            enabled=attribution,
        )

    @property
    def attribution(self) -> str:
        """Either "kernel" (fanotify names every writer) or "inferred"; see the hint."""
        return self.kernel.status()[0]

    @property
    def attribution_hint(self) -> str:
        return self.kernel.status()[1]

    @property
    def stats(self) -> dict[str, int]:
        """The worker's counters, and kernel attribution's (`kernel_records` read from
        fanotify, those dropped at once included; `kernel_events` handed to attribution;
        `kernel_ignored_folders` silenced in the kernel) while it runs; `counted_by_find`:
        namespaces the first picture counted with `find` (`files.treecount`)."""
        w = self._worker
        return {**w.stats, "counted_by_find": w.walks.counted_by_find, **self.kernel.counts()}

    # -- contract ------------------------------------------------------------------------------
    def start(self, on_changes: Callable[[Changes], None]) -> None:
        if self._thread is not None:
            raise RuntimeError("the engine is already started")
        self._delivery = _Delivery(on_changes, self._min_interval)
        self._worker.keeper.deliver = self._offer
        probes = self._worker.probes
        self._prober = Prober(
            self.probe_interval, probes.local_stamps, probes.prefixes, self._probed
        )
        self._thread = threading.Thread(target=self._run, name="lanewatch-engine", daemon=True)
        self._delivery.thread.start()
        self._thread.start()

    def stop(self) -> None:
        """Prompt and idempotent; never raises."""
        self._stop.set()
        self._worker.queue.put(None)
        try:
            self._worker.walks.cancel_counts()
            self.kernel.stop()
            if self._prober is not None:
                self._prober.stop()
            thread = self._thread
            if (
                thread is not None
                and thread.is_alive()
                and thread is not threading.current_thread()
            ):
                thread.join(timeout=10)
                if not thread.is_alive():
                    self._worker.walks.close_counts()
            self._worker.stop_watches()
            if self._delivery is not None:
                self._delivery.stop()
        except (OSError, RuntimeError) as exc:
            log.warning("stopping the engine: %s", exc)

    def alive(self) -> bool:
        """Whether the engine's thread runs (started, not stopped): a service's beat says so."""
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def snapshot(self) -> Changes:
        """The whole current picture (full=True). Before `start`, reads every root once."""
        if self._thread is None:
            return self.kernel.stamp(self._worker.one_shot())
        with self._lock:
            picture = self._picture.changes()
            if picture is not None:
                return picture
        return Changes(full=True, at=time.time())

    def rescan(self) -> None:
        self._worker.queue.put(("rescan", None))

    def quiet_for(self) -> float | None:
        return None  # it runs in this process: it cannot fall silent apart from us

    def acknowledge(self, incident_id: str) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._worker.queue.put(("ack", incident_id, acting_user()))
            return
        acknowledge(self.roots, incident_id)

    # -- threads -------------------------------------------------------------------------------
    def _offer(self, changes: Changes) -> None:
        changes = self.kernel.stamp(changes)
        with self._lock:
            self._picture.add(changes)
        if self._delivery is not None:
            self._delivery.offer(changes)

    def _probed(self, report: object) -> None:
        self._worker.queue.put(("probe", report))

    def _run(self) -> None:
        w = self._worker
        try:
            w.keeper.load_incidents()
            keys: list[str] = []
            for root in w.roots:
                listed = w.list_root(root, count=True)
                if listed is not None:
                    keys.extend(listed)
                    w.keeper.health(SourceHealth(root, HealthStatus.OK.value, "starting the watch"))
            w.keeper.flush(full=True)  # the first call: every namespace with its state
            self.first_picture.set()
            # Counts first: sizes per path, ledgers and receipts wait for the second walk.
            w.queue_scan(keys, counts_only=True)
            self._loop()
        except Exception:
            log.exception("the engine worker failed")
            raise

    def _watch(self) -> None:
        """After the first walk is delivered: set the watches, then walk every namespace once
        more. The first walk ran before any watch existed, so a write it did not see (a new
        file, or a rewrite of one it had already counted: folder mtimes do not show those)
        is found by this second walk, and anything later by the watches. Watchdog's watch
        setup walks every folder again; doing it here keeps it out of the first picture. The
        second walk also reads the ledgers and receipts, which the first left for it."""
        w = self._worker
        w.keeper.flush()  # the counted picture goes out before the watch setup's walk
        if self._delivery is not None:
            self._delivery.hurry()
        if not self._stop.is_set():
            # Not before the picture: fanotify marks the whole filesystem, so its thread works
            # (and takes the GIL) for every write anyone makes while we walk. Until it starts,
            # `kernel.status()` says what it will be, so every Changes names its attribution.
            self.kernel.start()
            if self.kernel.mode != "kernel":  # no kernel reads files at their close: we do
                w.probes.held = HeldVersions()
        w.start_watches()
        for root in w.roots:  # namespaces made before the watches existed
            w.list_new(root)
        w.keeper.commit()
        w.queue_scan(list(w.keeper.state.namespaces))

    def _loop(self) -> None:
        w = self._worker
        q = w.queue
        next_tick = time.monotonic() + TICK
        probing = False
        while not self._stop.is_set():
            scanning = w.scanning
            beats_due = w.tail.beats_due
            wake = next_tick if beats_due is None else min(next_tick, beats_due)
            # Never wait while the first walk runs or the watches are still to be set (with
            # no namespace to walk, they are set on the first turn, not a tick later).
            busy = scanning or not w.tail.watching
            timeout = 0.0 if busy else max(0.0, wake - time.monotonic())
            batch = []
            try:
                item = q.get(timeout=timeout) if timeout > 0 else q.get_nowait()
                batch.append(item)
                while len(batch) < MAX_BATCH:
                    batch.append(q.get_nowait())
            except queue.Empty:
                pass
            if None in batch:
                return
            try:
                if batch:
                    w.process(batch)
                    if self._prober is not None and _writes(batch, w.roots):
                        if self.kernel.mode == "kernel":  # writers are known: keep the pace
                            self._prober.active()
                        else:  # inferred: look at once, while the writer may hold it
                            self._prober.written()
                    if self._prober is not None and w.probes.holding_shared:
                        # Inferred: lanes hold a shared file; it may change without a write in
                        # any namespace, so probe (and read it) at the pace, not once a minute.
                        self._prober.active()
                elif scanning:
                    w.scan_some()
                if not w.tail.watching and not w.scanning:
                    self._watch()
                elif not probing and not w.scanning:
                    probing = True
                    assert self._prober is not None
                    attribution = self.kernel.attribution
                    if attribution is not None and attribution.lives.available:
                        self._prober.use_lives(attribution.lives)
                    self._prober.start()
                if probing and not self.settled.is_set() and w.stats["probes"] > 0:
                    self.settled.set()
                mono = time.monotonic()
                if mono >= next_tick:
                    w.tick()
                    next_tick = time.monotonic() + TICK
                elif (beats_due := w.tail.beats_due) is not None and mono >= beats_due:
                    w.apply_beats()
                w.keeper.flush()
            except Exception:  # a bug must not freeze the picture: say so, start over from disk
                log.exception("the engine failed on a batch; rescanning every root")
                w.recover()
                self._stop.wait(0.5)


def _writes(batch: Sequence[object], roots: Sequence[str] = ()) -> bool:
    """Whether a batch holds a write to a data file (not a heartbeat, not `.lanewatch/`): for
    kernel attribution, one in `roots` or by a lane of theirs (not another root's lane in
    shared temp: the prober reads only our lanes' processes)."""
    for item in batch:
        if not isinstance(item, tuple):
            continue
        op = item[0]
        if op == "kernel" and _concerns(item[1], roots):
            return True
        if op in ("c", "m", "w", "d") and "/.lanewatch/" not in item[3]:
            return True
    return False


def _concerns(batch: object, roots: Sequence[str]) -> bool:
    """A kernel batch wrote in one of `roots`, or saw a lane of theirs write elsewhere."""
    writes = getattr(batch, "writes", ())
    observations = getattr(batch, "observations", ())
    if not roots or not (writes or observations):
        return bool(writes or observations)
    real = [os.path.realpath(r) for r in roots]
    return any(root in real for _obs, root in observations) or any(
        is_under(path, r) for path, _rec in writes for r in real
    )


def acknowledge(roots: Sequence[str], incident_id: str, by: str | None = None) -> bool:
    """Persist an acknowledgement without an engine; False if no root knows the id."""
    from dataclasses import replace

    found = False
    for root in roots:
        ilog = IncidentLog(root)
        ilog.load()
        rec = ilog.known.get(incident_id)
        if rec is not None:
            found = True
            ilog.persist([replace(rec, ack_at=time.time(), ack_by=by or acting_user())])
    return found
