"""The service's reaper: `lanewatch record --reap` runs a pass of the policy every `every`
seconds on a thread of its own (`actions/reap.py` does the pass; docs/reaper.md).

The policy file is read again before each pass (an edit counts from the next one; a file that
cannot be read is said once in the log, and that pass is skipped). The first pass runs at
once. Each pass is written into `reap.json` (the dashboard's line, the metrics) with the time
of the next, and said on the recorder's output as a `reap` line. The thread is a daemon but
stoppable: `stop()` lets a pass in progress finish its current step list and joins it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lanewatch.actions.reap import run
from lanewatch.errors import LanewatchError
from lanewatch.records import reaping

log = logging.getLogger(__name__)


class ServiceReaper:
    def __init__(
        self,
        roots: Callable[[], Sequence[str]],
        say: Callable[[dict[str, object]], None],
        config: Path | None = None,
        state: Path | None = None,
    ) -> None:
        self.roots = roots  # the recorder's roots as they are now (a service follows them)
        self.say = say
        self.config = config
        self.state = state
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._complained: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lanewatch-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.is_set():
            every = self.once()
            self._stop.wait(every)

    def once(self) -> float:
        """One pass, if there is a policy; the seconds until the next."""
        try:
            policy = reaping.load(self.config)
        except reaping.ReapConfigError as exc:
            if str(exc) != self._complained:
                log.warning("the reaper skips its passes: %s", exc)
                self.say({"error": str(exc)})
                self._complained = str(exc)
            return reaping.DEFAULT_EVERY
        self._complained = None
        if policy is None or not policy.active:
            return policy.every if policy is not None else reaping.DEFAULT_EVERY
        try:
            done = run([Path(r) for r in self.roots()], policy)
        except (LanewatchError, OSError) as exc:  # a pass that fails is said; the next tries
            log.warning("a reaper pass failed: %s", exc)
            self.say({"error": f"a pass failed: {exc}"})
            return policy.every
        summary = done.summary()
        try:
            reaping.record_pass(summary, policy, time.time() + policy.every, self.state)
        except OSError as exc:
            log.warning("cannot write %s: %s", reaping.STATE_FILE, exc)
        self.say(
            {
                "cleared": summary.cleared,
                "purged": summary.purged,
                "refused": summary.refused,
                "failed": summary.failed,
                "cleared_bytes": summary.cleared_bytes,
                "purged_bytes": summary.purged_bytes,
                "next_in": policy.every,
            }
        )
        return policy.every
