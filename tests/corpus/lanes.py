"""Processes the corpus starts: `lanewatch record`, and `lanewatch run` lanes, each in a
process group of its own, stopped (SIGTERM, then SIGKILL of the group) at the end."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lanewatch.lanes.checkout import resolve_checkout
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.stamp import Stamp, read_stamp

LANEWATCH = (sys.executable, "-m", "lanewatch")


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `condition` until truthy (returned); TimeoutError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:g}s: {what}")
        time.sleep(0.05)
    return value


def _stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the process (a runner forwards it to CMD's group), then SIGKILL its group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@dataclass
class Lane:
    name: str
    checkout: Path
    namespace: Path
    proc: subprocess.Popen[bytes]
    started: float
    output: list[bytes] = field(default_factory=list)
    reader: threading.Thread | None = None
    ended: float | None = None

    def stamp(self) -> Stamp | None:
        return read_stamp(self.namespace).stamp

    def ready(self) -> bool:
        """Its stamp names the runner and CMD (CMD has started)."""
        s = self.stamp()
        return s is not None and s.pid == self.proc.pid and s.child_pid is not None

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        self.ended = self.ended or time.monotonic()
        if self.reader is not None:
            self.reader.join(timeout=10)
        return code

    def text(self) -> str:
        return b"".join(self.output).decode(errors="replace")


class Processes:
    """Everything started here; `close()` stops what still runs."""

    def __init__(self, root: Path, env: Mapping[str, str]) -> None:
        self.root = root
        self.env = dict(env)
        self.started: list[subprocess.Popen[bytes]] = []

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("env", self.env)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(list(argv), process_group=0, **kwargs)
        self.started.append(proc)
        return proc

    def lane(
        self,
        name: str,
        checkout: Path,
        argv: Sequence[str],
        *,
        fence: str = "auto",
        env: Mapping[str, str] | None = None,
        stdout: IO[bytes] | None = None,
        root: Path | None = None,
    ) -> Lane:
        """`lanewatch run --lane NAME -- ARGV` in `checkout` (in the recorder's root unless
        `root`); its output collected unless `stdout` (a file the caller opened) takes it."""
        root = root or self.root
        args = [*LANEWATCH, "run", "--root", str(root), "--lane", name, "--fence", fence]
        proc = self.popen(
            [*args, "--", *argv],
            cwd=checkout,
            env={**self.env, **(env or {})},
            stdout=stdout or subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        ns = root.resolve() / namespace_name(resolve_checkout(checkout).checkout_id, name)
        lane = Lane(name, checkout, ns, proc, time.monotonic())
        if stdout is None:
            lane.reader = threading.Thread(target=_drain, args=(proc, lane.output), daemon=True)
            lane.reader.start()
        return lane

    def close(self) -> None:
        for proc in reversed(self.started):
            _stop_group(proc, grace=5)


def _drain(proc: subprocess.Popen[bytes], into: list[bytes]) -> None:
    assert proc.stdout is not None
    for chunk in iter(lambda: proc.stdout.read1(1 << 16), b""):  # type: ignore[union-attr]
        into.append(chunk)


class Recorder:
    """`lanewatch record --json --root ROOT`, its lines in a file read as they come."""

    def __init__(self, procs: Processes, base: Path) -> None:
        self.out = base / "record.jsonl"
        self.err = base / "record.err"
        self.root = str(procs.root.resolve())
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = procs.popen(
                [*LANEWATCH, "record", "--json", "--root", str(procs.root)],
                cwd=base,
                stdout=out,
                stderr=err,
            )

    def lines(self) -> list[dict[str, Any]]:
        with open(self.out, "rb") as f:
            raw = f.read()
        return [json.loads(line) for line in raw.split(b"\n")[:-1] if line.strip()]

    def first(self, **match: Any) -> dict[str, Any] | None:
        return next((x for x in self.lines() if all(x.get(k) == v for k, v in match.items())), None)

    def wait_ready(self, timeout: float = 60) -> str:
        """Once it watches the root (kernel attribution, where it has it, starts before the
        watches): its attribution mode."""

        def ready() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lanewatch record exited: {self.err.read_text()[-2000:]}")
            return self.first(type="health", root=self.root, detail="inotify")

        wait_until(ready, timeout, "lanewatch record watches the root")
        start = self.first(type="start")
        assert start is not None
        return str(start["attribution"]["mode"])

    def incidents(self) -> dict[str, dict[str, Any]]:
        """The incidents it printed, the last line of each id."""
        return {str(x["id"]): x for x in self.lines() if x.get("type") == "incident"}

    def stop(self) -> None:
        _stop_group(self.proc, grace=30)
