"""The recorder under tracemalloc: `python -m tests.soak.traced DIR EVERY lanewatch-args...`.

Every EVERY seconds it writes DIR/snap-N.txt: RSS, Python's traced total, and the 40 places
(file:line, 8 frames deep, grouped by the first frame) whose traced memory grew most since
the first snapshot, and the counts of the live objects' types that grew most. For finding
what grows in a soak (`soak.py --trace DIR`); never part of a normal run.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _types() -> Counter[str]:
    return Counter(type(o).__name__ for o in gc.get_objects())


def _dump(folder: Path, every: float) -> None:
    first = tracemalloc.take_snapshot()
    types0 = _types()
    n = 0
    while True:
        time.sleep(every)
        n += 1
        snap = tracemalloc.take_snapshot()
        stats = snap.compare_to(first, "traceback")[:40]
        types = _types()
        grown = sorted(((types[k] - types0.get(k, 0), k) for k in types), reverse=True)[:30]
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"rss {_rss_kib()} KiB traced {current >> 10} KiB peak {peak >> 10} KiB"]
        lines += [f"type {k} +{d} (now {types[k]})" for d, k in grown]
        for s in stats:
            lines.append(f"{s.size_diff >> 10:+} KiB {s.count_diff:+} blocks")
            lines += [f"    {f.filename}:{f.lineno}" for f in s.traceback[:8]]
        (folder / f"snap-{n:03d}.txt").write_text("\n".join(lines) + "\n")


def main() -> None:
    folder, every, args = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    folder.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(8)
    threading.Thread(target=_dump, args=(folder, every), daemon=True, name="traced").start()
    sys.argv = ["lanewatch", *args]
    from lanewatch.cli.entry import main as lanewatch

    lanewatch()


if __name__ == "__main__":
    main()
