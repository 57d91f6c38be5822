"""One host's live picture: `ssh HOST lanewatch record --json --views --until-eof`, read line
by line on a thread of its own, each line turned into this side's `Changes`.

Its health is the host's row in the status line (`ssh:NAME`): connecting, ok, degraded (the
link was lost: reconnecting with backoff, the lanes shown as last seen), missing (no lanewatch
there). A hello (`lanewatch hello --json`) comes first, so the far version and scheme are known
before anything is shown, and a half-migrated host is flagged (`flags.py`) whatever happens next.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import IO, Any

from lanewatch.hosts import farviews, flags, link
from lanewatch.hosts.config import Host
from lanewatch.model.views import Changes, Incident, NamespaceView, SourceHealth

log = logging.getLogger(__name__)

CONNECTING = "connecting"
OK = "ok"
LOST = "degraded"  # the status line's word for "not watching normally"
MISSING = "missing"
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # seconds before each retry, the last one repeated
# A far namespace whose view moved by its heartbeat alone is told at most this often (in one
# `beats` line for all of them: ~200 whole views a second at 1,000 lanes otherwise). A write,
# a state or anything else still comes at once.
BEATS_EVERY = 1.0


@dataclass
class HostState:
    """What is known of one host now (read under the stream's lock)."""

    host: Host
    status: str = CONNECTING
    detail: str = "connecting"
    hello: dict[str, Any] | None = None
    flags: list[flags.Flag] = field(default_factory=list)
    since: float = field(default_factory=time.time)
    connects: int = 0  # links made so far (a reconnect makes it 2)
    retry_in: float | None = None  # seconds until the next try, while down

    def health(self) -> SourceHealth:
        """One line in the status line: what is wrong, the fix, then the retry (a narrow
        terminal cuts the end of the line: the fix comes first)."""
        words = [self.detail]
        for f in self.flags:
            words += [f"fix: {f.fix}"] if f.kind == flags.MISSING else [f.detail, f"fix: {f.fix}"]
        if self.retry_in is not None:
            words.append(f"retrying in {self.retry_in:g}s")
        status = self.status
        if status == OK and any(f.kind != flags.UNBOUND for f in self.flags):
            status = LOST  # up, but half-migrated: not watching normally
        return SourceHealth(farviews.host_root(self.host.name), status, "; ".join(words))

    def to_json(self) -> dict[str, Any]:
        hello = self.hello or {}
        return {
            "name": self.host.name,
            "destination": self.host.destination,
            "status": self.status,
            "detail": self.detail,
            "version": hello.get("version"),
            "scheme": hello.get("scheme"),
            "hostname": hello.get("hostname"),
            "user": hello.get("user"),
            "flags": [f.to_json() for f in self.flags],
        }


def judge_hello(host: Host, answer: link.Answer, state: HostState) -> bool:
    """Fill `state` from a hello's answer; True when lanewatch answered (stream it)."""
    state.flags = [f for f in state.flags if f.kind == flags.UNBOUND]
    if answer.no_lanewatch:
        state.status, state.detail = MISSING, "lanewatch is not installed there"
        state.flags.insert(0, flags.missing(host, answer.why()))
        return False
    if answer.unreachable:
        state.status, state.detail = LOST, f"unreachable: {answer.why()}"
        return False
    hello = answer.json()
    if answer.code != 0 or hello is None:
        # An old lanewatch without `hello`, or something else answering: no scheme at all.
        state.hello = {"scheme": None, "version": "?"}
        state.flags.insert(0, flags.scheme(host, state.hello) or flags.missing(host, "no hello"))
        state.status, state.detail = LOST, f"no hello: {answer.why()}"
        return False
    state.hello = hello
    flag = flags.scheme(host, hello)
    if flag is not None:
        state.flags.insert(0, flag)
    return True


class HostStream:
    """Keeps one host's `record` running and hands its changes to `on_changes`."""

    def __init__(self, host: Host, roots: list[str] | None = None) -> None:
        self.host = host
        self.roots = roots or []
        self.state = HostState(host)
        self.views: dict[str, NamespaceView] = {}
        self.incidents: dict[str, Incident] = {}
        self.far_health: dict[str, SourceHealth] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._out: Callable[[Changes], None] = lambda c: None
        self.lines = 0  # lines read (tests, the bench)
        self.kinds: Counter[str] = Counter()  # lines read by type (tests, the bench)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, on_changes: Callable[[Changes], None]) -> None:
        self._out = on_changes
        self._thread = threading.Thread(
            target=self._run, name=f"host {self.host.name}", daemon=True
        )
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """End the link (its far `record` sees stdin close and stops); `wait=False` only asks,
        so many hosts stop at once (`join` then waits)."""
        self._stop.set()
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
        if wait:
            self.join()

    def join(self) -> None:
        proc = self._proc
        if proc is not None:
            _end(proc)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def health(self) -> list[SourceHealth]:
        with self.lock:
            return [self.state.health(), *self.far_health.values()]

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        tries = 0
        while not self._stop.is_set():
            self._set(CONNECTING, "connecting" if tries == 0 else "reconnecting")
            answer = link.call(self.host, "hello", "--json")
            with self.lock:
                fine = judge_hello(self.host, answer, self.state)
            streamed = False
            if fine and not self._stop.is_set():
                streamed = self._stream()
            tries = 0 if streamed else tries + 1
            wait = BACKOFF[min(tries, len(BACKOFF) - 1)]
            with self.lock:
                if self.state.status in (OK, CONNECTING):
                    self.state.status = LOST
                    self.state.detail = "connection lost"
                self.state.retry_in = wait
            self._tell()
            self._stop.wait(wait)

    def _stream(self) -> bool:
        """One link: True when it carried a picture before it ended."""
        args = ["record", "--json", "--views", "--until-eof"]
        with self.lock:
            accepts = (self.state.hello or {}).get("record") or ()
        if isinstance(accepts, list) and "beats" in accepts:  # an older far side has no --beats
            args += ["--beats", f"{BEATS_EVERY:g}"]
        for root in self.roots:
            args += ["--root", root]
        try:
            proc = subprocess.Popen(
                self.host.argv(*args),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            )
        except OSError as exc:
            self._set(LOST, f"cannot run ssh: {exc}")
            return False
        self._proc = proc
        err: list[str] = []
        assert proc.stdout is not None and proc.stderr is not None
        threading.Thread(target=_collect, args=(proc.stderr, err), daemon=True).start()
        pending: set[str] | None = None  # keys to drop once the first picture is whole
        expected = 0
        carried = False
        for raw in proc.stdout:
            if self._stop.is_set():
                break
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # not ours (a login banner): ignored
            if not isinstance(line, dict):
                continue
            self.lines += 1
            kind = line.get("type")
            self.kinds[str(kind)] += 1
            if kind == "start":
                carried = True
                with self.lock:
                    self.state.connects += 1
                    pending, expected = set(self.views), int(line.get("namespaces") or 0)
                self._set(OK, f"streaming from {self.host.destination}")
                if expected == 0:
                    self._drop(pending)
                    pending = None
                continue
            self._line(kind, line)
            if pending is not None and kind == "state":
                pending.discard(farviews.remote_key(self.host.name, str(line.get("key", ""))))
                expected -= 1
                if expected <= 0:
                    self._drop(pending)
                    pending = None
        _end(proc)
        self._proc = None
        if not self._stop.is_set():
            why = err[-1].strip() if err else f"exit {proc.returncode}"
            with self.lock:
                self.state.status, self.state.detail = LOST, f"connection lost ({why[:200]})"
        return carried

    def _line(self, kind: Any, line: Mapping[str, Any]) -> None:
        name = self.host.name
        upserts: dict[str, NamespaceView] = {}
        removed: set[str] = set()
        incidents: dict[str, Incident] = {}
        with self.lock:
            if kind == "state":
                key = farviews.remote_key(name, str(line.get("key", "")))
                if line.get("state") == "removed":
                    self.views.pop(key, None)
                    removed.add(key)
                else:
                    data = line.get("view")
                    v = farviews.view(name, data if isinstance(data, Mapping) else line)
                    self.views[v.key] = v
                    upserts[v.key] = v
            elif kind == "incident":
                i = farviews.incident(name, line)
                self.incidents[i.id] = i
                incidents[i.id] = i
                self._reflag()
            elif kind == "health":
                h = farviews.health(name, line)
                self.far_health[h.root] = h
            elif kind == "beats":
                beats = line.get("beats")
                for far_key, at in beats.items() if isinstance(beats, Mapping) else ():
                    key = farviews.remote_key(name, str(far_key))
                    seen = self.views.get(key)
                    if (
                        seen is not None
                        and isinstance(at, int | float)
                        and not isinstance(at, bool)
                    ):
                        upserts[key] = self.views[key] = replace(seen, heartbeat_at=float(at))
            else:
                return
        self._tell(upserts, removed, incidents)

    def _reflag(self) -> None:
        kept = [f for f in self.state.flags if f.kind != flags.UNBOUND]
        flag = flags.unbound(self.incidents.values())
        self.state.flags = kept + ([flag] if flag is not None else [])

    def _drop(self, keys: set[str]) -> None:
        """Namespaces that went away while the link was down."""
        if not keys:
            return
        with self.lock:
            for key in keys:
                self.views.pop(key, None)
        self._tell(removed=keys)

    def _set(self, status: str, detail: str) -> None:
        with self.lock:
            if (self.state.status, self.state.detail) == (status, detail):
                return
            self.state.status, self.state.detail = status, detail
            self.state.since = time.time()
            self.state.retry_in = None
        self._tell()

    def _tell(
        self,
        upserts: Mapping[str, NamespaceView] | None = None,
        removed: set[str] | None = None,
        incidents: Mapping[str, Incident] | None = None,
    ) -> None:
        self._out(
            Changes(
                upserts=MappingProxyType(dict(upserts or {})),
                removed=frozenset(removed or ()),
                incidents=MappingProxyType(dict(incidents or {})),
                health=tuple(self.health()),
                at=time.time(),
            )
        )


def _collect(stream: IO[str], into: list[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for line in stream:
            into.append(line)
            del into[:-20]


def _end(proc: subprocess.Popen[str]) -> None:
    """Close ssh's stdin (the far `record --until-eof` stops), then end ssh if it lingers."""
    with contextlib.suppress(OSError, ValueError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
