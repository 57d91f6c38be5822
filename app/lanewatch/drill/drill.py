"""`lanewatch drill`: the collision drill. Write the same things in parallel on purpose.

N lanes, each a real `lanewatch run --lane drill-<run>-<i>` process in this checkout, run a
writer that writes the same artifact classes under the same relative names, over and over, each
with its own token: a receipt (`receipts/drill.json`, through the receipt writer), a temp file
(`$TMPDIR/drill-artifact.tmp`), a test output (`scratch/test-output.xml`) and ledger lines.
After every write it reads back; at the end every writer writes once more, all wait at a
barrier, and only then read their last write back. In the isolated layout every read must
return the writer's own bytes. With `--unbound`, N more writers run the same code against ONE
shared folder (created inside this run's private temp folder, never a real shared path); there
the barrier guarantees that all but the last writer find a clobber, which proves the drill can
see one at all.

Lane names differ per lane and per run, so N lanes of one checkout get N namespaces. The lanes
live in a private root inside the run's temp folder (with a private state dir, so the user's
roots registry is untouched) unless `root` names a real one. The temp folder is removed at the
end unless `keep`.

Writers talk to the drill over stdin/stdout, one line each: `ready`, `written`, then the JSON
report; the drill answers `go` and `check`. A writer whose stdin closes stops.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes import ledger
from lanewatch.lanes.checkout import Checkout, find_checkout, resolve_checkout
from lanewatch.lanes.fsutil import ensure_real_dir
from lanewatch.lanes.lane import ENV_LANE, ENV_NAMESPACE, SCRATCH_DIR, TMP_DIR, LaneTarget
from lanewatch.lanes.stamp import META_DIR
from lanewatch.proof.gitstate import GitState, read_git_state
from lanewatch.proof.receipts import make_receipt, read_receipt, receipt_path, store_receipt

CLASSES = ("receipt", "temp", "test-output", "ledger")
STEP = "drill"
TEMP_NAME = "drill-artifact.tmp"
OUTPUT_NAME = "test-output.xml"
LEDGER_EVENT = "drill-write"
PAD = b"." * 2048
MAX_EXAMPLES = 5
STARTUP_TIMEOUT = 60.0
REPORT_TIMEOUT = 60.0

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CLOBBERED = 4  # a lane found another's bytes in its own namespace
EXIT_BLIND = 5  # --unbound found no clobber in the shared folder: the drill cannot see one


# ----------------------------------------------------------------------------------------------
# The writer (runs in each lane's process)


@dataclass
class Layout:
    mode: str  # "isolated" | "shared"
    lane: str
    namespace: Path
    tmp: Path
    scratch: Path


class Writer:
    def __init__(self, layout: Layout, token: str, target: LaneTarget, git: GitState) -> None:
        self.layout = layout
        self.token = token
        self.target = target
        self.git = git
        self.writes = dict.fromkeys(CLASSES, 0)
        self.clobbers = dict.fromkeys(CLASSES, 0)
        self.examples: list[dict[str, Any]] = []

    def _content(self, seq: int) -> bytes:
        return f"{self.token} {seq}\n".encode() + PAD

    def _clobbered(self, cls: str, path: Path, seq: int, found: str) -> None:
        self.clobbers[cls] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"class": cls, "path": str(path), "seq": seq, "found": found})

    def write_all(self, seq: int) -> None:
        lay = self.layout
        receipt = make_receipt(
            STEP,
            self.target,
            exit_code=0,
            command=["lanewatch-drill", self.token, str(seq)],
            started_at=time.time(),
            finished_at=time.time(),
            git=self.git,
        )
        store_receipt(lay.namespace, receipt)
        self.writes["receipt"] += 1
        for cls, path in (
            ("temp", lay.tmp / TEMP_NAME),
            ("test-output", lay.scratch / OUTPUT_NAME),
        ):
            with open(path, "wb") as f:
                f.write(self._content(seq))
            self.writes[cls] += 1
        ledger.append(lay.namespace, LEDGER_EVENT, lane=lay.lane, token=self.token, seq=seq)
        self.writes["ledger"] += 1

    def check_all(self, seq: int) -> None:
        lay = self.layout
        read = read_receipt(lay.namespace, STEP)
        want = ("lanewatch-drill", self.token, str(seq))
        if read.receipt is None or read.receipt.command != want:
            found = " ".join(read.receipt.command[1:]) if read.receipt else read.status.value
            self._clobbered("receipt", receipt_path(lay.namespace, STEP), seq, found)
        for cls, path in (
            ("temp", lay.tmp / TEMP_NAME),
            ("test-output", lay.scratch / OUTPUT_NAME),
        ):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                data = b"(missing)"
            if data != self._content(seq):
                self._clobbered(
                    cls, path, seq, data.split(b"\n", 1)[0][:80].decode("utf-8", "replace")
                )

    def check_ledger(self, last_seq: int) -> None:
        mine: set[int] = set()
        for line in ledger.read(self.layout.namespace):
            if line.event != LEDGER_EVENT:
                continue
            if line.fields.get("token") != self.token:
                self._clobbered(
                    "ledger",
                    ledger.ledger_path(self.layout.namespace),
                    int(line.fields.get("seq") or 0),
                    f"a line of {line.fields.get('token')}",
                )
                continue
            seq = line.fields.get("seq")
            if isinstance(seq, int):
                mine.add(seq)
        for seq in sorted(set(range(1, last_seq + 1)) - mine):
            self._clobbered(
                "ledger", ledger.ledger_path(self.layout.namespace), seq, "(line missing)"
            )


def _layout(mode: str, index: int, shared_dir: str | None) -> Layout:
    if mode == "shared":
        if not shared_dir:
            raise LanewatchError("--dir is required for the shared layout")
        ns = Path(shared_dir)
        for sub in ("", META_DIR, TMP_DIR, SCRATCH_DIR):
            ensure_real_dir(ns / sub if sub else ns)
        return Layout(mode, f"shared-{index}", ns, ns / TMP_DIR, ns / SCRATCH_DIR)
    env_ns, env_lane, tmp = (os.environ.get(v) for v in (ENV_NAMESPACE, ENV_LANE, "TMPDIR"))
    if not env_ns or not env_lane or not tmp:
        raise LanewatchError(f"not inside a lane: ${ENV_NAMESPACE} or $TMPDIR is not set")
    ns = Path(env_ns)
    if not _same_folder(tmp, ns / TMP_DIR):  # /tmp inside the fence, or a short link
        raise LanewatchError(f"$TMPDIR {tmp} is not the lane's own tmp folder")
    return Layout(mode, env_lane, ns, Path(tmp), ns / SCRATCH_DIR)


def _same_folder(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _wait_for(expected: str) -> None:
    line = sys.stdin.readline()
    if line.strip() != expected:
        raise SystemExit(EXIT_ERROR)  # the drill went away (EOF) or spoke out of turn


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def worker_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lanewatch.drill.drill worker")
    p.add_argument("role", choices=["worker"])
    p.add_argument("--mode", choices=["isolated", "shared"], required=True)
    p.add_argument("--index", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--checkout", required=True)
    p.add_argument("--dir")
    args = p.parse_args(argv)
    report: dict[str, Any] = {"index": args.index, "mode": args.mode, "pid": os.getpid()}
    try:
        layout = _layout(args.mode, args.index, args.dir)
        bound = find_checkout(args.checkout)
        if bound is None:
            raise LanewatchError(f"{args.checkout} is not a checkout")
    except LanewatchError as exc:
        _say(json.dumps({**report, "error": str(exc)}))
        return EXIT_ERROR
    target = LaneTarget(bound, layout.lane, layout.namespace.parent, layout.namespace)
    token = f"{args.mode}-{args.index}-{os.getpid()}-{os.urandom(4).hex()}"
    writer = Writer(layout, token, target, read_git_state(bound.root))
    _say("ready")
    _wait_for("go")
    deadline = time.monotonic() + args.seconds
    seq = 0
    while True:
        seq += 1
        writer.write_all(seq)
        writer.check_all(seq)
        if time.monotonic() >= deadline:
            break
    seq += 1
    writer.write_all(seq)  # the last write, read back only after every writer made its own
    _say("written")
    _wait_for("check")
    writer.check_all(seq)
    writer.check_ledger(seq)
    report.update(
        lane=layout.lane,
        namespace=str(layout.namespace),
        token=token,
        writes=writer.writes,
        clobbers=writer.clobbers,
        examples=writer.examples,
        error=None,
    )
    _say(json.dumps(report))
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# The drill (runs in `lanewatch drill`)


@dataclass
class LaneReport:
    index: int
    mode: str
    lane: str | None = None
    namespace: str | None = None
    pid: int | None = None
    writes: dict[str, int] = field(default_factory=dict)
    clobbers: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    exit_code: int | None = None

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    @property
    def total_clobbers(self) -> int:
        return sum(self.clobbers.values())


@dataclass
class DrillReport:
    checkout_id: str
    checkout_path: str
    lanes: int
    seconds: float
    root: str
    work_dir: str
    kept: bool
    shared_dir: str | None
    isolated: list[LaneReport]
    unbound: list[LaneReport] | None
    shared_namespaces: list[str] = field(default_factory=list)  # isolated lanes that met

    @property
    def errors(self) -> list[str]:
        out = [f"{r.mode} lane {r.index}: {r.error}" for r in self.isolated if r.error]
        out += [f"shared writer {r.index}: {r.error}" for r in self.unbound or () if r.error]
        return out

    @property
    def isolated_clobbers(self) -> int:
        return sum(r.total_clobbers for r in self.isolated) + len(self.shared_namespaces)

    @property
    def unbound_clobbers(self) -> int:
        return sum(r.total_clobbers for r in self.unbound or ())

    @property
    def exit_code(self) -> int:
        if self.isolated_clobbers:
            return EXIT_CLOBBERED
        if self.errors:
            return EXIT_ERROR
        if self.unbound is not None and not self.unbound_clobbers:
            return EXIT_BLIND
        return EXIT_OK

    @property
    def ok(self) -> bool:
        return self.exit_code == EXIT_OK

    def by_class(self, reports: Sequence[LaneReport]) -> dict[str, int]:
        return {c: sum(r.clobbers.get(c, 0) for r in reports) for c in CLASSES}

    def to_json(self) -> dict[str, Any]:
        def lanes(reports: Sequence[LaneReport]) -> dict[str, Any]:
            return {
                "writes": sum(r.total_writes for r in reports),
                "clobbers": sum(r.total_clobbers for r in reports),
                "clobbers_by_class": self.by_class(reports),
                "lanes": [asdict(r) for r in reports],
            }

        return {
            "ok": self.ok,
            "exit_code": self.exit_code,
            "checkout_id": self.checkout_id,
            "checkout_path": self.checkout_path,
            "lanes": self.lanes,
            "seconds": self.seconds,
            "root": self.root,
            "work_dir": self.work_dir,
            "kept": self.kept,
            "errors": self.errors,
            "isolated": {**lanes(self.isolated), "shared_namespaces": self.shared_namespaces},
            "unbound": None
            if self.unbound is None
            else {**lanes(self.unbound), "shared_dir": self.shared_dir},
        }


class _Child:
    """One writer process and the lines it has said so far."""

    def __init__(self, report: LaneReport, argv: list[str], env: dict[str, str], log: Path):
        self.report = report
        self.log = log
        self._stderr: IO[bytes] = open(log, "wb")  # noqa: SIM115 (closed in stop())
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            self._stderr.close()
            raise
        self.buf = b""
        self.lines: list[str] = []
        self.eof = False

    def feed(self) -> None:
        assert self.proc.stdout is not None
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            self.eof = True
            return
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        self.lines += [line.decode("utf-8", "replace") for line in done]

    def send(self, line: str) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()

    def stderr_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace").strip()
        except OSError:
            return ""
        return text.splitlines()[-1][:200] if text else ""

    def stop(self) -> None:
        """Close its stdin (it stops at its next barrier), then signal what is left."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # `lanewatch run` forwards it
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


