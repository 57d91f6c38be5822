"""Helpers for the kernel attribution tests: the privilege marker, an engine with kernel
attribution, waiting for known incidents, and a unique file in shared temp."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lanewatch.engine.engine import Engine
from lanewatch.kernel.fanotify import fanotify_available
from lanewatch.linux.netsockets import Listening
from lanewatch.model.holdings import Holding, Owner
from lanewatch.model.kernelwrites import KernelWrite
from lanewatch.model.ports import Listener
from lanewatch.model.views import Evidence, Incident
from tests.conftest import wait_for
from tests.kits.enginekit import Recorder, running

AVAILABLE, REASON = fanotify_available()
F = TypeVar("F", bound=Callable[..., object])
ATTRIBUTION_THREADS = (
    "lanewatch-fanotify",
    "lanewatch-attribution",
    "lanewatch-keeper",
    "lanewatch-proclives",
)


def privileged(test: F) -> F:
    """Runs with root or CAP_SYS_ADMIN; otherwise skips, saying why fanotify is unavailable."""
    skip = pytest.mark.skipif(not AVAILABLE, reason=f"fanotify unavailable here: {REASON}")
    return pytest.mark.privileged(skip(test))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listener(lane: str, port: int, pid: int = 100, family: str | None = None) -> Listener:
    """Lane `lane` (namespace `/r/c.<lane>`) listening on 127.0.0.1:`port` by pid `pid` (its
    socket's inode the pid too), for the port detectors' pure tests."""
    owner = Owner(f"/r/c.{lane}", lane, "c", "/co", frozenset({pid}), pid, pid, family=family)
    h = Holding(pid, 7, f"socket:[{pid}]", "socket", None, False, False, lane, None, (pid,), pid,
                ("server",), fd=3)  # fmt: skip
    return Listener(owner, "owner process", h, Listening("tcp", "127.0.0.1", port, pid, 0))


def kw(path: str, lane: str, t: float, content: bytes = b"x", pid: int = 42) -> KernelWrite:
    """A kernel-attributed write by lane `lane` (namespace `/r/ck.<lane>`, checkout
    `/work/co`), for the detectors' pure tests."""
    return KernelWrite(
        path=path,
        time=t,
        event="close-write",
        size=len(content),
        sha256=sha(content),
        pid=pid,
        start_ticks=7,
        lane=lane,
        namespace=f"/r/ck.{lane}",
        checkout_id="ck",
        checkout_path="/work/co",
        command=("sh",),
        how="$LANEWATCH_NAMESPACE",
        writer=f"pid {pid} (lane {lane}): sh",
    )


@contextlib.contextmanager
def kernel_engine(root: Path) -> Iterator[tuple[Engine, Recorder]]:
    """A started engine with kernel attribution on `root`; its threads checked gone after."""
    with running([root], probe_interval=0.5) as (engine, rec):
        assert engine.attribution == "kernel", engine.attribution_hint
        yield engine, rec
    left = [t.name for t in threading.enumerate() if t.name in ATTRIBUTION_THREADS]
    assert not left, f"attribution threads left running: {left}"


def known(
    rec: Recorder, kind: str, path: Path | str, content: bytes | None = None
) -> tuple[Incident, Evidence] | None:
    """The first incident of `kind` with known evidence for `path` (with that content, if
    given), once delivered."""
    target = str(path)
    with rec.lock:
        incidents = list(rec.picture.incidents.values())
    for i in incidents:
        if i.kind != kind:
            continue
        for e in i.evidence:
            if e.path != target or e.grade != "known" or not e.sha256:
                continue
            if content is None or e.sha256 == sha(content):
                return i, e
    return None


def wait_known(
    rec: Recorder,
    kind: str,
    path: Path | str,
    content: bytes | None = None,
    timeout: float = 20.0,
) -> tuple[Incident, Evidence]:
    found = wait_for(lambda: known(rec, kind, path, content), timeout)
    assert isinstance(found, tuple)
    return found


def json_lines(proc: subprocess.Popen[bytes], into: list[dict[str, Any]]) -> threading.Thread:
    """A thread appending each JSON line `proc` prints to `into`, until its stdout closes."""

    def run() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            into.append(json.loads(raw))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def shared_temp_file(suffix: str = ".json", where: str = "/tmp") -> Iterator[Path]:
    """A fixed-name file in /tmp (or /dev/shm), unique to this test run; removed at the end."""
    base = Path(os.path.realpath(where))
    if not base.is_dir() or not os.access(base, os.W_OK):
        pytest.skip(f"no writable {where} here")
    path = base / f"lanewatch-test-{uuid.uuid4().hex}{suffix}"
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def shared_temp_dir() -> Iterator[Path]:
    """A folder of its own at the first level of /tmp (shared temp for the engine; a fenced lane
    binds it back on its own, apart from pytest's folder), unique to this run; removed at the
    end."""
    base = Path(os.path.realpath("/tmp"))
    if not base.is_dir():
        pytest.skip("no /tmp here")
    path = base / f"lanewatch-test-{uuid.uuid4().hex}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def setpriv_prefix() -> list[str] | None:
    """A prefix that runs a command as root without CAP_SYS_ADMIN (None: cannot here)."""
    if os.geteuid() != 0:
        return [] if not AVAILABLE else None
    setpriv = shutil.which("setpriv")
    return [setpriv, "--bounding-set=-sys_admin"] if setpriv else None
