"""The engine's worker: owns the model and turns what the sources saw into model events.

One thread runs it. It takes batches of tail items (deduplicated by path), scan results and
probe reports, reads what they point at (stamps, ledgers, receipts, sizes), applies the events
to the model in one `apply` per batch, and turns the model's Delta into views. Without a
thread, `one_shot` runs the same steps once (for `lanewatch status`).

`Worker` is four layers, each in a module of its own, each built on the one before:

- `workmodel.py` `ModelKeeper`: events applied, views of what changed delivered, incidents
  persisted;
- `workscan.py` `NamespaceWalks`: roots listed, stamps read, namespaces walked, their ledgers
  and receipts read;
- `workprobe.py` `ProbeResults`: the owners to probe; a probe report turned into events;
- `worktail.py` `TailItems`: the watches and their items, control items, heartbeats;

and this module adds what spans them: the clock (`tick`), recovery and the one-shot picture.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from lanewatch.engine.tailintake import TailItems
from lanewatch.model.views import Changes, HealthStatus, SourceHealth

TICK = 1.0  # seconds between time-based re-judgements and watch checks
MAX_BATCH = 20_000


class Worker(TailItems):
    def __init__(
        self,
        roots: Sequence[str],
        *,
        poll: bool = False,
        poll_interval: float = 2.0,
        deliver: Callable[[Changes], None] | None = None,
        on_applied: Callable[[float, Sequence[str]], None] | None = None,
    ) -> None:
        super().__init__(
            roots, poll=poll, poll_interval=poll_interval, deliver=deliver, on_applied=on_applied
        )
        self.once_status = HealthStatus.POLLING.value if poll else HealthStatus.OK.value

    def recover(self) -> None:
        """After an unexpected error: drop what was half done, rescan every root."""
        self.stats["errors"] = self.stats.get("errors", 0) + 1
        self._events = []
        self._applied_paths = []
        self.queue.put(("rescan", None))

    # -- time ----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Once a second: re-judge what time alone can change; check every root's watch."""
        if self._beats:  # a heartbeat already seen must count before anything turns overdue
            self.apply_beats()
        for root in self.roots if self.watching else ():
            problem = self.watches[root].problem()
            if problem is not None:
                self.check_root(root, problem)
        mono = time.monotonic()
        for root, until in list(self._notice_until.items()):
            if mono >= until:
                del self._notice_until[root]
                w = self.watches[root]
                if w.mode != "off":
                    status = HealthStatus.OK if w.mode == "inotify" else HealthStatus.POLLING
                    self.health(SourceHealth(root, status.value, w.detail))
        now = time.time()
        self._delta.touched.update(k for k, due in self._due.items() if due <= now)
        self.commit()
        self._persist(list(self.state.incidents))

    # -- one shot ------------------------------------------------------------------------------
    def one_shot(self, *, probe: bool = True) -> Changes:
        """The whole picture once, without threads or watches (for `lanewatch status`)."""
        from lanewatch.processes.prober import probe as run_probe

        self.load_incidents()
        for root in self.roots:
            if self.list_root(root) is not None:
                self.health(SourceHealth(root, self.once_status, "read once, not watched"))
            self.commit()
        self.queue_scan(list(self.state.namespaces))
        while self.scan_some(limit=1000):
            pass
        if probe:
            self.handle_probe(run_probe(self.local_stamps(), self.prefixes()))
        self.commit()
        self._persist(list(self.state.incidents))
        return self.full_changes()