def _await_lines(children: Sequence[_Child], count: int, timeout: float) -> None:
    """Wait until every child has said `count` lines, hung up, or the time is up."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        for c in children:
            if len(c.lines) < count and not c.eof:
                assert c.proc.stdout is not None
                sel.register(c.proc.stdout, selectors.EVENT_READ, c)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for key, _ in sel.select(timeout=left):
                child: _Child = key.data
                child.feed()
                if len(child.lines) >= count or child.eof:
                    sel.unregister(key.fileobj)


def _expect(children: Sequence[_Child], count: int, word: str, timeout: float) -> bool:
    _await_lines(children, count, timeout)
    ok = True
    for c in children:
        if c.report.error:
            ok = False
            continue
        said = c.lines[count - 1] if len(c.lines) >= count else None
        if said == word:
            continue
        ok = False
        if said is not None and said.startswith("{"):
            with contextlib.suppress(ValueError):
                c.report.error = json.loads(said).get("error") or f"said {said[:80]!r}"
                continue
        why = "exited" if c.eof else f"said nothing for {timeout:.0f}s"
        c.report.error = f"expected {word!r}, {why} ({c.stderr_tail() or 'no stderr'})"
    return ok


def _absorb(child: _Child) -> None:
    r = child.report
    if r.error:
        return
    line = child.lines[2] if len(child.lines) >= 3 else ""
    try:
        data = json.loads(line)
    except ValueError:
        r.error = f"no report ({child.stderr_tail() or 'no stderr'})"
        return
    if data.get("error"):
        r.error = str(data["error"])
        return
    r.lane, r.namespace, r.pid = data.get("lane"), data.get("namespace"), data.get("pid")
    r.writes, r.clobbers = dict(data.get("writes", {})), dict(data.get("clobbers", {}))
    r.examples = list(data.get("examples", []))


def run_drill(
    *,
    lanes: int = 4,
    seconds: float = 2.0,
    unbound: bool = False,
    checkout: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    keep: bool = False,
    on_phase: Callable[[str], None] | None = None,
) -> DrillReport:
    """Run the drill. Raises Unbound outside a checkout; everything else lands in the report."""
    if lanes < 2:
        raise LanewatchError("the drill needs at least 2 lanes to collide")
    bound: Checkout = resolve_checkout(checkout)
    work = Path(tempfile.mkdtemp(prefix="lanewatch-drill-"))
    run_id = os.urandom(3).hex()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANEWATCH_")}
    if root is None:
        root_path = work / "root"
        env["LANEWATCH_STATE_DIR"] = str(work / "state")  # the user's registry stays untouched
    else:
        root_path = Path(os.path.realpath(os.fspath(root)))
        if "LANEWATCH_STATE_DIR" in os.environ:
            env["LANEWATCH_STATE_DIR"] = os.environ["LANEWATCH_STATE_DIR"]
    shared = work / "shared" if unbound else None
    py = [sys.executable, "-m"]
    common = ["--seconds", f"{seconds:g}", "--checkout", bound.root]
    children: list[_Child] = []
    report = DrillReport(
        bound.checkout_id,
        bound.root,
        lanes,
        seconds,
        str(root_path),
        str(work),
        keep,
        str(shared) if shared else None,
        [],
        [] if unbound else None,
    )
    try:
        for i in range(lanes):
            r = LaneReport(i, "isolated", lane=f"drill-{run_id}-{i}")
            report.isolated.append(r)
            argv = [*py, "lanewatch", "run", "--lane", r.lane or "", "--root", str(root_path)]
            argv += ["--checkout", bound.root, "--", *py, "lanewatch.drill.drill", "worker"]
            argv += ["--mode", "isolated", "--index", str(i), *common]
            children.append(_Child(r, argv, env, work / f"isolated-{i}.log"))
        if shared is not None and report.unbound is not None:
            for i in range(lanes):
                r = LaneReport(i, "shared", lane=f"shared-{i}", namespace=str(shared))
                report.unbound.append(r)
                argv = [
                    *py,
                    "lanewatch.drill.drill",
                    "worker",
                    "--mode",
                    "shared",
                    "--index",
                    str(i),
                ]
                argv += ["--dir", str(shared), *common]
                children.append(_Child(r, argv, env, work / f"shared-{i}.log"))
        if on_phase:
            on_phase(f"started {len(children)} writers")
        finished = False
        if _expect(children, 1, "ready", STARTUP_TIMEOUT):
            for c in children:
                c.send("go")
            if on_phase:
                on_phase(f"writing for {seconds:g}s")
            if _expect(children, 2, "written", seconds + STARTUP_TIMEOUT):
                for c in children:
                    c.send("check")
                _await_lines(children, 3, REPORT_TIMEOUT)
                for c in children:
                    _absorb(c)
                finished = True
    finally:
        for c in children:
            c.stop()
            r = c.report
            r.exit_code = c.proc.returncode
            if not r.error and not finished:
                r.error = "stopped: the drill was aborted (see the other errors)"
            elif r.exit_code and not r.error:
                r.error = f"exited {r.exit_code} ({c.stderr_tail() or 'no stderr'})"
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    seen: dict[str, int] = {}
    for r in report.isolated:
        if r.namespace is None:
            continue
        if r.namespace in seen:
            report.shared_namespaces.append(
                f"lanes {seen[r.namespace]} and {r.index} both wrote in {r.namespace}"
            )
        seen.setdefault(r.namespace, r.index)
    return report


if __name__ == "__main__":
    sys.exit(worker_main())
