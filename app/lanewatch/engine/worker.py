"""The engine's worker: turns what the sources saw into model events, applied in one `apply`
per batch, and the model's Delta into views. One thread runs it. Without a thread, `one_shot`
runs the same steps once (for `lanewatch status`).

A coordinator of parts joined by composition, each in a module of its own:

- `modelkeeper.py` `ModelKeeper`: the one owner of the model's mutable state: the model, the
  events not applied yet, the views handed out (to `deliver`), incidents persisted;
- `walkintake.py` `WalkIntake`: roots listed, stamps read, namespaces walked, their ledgers
  and receipts read;
- `tailintake.py` `TailIntake`: the watches and their items, heartbeats, health notices;
- `probeintake.py` `ProbeIntake`: the owners to probe; a probe report turned into events;
- `kernelintake.py` `KernelIntake`: kernel attribution batches turned into events;
- `intake.py`: `Found` (what an intake hands back) and `DiskMemo` (what the intakes remember
  of each namespace's disk: sizes, ledger offsets, the file history).

The intakes consult the model read-only (`keeper.namespaces`) and return what they found;
only the keeper applies it. This module routes the queue's items to them, and holds what spans
them: the counters (`stats`), the clock (`tick`), rescans, recovery and the one-shot picture.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lanewatch.engine.budgetintake import BudgetIntake
from lanewatch.engine.intake import DiskMemo
from lanewatch.engine.kernelintake import KernelIntake
from lanewatch.engine.modelkeeper import ModelKeeper
from lanewatch.engine.probeintake import ProbeIntake
from lanewatch.engine.tailintake import Arrived, TailIntake
from lanewatch.engine.walkintake import SCAN_CHUNK, WalkIntake
from lanewatch.model import model as m
from lanewatch.model.views import Changes, HealthStatus, SourceHealth
from lanewatch.processes.prober import Metering

if TYPE_CHECKING:
    from lanewatch.kernel.attribution import KernelBatch
    from lanewatch.processes.prober import ProbeReport

# `status`: seconds between the two footprint readings a CPU % takes (only when lanes run)
STATUS_WINDOW = 0.3
TICK = 1.0  # seconds between time-based re-judgements and watch checks
MAX_BATCH = 20_000


class Worker:
    def __init__(
        self,
        roots: Sequence[str],
        *,
        poll: bool = False,
        poll_interval: float = 2.0,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        self.roots = list(dict.fromkeys(r.rstrip("/") or "/" for r in roots))
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.memo = DiskMemo()
        self.keeper = ModelKeeper(
            self.roots, deliver=deliver, on_applied=on_applied, forget=self.memo.forget
        )
        namespaces, host = self.keeper.namespaces, self.keeper.host
        self.walks = WalkIntake(namespaces=namespaces, memo=self.memo, host=host)
        self.tail = TailIntake(
            self.roots,
            self.queue,
            poll=poll,
            poll_interval=poll_interval,
            namespaces=namespaces,
            memo=self.memo,
            seen=self.walks.seen,
            stamp_changed=self.walks.stamp_changed,
            catch_up_ledger=self.walks.catch_up_ledger,
            receipt=self.walks.receipt,
        )
        self.probes = ProbeIntake(
            self.roots, namespaces=namespaces, history=self.memo.history, host=host
        )
        self.kernel = KernelIntake(history=self.memo.history)
        self.budgets = BudgetIntake(namespaces)
        self.once_status = HealthStatus.POLLING.value if poll else HealthStatus.OK.value
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "batches",
                "items",
                "overflows",
                "kernel_overflows",
                "overruns",
                "rescans",
                "rewatches",
                "probes",
                "full_probes",
                "probe_ms",
            ),
            0,
        )

    # -- walks ---------------------------------------------------------------------------------
    def list_root(self, root: str, *, count: bool = False) -> list[str] | None:
        """Phase 1 for one root (`WalkIntake.list_root`), its events pending in the keeper."""
        keys, found = self.walks.list_root(root, count=count)
        self.keeper.take(found)
        return keys

    def list_new(self, root: str) -> list[str]:
        keys, found = self.walks.list_new(root)
        self.keeper.take(found)
        return keys

    @property
    def scanning(self) -> bool:
        return self.walks.scanning

    def queue_scan(self, keys: Sequence[str], *, counts_only: bool = False) -> None:
        self.walks.queue(keys, counts_only=counts_only)

    def scan_some(self, limit: int = SCAN_CHUNK) -> bool:
        """Walk up to `limit` queued namespaces, applied together; True if more are queued."""
        more, found = self.walks.walk_some(limit)
        self.keeper.take(found)
        self.keeper.commit()
        return more

    def rescan_root(self, root: str) -> None:
        self.stats["rescans"] += 1
        keys = self.list_root(root)
        self.keeper.commit()
        self.walks.queue(keys or ())

    # -- the queue's items ---------------------------------------------------------------------
    def process(self, items: list[Any]) -> None:
        """One batch of the queue: control items in their order, then each namespace's tail
        items, then the rescans they asked for."""
        self.stats["batches"] += 1
        self.stats["items"] += len(items)
        keeper = self.keeper
        dirty, controls = self.tail.sort(items)
        roots_to_rescan: set[str] = set()
        for item in controls:
            self._control(item, roots_to_rescan)
        now = time.time()
        with self.walks.one_table():  # one read of /proc for the batch's owners
            for key, d in dirty.items():
                found = self.tail.namespace(key, d, now)
                if isinstance(found, Arrived):
                    keeper.emit(found.seen)
                    keeper.commit()  # the record must exist before its walk is applied
                    self.walks.unqueue(key)
                    found = self.walks.walk(key)
                keeper.take(found)
        keeper.commit()
        for root in roots_to_rescan:
            self.rescan_root(root)

    def _control(self, item: tuple[Any, ...], rescan: set[str]) -> None:
        op, root = item[0], item[1]
        keeper, watches = self.keeper, self.tail.watches
        if op == "probe" and isinstance(item[1], Metering):
            keeper.emit(m.Metered(item[1].footprints))
            keeper.take(self.budgets.check(item[1].footprints))
        elif op == "probe":
            self.handle_probe(item[1])
        elif op == "ack":
            keeper.emit(m.Acknowledged(item[1], time.time(), item[2]))
        elif op == "rescan":
            rescan.update([root] if root else self.roots)
        elif op == "incidents" and root in keeper.logs:
            keeper.read_new_incidents(root)
        elif op in ("overflow", "overrun") and root in watches:
            self.stats[op + "s"] += 1
            keeper.emit(self.tail.lost(root, op))
            rescan.add(root)
        elif op == "limit" and root in watches:
            health = self.tail.fall_back(root)
            if health is not None:
                keeper.health(health)
                rescan.add(root)
        elif op == "root-gone" and root in watches:
            self.check_root(root, "the root was deleted")
        elif op == "kernel":  # writes attributed by fanotify (kernel/attribution.py)
            self.kernel_batch(item[1], rescan)

    def handle_probe(self, report: ProbeReport) -> None:
        self.stats["probes"] += 1
        self.stats["full_probes"] += report.full
        self.stats["probe_ms"] += round(report.took * 1000)
        self.keeper.take(self.probes.probed(report))
        if report.footprints:
            self.keeper.take(self.budgets.check(report.footprints))

    def kernel_batch(self, batch: KernelBatch, rescan: set[str]) -> None:
        self.keeper.take(self.kernel.batch(batch))
        lost = self.kernel.lost(batch)
        if lost is not None:  # nothing is attributed for the gap: rescan, and say so
            # Counted apart from the inotify queue's: a filesystem mark sees the whole
            # machine's writes, so another process's flood overflows it, not our roots.
            self.stats["kernel_overflows"] += 1
            # Only the watched roots: a missing or degraded root keeps its verdict, and one that
            # just appeared is listed when its watch is set up (the tick), said "ok" first.
            watched = self.tail.watched()
            for root in watched:
                self.keeper.emit(self.tail.notice(root, lost))
            rescan.update(watched)

    def apply_beats(self) -> None:
        """Heartbeats since the last call, in one `apply` (`TailIntake.beats`)."""
        self.keeper.take(self.tail.beats())
        self.keeper.commit()

    # -- watches -------------------------------------------------------------------------------
    def check_root(self, root: str, problem: str) -> None:
        """The watch on `root` stopped covering it: re-watch if it exists, else mark it gone."""
        events, again = self.tail.rewatch(root, problem)
        self.keeper.emit(*events)
        if again:
            self.stats["rewatches"] += 1
            self.rescan_root(root)

    def start_watches(self) -> None:
        self.keeper.emit(*self.tail.start())

    def stop_watches(self) -> None:
        self.tail.stop()

    def recover(self) -> None:
        """After an unexpected error: drop what was half done, rescan every root."""
        self.stats["errors"] = self.stats.get("errors", 0) + 1
        self.keeper.drop_pending()
        self.queue.put(("rescan", None))

    # -- time ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Once a second: re-judge what time alone can change; check every root's watch."""
        keeper = self.keeper
        if self.tail.has_beats:  # a heartbeat already seen must count before anything overdue
            self.apply_beats()
        for root, problem in self.tail.problems():
            self.check_root(root, problem)
        keeper.emit(*self.tail.notices_over(time.monotonic()))
        keeper.touch_due(time.time())
        keeper.resolve_quiet(time.time())
        keeper.mark_gone(time.time())
        keeper.commit()
        keeper.persist(list(keeper.state.incidents))

    # -- one shot ------------------------------------------------------------------------------
    def one_shot(self, *, probe: bool = True) -> Changes:
        """The whole picture once, without threads or watches (for `lanewatch status`)."""
        from lanewatch.processes.footprintmeter import Meter, fresh_stat
        from lanewatch.processes.prober import probe as run_probe

        keeper = self.keeper
        keeper.load_incidents()
        for root in self.roots:
            if self.list_root(root) is not None:
                keeper.health(SourceHealth(root, self.once_status, "read once, not watched"))
            keeper.commit()
        self.queue_scan(list(keeper.state.namespaces))
        while self.scan_some(limit=1000):
            pass
        if probe:
            stamps = self.probes.local_stamps()
            meter = Meter()
            report = run_probe(stamps, self.probes.prefixes(), meter=meter)
            self.handle_probe(report)
            if report.footprints:  # CPU is a rate: a second reading, a moment later
                time.sleep(STATUS_WINDOW)
                again = meter.measure(stamps, report.evidence, fresh_stat)
                keeper.emit(m.Metered(again))
        keeper.commit()
        keeper.persist(list(keeper.state.incidents))
        return keeper.full_changes()
