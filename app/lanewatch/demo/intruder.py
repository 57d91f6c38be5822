"""The demo's takeover: `python -m lanewatch.demo.intruder --namespace NS [--delay S]`.

After `--delay` seconds (counted from when the file `--after` appears, if given: the demo makes
it once it is built and its dashboard starts, so the takeover happens in front of it) it
rewrites a live lane's owner stamp with its own identity (pid, start ticks, host, its real
command line), using the scheme's stamp writer, while the real owner lives on and keeps the
lock. Then it just stays alive, so the stamp names a live process, until
the demo stops it or goes away.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from lanewatch.demo.writer import Watch
from lanewatch.lanes.stamp import read_stamp, write_stamp
from lanewatch.linux.procid import ProcessIdentity, hostname


def take_over(namespace: Path) -> int | None:
    """Rewrite the stamp in `namespace` as ours; our pid, or None when there is no stamp."""
    current = read_stamp(namespace)
    if current.stamp is None:
        return None
    me = ProcessIdentity.current()
    now = time.time()
    forged = current.stamp.with_changes(
        pid=me.pid,
        start_ticks=me.start_ticks,
        boot_id=me.boot_id,
        host=hostname(),
        command=list(sys.orig_argv),
        started_at=now,
        heartbeat_at=now,
        child_pid=None,
        child_start_ticks=None,
        pgid=None,
    )
    write_stamp(namespace, forged)
    return me.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lanewatch.demo.intruder")
    parser.add_argument("--namespace", required=True, type=Path)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--after", type=Path, help="count the delay from when this file exists")
    args = parser.parse_args(argv)
    watch = Watch()
    while args.after is not None and not args.after.exists():
        if not watch.sleep(0.1):
            return 0
    if not watch.sleep(args.delay):
        return 0
    if take_over(args.namespace) is None:
        print(f"demo intruder: no stamp to take over in {args.namespace}", file=sys.stderr)
        return 1
    print(f"demo intruder: rewrote the owner stamp of {args.namespace}", file=sys.stderr)
    while watch.sleep(1.0):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
