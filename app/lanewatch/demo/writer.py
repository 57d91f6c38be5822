"""The demo lanes' worker: `python <this file> [--every S] [--hold FILE] [--cwd DIR] ...`.

It is what a demo lane runs under `lanewatch run`: it keeps one file open (`--hold`, default
`$TMPDIR/activity.log`), appends a line to it each tick and rewrites one of a few small chunk
files in `$TMPDIR`, at a modest rate. With `--versions` it still holds that file open (what the
prober sees), but writes nothing through that descriptor: each tick it rewrites the file whole,
a few lines of text naming its lane, and closes it, as most tools write a file. A close is when
kernel attribution reads a small file's content, so each version is recorded with its writer.
`--cwd` and `--hold` point it elsewhere, which is how the demo stages a foreign write (into
another lane's namespace) and an unbound write (into shared temp). `--burst N` writes N chunks
and exits (the released lane). `--listen ADDR:PORT` (or `env`: 127.0.0.1:$PORT) keeps a TCP
socket listening there while it runs: the demo's port incidents (loopback only).

Standard library only, and run as a script, so each of the demo's writers starts in a blink.
It dies with its parent (`PR_SET_PDEATHSIG`, SIGKILL: that reaches a stopped process too), and
also exits on its own once its parent changes or the demo process named by
$LANEWATCH_DEMO_OWNER ("pid:start_ticks") is gone.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import random
import signal
import socket
import sys
import time
from pathlib import Path
from types import ModuleType

ENV_DEMO_OWNER = "LANEWATCH_DEMO_OWNER"
MAX_HELD_BYTES = 256 * 1024
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        arg = ctypes.c_ulong
        libc.prctl(PR_SET_PDEATHSIG, arg(signal.SIGKILL), arg(0), arg(0), arg(0))
    except (OSError, AttributeError):
        pass  # no prctl here: the parent and owner checks in Watch still end us


def _linux_proc() -> ModuleType:
    """`lanewatch.linux.proc` loaded from its file: it is stdlib only, and importing the
    package would load the whole of lanewatch into every demo writer."""
    name = "_lanewatch_linux_proc"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "linux" / "proc.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _is_alive(pid: int, ticks: int) -> bool:
    """Whether `pid` still has start time `ticks` (as `linux.procid`). A process we cannot
    read is not read as dead."""
    proc = _linux_proc()
    try:
        st = proc.read_stat(pid)
    except OSError:
        return True
    return st is not None and st.state not in ("Z", "X") and st.start_ticks == ticks


class Watch:
    """Whether we are still wanted: the same parent, and the demo process still alive."""

    def __init__(self) -> None:
        die_with_parent()
        self.parent = os.getppid()
        pid, _, ticks = os.environ.get(ENV_DEMO_OWNER, "").partition(":")
        self.owner = (int(pid), int(ticks)) if pid.isdigit() and ticks.isdigit() else None

    def wanted(self) -> bool:
        if self.parent <= 1 or os.getppid() != self.parent:
            return False
        return self.owner is None or _is_alive(*self.owner)

    def sleep(self, seconds: float) -> bool:
        """Sleep in short steps; False as soon as we are no longer wanted."""
        end = time.monotonic() + seconds
        while True:
            if not self.wanted():
                return False
            left = end - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.25))


def _wait_for_dir(path: Path, watch: Watch, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while not path.is_dir():
        if time.monotonic() > end or not watch.sleep(0.02):
            return False
    return True


def run(args: argparse.Namespace) -> int:
    watch = Watch()
    churn = Path(args.dir or os.environ.get("TMPDIR") or os.getcwd())
    hold = Path(args.hold) if args.hold else churn / "activity.log"
    if not _wait_for_dir(hold.parent, watch):
        print(f"demo writer: {hold.parent} never appeared", file=sys.stderr)
        return 1
    if args.cwd:
        os.chdir(args.cwd)
    _sockets = [listen(spec) for spec in args.listen]  # held open while it runs
    with open(hold, "ab", buffering=0) as held:
        tick = 0
        while args.burst == 0 or tick < args.burst:
            size = random.randint(256, 4096)
            (churn / f"chunk-{tick % args.files:02d}.bin").write_bytes(os.urandom(size))
            if args.versions:
                hold.write_bytes(version(tick, size))  # opened, written whole, closed
            else:
                if held.tell() > MAX_HELD_BYTES:
                    held.truncate(0)
                line = f"{time.time():.3f} pid {os.getpid()} tick {tick}: {size} bytes\n"
                held.write(line.encode())
            tick += 1
            if args.burst == 0 and not watch.sleep(args.every * random.uniform(0.7, 1.3)):
                return 0
    return 0


def listen(spec: str) -> socket.socket | None:
    """A listening TCP socket at `spec` ("127.0.0.1:20001", "[::1]:18000", or "env": the
    lane's $PORT on 127.0.0.1); None where it cannot be made (the demo goes on without it)."""
    if spec == "env":
        spec = f"127.0.0.1:{os.environ.get('PORT', '')}"
    host, _, port = spec.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        s = socket.socket(family, socket.SOCK_STREAM)
        s.bind((host, int(port)))
        s.listen()
    except (OSError, ValueError) as exc:
        print(f"demo writer: cannot listen on {spec}: {exc}", file=sys.stderr)
        return None
    return s


def version(tick: int, size: int) -> bytes:
    """One version of a `--versions` file: small text, different from one tick to the next
    and from one lane to another (what a diff between two writers shows)."""
    lane = os.environ.get("LANEWATCH_LANE", "?")
    lines = [f"written by lane {lane}, pid {os.getpid()}", f"tick {tick}", f"chunk {size} bytes"]
    return ("\n".join(lines) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lanewatch demo writer")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between writes")
    parser.add_argument("--dir", help="where chunk files go (default: $TMPDIR)")
    parser.add_argument("--hold", help="file kept open and appended to")
    parser.add_argument("--cwd", help="working directory to sit in")
    parser.add_argument("--files", type=int, default=12, help="chunk files, rewritten in turn")
    parser.add_argument("--burst", type=int, default=0, help="write this many chunks, then exit")
    parser.add_argument(
        "--listen", action="append", default=[], help="ADDR:PORT (or env) to listen on"
    )
    parser.add_argument(
        "--versions", action="store_true", help="rewrite the held file whole each tick, and close"
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
