"""The service's reaper: `lanewatch record --reap` runs a pass of the policy every `every`
seconds (docs/reaper.md), each in a process of its own: `lanewatch reap --yes --json`, the
very command a person runs, so a pass costs the recorder nothing while it lasts (the clears'
scans of every process's open files, under the recorder's interpreter lock, would delay its
fanotify reader) and leaves nothing behind in its heap.

The policy file is read again before each pass (an edit counts from the next one; a file
that cannot be read is said once in the log and on the output, and that pass is skipped).
The first pass runs at once. The pass writes `reap.json` (the dashboard's line, the metrics)
with the time of the next; this thread says what it did on the recorder's output as a
`reap` line. `stop()` ends a pass in progress (SIGTERM, then SIGKILL: a clear is one rename,
a purge is resumed by the next) and joins the thread.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from lanewatch.records import reaping

log = logging.getLogger(__name__)
PASS_TIMEOUT = 3600.0  # a pass that takes longer is ended; the next one goes on from there


class ServiceReaper:
    def __init__(
        self,
        roots: Callable[[], Sequence[str]],
        say: Callable[[dict[str, object]], None],
        config: Path | None = None,
    ) -> None:
        self.roots = roots  # the recorder's roots as they are now (a service follows them)
        self.say = say
        self.config = config
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._complained: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lanewatch-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            every = self.once()
            self._stop.wait(every)

    def once(self) -> float:
        """One pass, if there is a policy; the seconds until the next."""
        try:
            policy = reaping.load(self.config)
        except reaping.ReapConfigError as exc:
            self._complain(str(exc))
            return reaping.DEFAULT_EVERY
        self._complained = None
        if policy is None or not policy.active:
            return policy.every if policy is not None else reaping.DEFAULT_EVERY
        args = [sys.executable, "-m", "lanewatch", "reap", "--yes", "--json"]
        args += ["--next-in", repr(policy.every)]
        args += [f"--root={r}" for r in self.roots()]
        if self.config is not None:
            args += ["--config", str(self.config)]
        with self._lock:
            if self._stop.is_set():
                return policy.every
            self._proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        try:
            out, err = self._proc.communicate(timeout=PASS_TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            out, err = self._proc.communicate()
            err = f"the pass took longer than {PASS_TIMEOUT:g}s and was ended; {err}"
        code = self._proc.returncode
        try:
            summary = json.loads(out)["summary"]
        except (ValueError, KeyError, TypeError):
            if not self._stop.is_set():
                self._complain(f"a pass failed (exit {code}): {err.strip()[-500:]}")
            return policy.every
        self.say({**summary, "exit": code, "next_in": policy.every})
        return policy.every

    def _complain(self, why: str) -> None:
        if why != self._complained:
            log.warning("the reaper: %s", why)
            self.say({"error": why})
            self._complained = why
