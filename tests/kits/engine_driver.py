"""Run a real Engine in its own process and print one JSON line per delivered change.

Used where the test must act on the engine's process from outside: SIGSTOP it to let the
kernel's inotify queue overflow, run it under a user namespace with a low watch limit, or run
it as another user behind `hidepid`. Usage: engine_driver.py [--poll] ROOT...
"""

from __future__ import annotations

import json
import sys
import threading

from lanewatch.engine.engine import Engine
from lanewatch.model.views import Changes


def main(argv: list[str]) -> None:
    poll = "--poll" in argv
    roots = [a for a in argv if a != "--poll"]
    lock = threading.Lock()
    engine = Engine(roots, poll=poll, probe_interval=0.5, poll_interval=0.5)

    def emit(changes: Changes) -> None:
        line = {
            "full": changes.full,
            "health": [[h.root, h.status, h.detail] for h in changes.health],
            "ns": {
                k: {"state": v.state.value, "reason": v.reason, "files": v.files}
                for k, v in changes.upserts.items()
            },
            "removed": sorted(changes.removed),
            "stats": engine.stats,
        }
        with lock:
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    engine.start(emit)
    engine.settled.wait(30)
    with lock:
        sys.stdout.write(json.dumps({"settled": True, "stats": engine.stats}) + "\n")
        sys.stdout.flush()
    try:
        sys.stdin.read()  # until the test closes our stdin
    finally:
        engine.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
