"""The benchmark's workload: a root of namespaces with files, and the processes that own them.

A namespace looks like one `lanewatch run` leaves: `.lanewatch/` (stamp, lock, ledger), `tmp/`,
`scratch/{a,b,c,d}/` and one receipt in `receipts/`. Its data files are spread over those
folders. The stamps are written by owner processes (`owners.py`), a few processes each owning
many lanes: see that module for what this simulates and what it does not.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lanewatch.lanes.names import namespace_name
from tests.bench.common import (
    CHECKOUT_ID,
    LANE_PREFIX,
    dump_json,
    load_json,
    module_cmd,
    stop_process,
)

DATA_DIRS = ("tmp", "scratch/a", "scratch/b", "scratch/c", "scratch/d")
RECEIPT = "receipts/build.json"


def lane_name(i: int) -> str:
    return f"{LANE_PREFIX}{i:04d}"


def content(i: int) -> bytes:
    return b"%d\n" % i * (1 + i % 40)  # 2 to ~300 bytes, varied


@dataclass
class Tree:
    root: Path
    keys: list[str]  # namespace paths, in lane order
    data: dict[str, list[str]] = field(default_factory=dict)  # key -> its data files

    @property
    def files(self) -> int:
        return sum(len(v) for v in self.data.values())

    def plan_file(self, path: Path, lanes: list[str] | None = None) -> Path:
        """Write the data-file lists of `lanes` (all by default) for a child process."""
        chosen = lanes if lanes is not None else self.keys
        dump_json(path, {"root": str(self.root), "data": {k: self.data[k] for k in chosen}})
        return path


def build_tree(root: Path, count: int, files: int, *, start: int = 0) -> Tree:
    """`count` namespaces with `files` files each (one is the receipt), no stamps yet."""
    root.mkdir(parents=True, exist_ok=True)
    tree = Tree(root, [])
    receipt = (
        b'{"schema": 1, "checkout_id": "%s", "step": "build", "outcome": "pass"}\n'
        % CHECKOUT_ID.encode()
    )
    for i in range(start, start + count):
        ns = root / namespace_name(CHECKOUT_ID, lane_name(i))
        for sub in (".lanewatch", "receipts", *DATA_DIRS):
            (ns / sub).mkdir(parents=True, exist_ok=True)
        paths: list[str] = []
        if files > 0:
            (ns / RECEIPT).write_bytes(receipt)
        for j in range(max(0, files - 1)):
            path = ns / DATA_DIRS[j % len(DATA_DIRS)] / f"f{j:03d}.dat"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, content(i * 131 + j))
            finally:
                os.close(fd)
            paths.append(str(path))
        key = str(ns)
        tree.keys.append(key)
        tree.data[key] = paths
    return tree


def every_nth(keys: list[str], count: int) -> list[str]:
    """`count` keys spread evenly over `keys` (every fifth of 1,000 for 200)."""
    if count >= len(keys):
        return list(keys)
    step = len(keys) / count
    return [keys[int(i * step)] for i in range(count)]


class Owners:
    """Processes owning lanes: each holds the locks of its share and writes their stamps.

    `mode("quiet")`: stamps say a one-hour heartbeat and nobody beats (nothing changes on disk,
    nothing turns hung). `mode("beat")`: stamps say the default interval and every lane's stamp
    is touched (`os.utime`) once per interval, phases spread evenly over all lanes.
    """

    def __init__(self, keys: list[str], procs: int, workdir: Path, env: dict[str, str]) -> None:
        self.keys = keys
        self.procs: list[subprocess.Popen[str]] = []
        self.workdir = workdir
        self.env = env
        self.count = max(1, min(procs, len(keys)))

    def start(self, mode: str = "quiet") -> None:
        n = self.count
        for i in range(n):
            share = self.keys[i::n]
            plan = self.workdir / f"owner-{id(self)}-{i}.json"
            dump_json(plan, {"keys": share, "index": i, "of": n, "total": len(self.keys)})
            proc = subprocess.Popen(
                module_cmd("owners", str(plan), mode),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=self.env,
            )
            self.procs.append(proc)
        for proc in self.procs:
            self._expect(proc, "ready")

    def _expect(self, proc: subprocess.Popen[str], word: str) -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith(word):
            raise RuntimeError(f"owner {proc.pid} said {line!r} instead of {word!r}")

    def mode(self, mode: str) -> None:
        for proc in self.procs:
            stdin: IO[str] | None = proc.stdin
            assert stdin is not None
            stdin.write(mode + "\n")
            stdin.flush()
        for proc in self.procs:
            self._expect(proc, "ok")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for proc in self.procs:
            stop_process(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs = []

    def __enter__(self) -> Owners:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_writer(
    plan: Path, rate: float, seconds: float, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The write load (`writer.py`) in its own process; its log lands in `log`."""
    return subprocess.Popen(
        module_cmd("writer", str(plan), str(rate), str(seconds), str(log)), env=env
    )


def finish_writer(proc: subprocess.Popen[bytes], log: Path, timeout: float) -> dict[str, Any]:
    """Wait for the writer (killed if it overruns) and read its log."""
    try:
        proc.wait(timeout=timeout)
    finally:
        stop_process(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"the writer exited with {proc.returncode}")
    result: dict[str, Any] = load_json(log)
    return result
