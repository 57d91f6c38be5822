"""Receipts: a durable record that a step ran in a named checkout, and how it ended.

A receipt lives at `<namespace>/receipts/<encoded step>.json` and names everything a gate needs
to tell it apart from a leftover: checkout id and canonical path, lane, git HEAD, dirty flag and
a digest of the dirt, outcome and exit code. It is sealed with this user's key (see
`proof.seal`), so a gate can tell a hand-edited or copied receipt, and written atomically
(temp file, fsync, rename); every receipt is also kept under `receipts/history/<encoded
step>/`, newest `HISTORY_KEEP` only, so an earlier one is never overwritten away. Gates never
read history.

Reading never raises and never guesses: a missing, empty, garbage, inconsistent, oversized,
symlinked or future-schema receipt each comes back as its own `ReceiptStatus`. The file and the
folders above it inside the namespace are opened without following symlinks.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from lanewatch.errors import BadLaneName, LanewatchError
from lanewatch.lanes import ledger
from lanewatch.lanes.fields import Rejected, load_versioned, strings, take
from lanewatch.lanes.fsutil import (
    UnsafePath,
    ensure_real_dir,
    open_regular,
    read_all,
    write_atomic,
)
from lanewatch.lanes.lane import (
    DEFAULT_LANE,
    ENV_LANE,
    RECEIPTS_DIR,
    Lane,
    LaneTarget,
    holding,
    locate,
)
from lanewatch.lanes.names import decode_lane, encode_lane
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.lanes.stamp import OwnerState
from lanewatch.linux.procid import hostname, user_name
from lanewatch.proof.gitstate import GitState, read_git_state
from lanewatch.proof.seal import SealKey, ensure_key, sealed

SCHEMA = 1
MAX_RECEIPT_BYTES = 1024 * 1024
HISTORY_DIR = "history"
HISTORY_KEEP = 20
SUFFIX = ".json"
HEAD_MOVED_DURING = "HEAD moved"  # how `changed_during_run` starts when HEAD itself moved
_COMMIT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DIGEST_RE = re.compile(r"[0-9a-f]{64}")


class BadStep(BadLaneName):
    """A step name that cannot name a receipt file (a usage error, as a bad lane name is)."""


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"


def encode_step(step: str) -> str:
    """The receipt file stem for `step`: the lane-name encoding, injective and reversible.

    A leading `.` is encoded too, so a receipt is never a hidden file.
    """
    try:
        encoded = encode_lane(step)
    except LanewatchError as exc:
        raise BadStep(str(exc).replace("lane name", "step name")) from exc
    return "~2E" + encoded[1:] if encoded.startswith(".") else encoded


def decode_step(stem: str) -> str:
    """Inverse of encode_step; ValueError on a stem it did not make."""
    step = decode_lane("." + stem[3:] if stem.startswith("~2E") else stem)
    if encode_step(step) != stem:
        raise ValueError(f"not the canonical encoding of a step name: {stem!r}")
    return step


@dataclass(frozen=True, slots=True)
class Receipt:
    step: str
    outcome: Outcome
    exit_code: int
    checkout_id: str
    checkout_path: str
    lane: str
    namespace: str  # the namespace folder's name: "<checkout id>.<encoded lane>"
    git_head: str | None  # None: HEAD could not be read (see git_error); a gate refuses it
    git_error: str | None
    dirty: bool | None
    dirty_digest: str | None  # sha256 over tracked changes + untracked names/contents
    changed_during_run: str | None  # set when HEAD or the tree differed at the end of the run
    pid: int
    host: str
    user: str
    started_at: float
    finished_at: float
    command: tuple[str, ...]
    schema: int = SCHEMA
    # The writer's scheme (lanes/scheme.py), sealed with the rest. None: the receipt names none
    # (an older lanewatch: `scheme.stated` reads it as 1); not an int: garbage, as any field.
    scheme: int | None = SCHEME_VERSION

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["command"] = list(self.command)
        return data


class ReceiptStatus(StrEnum):
    OK = "ok"
    MISSING = "missing"
    EMPTY = "empty"
    GARBAGE = "garbage"  # not JSON, partial, wrong shape, or fields that contradict each other
    OVERSIZED = "oversized"
    FUTURE_SCHEMA = "future-schema"
    SYMLINK = "symlink"  # the file or a folder above it is a symlink, or not a regular file
    UNREADABLE = "unreadable"  # permission or I/O error: we cannot tell


@dataclass(frozen=True, slots=True)
class ReceiptRead:
    status: ReceiptStatus
    receipt: Receipt | None = None
    detail: str = ""
    raw: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.status is ReceiptStatus.OK


_STR = (str,)
_OPT_STR = (str, type(None))
_NUM = (int, float)
_REQUIRED: dict[str, tuple[type, ...]] = {
    "step": _STR,
    "outcome": _STR,
    "exit_code": (int,),
    "checkout_id": _STR,
    "checkout_path": _STR,
    "lane": _STR,
    "namespace": _STR,
    "git_head": _OPT_STR,
    "git_error": _OPT_STR,
    "dirty": (bool, type(None)),
    "dirty_digest": _OPT_STR,
    "changed_during_run": _OPT_STR,
    "pid": (int,),
    "host": _STR,
    "user": _STR,
    "started_at": _NUM,
    "finished_at": _NUM,
    "command": (list,),
}


def _garbage(detail: str, raw: dict[str, Any] | None = None) -> ReceiptRead:
    return ReceiptRead(ReceiptStatus.GARBAGE, detail=detail, raw=raw)


def _contradiction(v: dict[str, Any]) -> str | None:
    """Fields that cannot all be true at once make the whole receipt unreadable."""
    try:
        outcome = Outcome(v["outcome"])
    except ValueError:
        return f"unknown outcome {v['outcome']!r}"
    if (outcome is Outcome.PASS) != (v["exit_code"] == 0):
        return f"outcome {outcome.value!r} contradicts exit code {v['exit_code']}"
    if not strings(v["command"]):
        return "field 'command' is not a list of strings"
    if v["pid"] <= 0 or v["finished_at"] < v["started_at"]:
        return "pid or times out of range"
    head, dirty, digest = v["git_head"], v["dirty"], v["dirty_digest"]
    if head is None:
        if not v["git_error"] or dirty is not None or digest is not None:
            return "no HEAD, but no git error either"
        return None
    if not _COMMIT_RE.fullmatch(head):
        return "git_head is not a commit id"
    if dirty is None or (dirty and not (digest and _DIGEST_RE.fullmatch(digest))):
        return "dirty flag and digest do not agree"
    if not dirty and digest is not None:
        return "a clean tree with a dirt digest"
    return None


def parse_receipt(data: bytes) -> ReceiptRead:
    """Turn receipt bytes into a typed result. Pure: never raises."""
    obj = load_versioned(
        data, limit=MAX_RECEIPT_BYTES, schema=SCHEMA, no_schema="no schema version"
    )
    if isinstance(obj, Rejected):
        return ReceiptRead(ReceiptStatus(obj.kind), detail=obj.detail, raw=obj.raw)
    values = take(
        obj,
        _REQUIRED,
        wrong="field {name!r} missing or of the wrong type",
        not_finite="field {name!r} is not a finite number",  # a NaN finish has no age
    )
    if isinstance(values, str):
        return _garbage(values, obj)
    scheme = obj.get("scheme")
    if scheme is not None and type(scheme) is not int:
        return _garbage("field 'scheme' is of the wrong type", obj)
    problem = _contradiction(values)
    if problem:
        return _garbage(problem, obj)
    values["outcome"] = Outcome(values["outcome"])
    values["command"] = tuple(values["command"])
    values["started_at"] = float(values["started_at"])
    values["finished_at"] = float(values["finished_at"])
    receipt = Receipt(**values, schema=obj["schema"], scheme=scheme)
    return ReceiptRead(ReceiptStatus.OK, receipt, raw=obj)


def receipt_path(namespace: Path, step: str) -> Path:
    return namespace / RECEIPTS_DIR / f"{encode_step(step)}{SUFFIX}"


def history_dir(namespace: Path, step: str) -> Path:
    return namespace / RECEIPTS_DIR / HISTORY_DIR / encode_step(step)


def _read_below(namespace: Path, parts: Sequence[str]) -> bytes:
    """Read `namespace/parts...` without following a symlink at any level below `namespace`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(namespace, flags | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        file_fd = open_regular(parts[-1], os.O_RDONLY, dir_fd=fd)  # NotAFile: a FIFO...
    finally:
        os.close(fd)
    return read_all(file_fd, MAX_RECEIPT_BYTES)[0]


def read_receipt(namespace: Path, step: str) -> ReceiptRead:
    """The receipt of `step` in `namespace`, as a typed result. Never raises."""
    try:
        name = f"{encode_step(step)}{SUFFIX}"
    except BadStep as exc:
        return ReceiptRead(ReceiptStatus.UNREADABLE, detail=str(exc))
    try:
        data = _read_below(namespace, [RECEIPTS_DIR, name])
    except FileNotFoundError:
        return ReceiptRead(ReceiptStatus.MISSING, detail="no receipt")
    except UnsafePath as exc:
        return ReceiptRead(ReceiptStatus.SYMLINK, detail=str(exc))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW met a symlink
            return ReceiptRead(
                ReceiptStatus.SYMLINK, detail="the receipt or its folder is a symlink"
            )
        return ReceiptRead(
            ReceiptStatus.UNREADABLE, detail=f"{exc.strerror} reading {namespace / RECEIPTS_DIR}"
        )
    return parse_receipt(data)


def store_receipt(namespace: Path, receipt: Receipt, key: SealKey | None = None) -> Path:
    """Seal `receipt` with `key` (default: this user's, made if missing), write it into
    `namespace` atomically and keep it in the step's history.

    The caller must be entitled to write there (see `write_receipt`). BadSealKey, before
    anything is written, when the key cannot be trusted.
    """
    fields = sealed(receipt.to_json(), key or ensure_key())
    folder = ensure_real_dir(namespace / RECEIPTS_DIR)
    path = folder / f"{encode_step(receipt.step)}{SUFFIX}"
    data = json.dumps(fields, indent=2, sort_keys=True).encode() + b"\n"
    write_atomic(path, data)
    history = ensure_real_dir(ensure_real_dir(folder / HISTORY_DIR) / encode_step(receipt.step))
    stamp = f"{int(receipt.finished_at * 1_000_000):020d}-{receipt.pid}-{os.urandom(3).hex()}"
    write_atomic(history / f"{stamp}{SUFFIX}", data)
    _prune(history)
    return path


def _prune(history: Path) -> None:
    kept = sorted(
        entry.name
        for entry in os.scandir(history)
        if entry.name.endswith(SUFFIX) and not entry.name.startswith(".")
    )
    for name in kept[:-HISTORY_KEEP]:
        with contextlib.suppress(FileNotFoundError):  # a concurrent writer pruned it first
            os.unlink(history / name)


def history(namespace: Path, step: str) -> list[ReceiptRead]:
    """Earlier receipts of `step`, oldest first (for people and the dashboard, never a gate)."""
    folder = history_dir(namespace, step)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(SUFFIX))
    except OSError:
        return []
    reads: list[ReceiptRead] = []
    for name in names:
        try:
            data = _read_below(namespace, [RECEIPTS_DIR, HISTORY_DIR, folder.name, name])
        except (OSError, UnsafePath) as exc:
            reads.append(ReceiptRead(ReceiptStatus.UNREADABLE, detail=str(exc)))
            continue
        reads.append(parse_receipt(data))
    return reads


def make_receipt(
    step: str,
    target: LaneTarget,
    *,
    exit_code: int,
    command: Sequence[str],
    started_at: float,
    finished_at: float,
    git: GitState,
    git_after: GitState | None = None,
) -> Receipt:
    """Build the receipt of a run. `git` is the state the run started from; `git_after`, when
    given, the state at its end: a difference is recorded, and a gate refuses it."""
    encode_step(step)
    changed: str | None = None
    if git_after is not None and git.known:
        if git_after.head != git.head:
            after = git_after.head[:12] if git_after.head else "unknown"
            changed = f"{HEAD_MOVED_DURING} from {git.head[:12]} to {after} during the run"  # type: ignore[index]
        elif (git_after.dirty, git_after.digest) != (git.dirty, git.digest):
            changed = "the working tree changed during the run"
    return Receipt(
        step=step,
        outcome=Outcome.PASS if exit_code == 0 else Outcome.FAIL,
        exit_code=exit_code,
        checkout_id=target.checkout.checkout_id,
        checkout_path=target.checkout.root,
        lane=target.lane,
        namespace=target.namespace.name,
        git_head=git.head,
        git_error=None if git.known else (git.error or "git state unknown"),
        dirty=git.dirty if git.known else None,
        dirty_digest=git.digest if git.known else None,
        changed_during_run=changed,
        pid=os.getpid(),
        host=hostname(),
        user=user_name(),
        started_at=started_at,
        finished_at=max(finished_at, started_at),
        command=tuple(command),
    )


def state_of(target: LaneTarget) -> GitState:
    """The checkout's git state, leaving out the scratch root when it lies inside it."""
    return read_git_state(target.checkout.root, exclude=[target.root])


@dataclass(frozen=True, slots=True)
class WrittenReceipt:
    receipt: Receipt
    path: Path


def record(target: LaneTarget, receipt: Receipt, key: SealKey | None = None) -> Path:
    """Store `receipt` in `target`'s namespace, sealed with `key` (see `store_receipt`), and
    note it in the ledger (a diary line only)."""
    path = store_receipt(target.namespace, receipt, key)
    ledger.append(
        target.namespace,
        "receipt-written",
        lane=target.lane,
        step=receipt.step,
        outcome=receipt.outcome.value,
        exit_code=receipt.exit_code,
        git_head=receipt.git_head,
    )
    return path


@dataclass(frozen=True, slots=True)
class StepRun:
    """What ran as a step and how it ended: a receipt's facts apart from checkout and git."""

    step: str
    command: Sequence[str]
    exit_code: int
    started_at: float
    finished_at: float


def write_run(
    target: LaneTarget,
    run: StepRun,
    *,
    git: GitState,
    git_after: GitState | None = None,
    key: SealKey | None = None,
) -> WrittenReceipt:
    """Build the receipt of `run` (see `make_receipt`) and `record` it, sealed with `key`
    (default: this user's): how every writer (`write_receipt`, `lanewatch prove`) does it.
    The caller must be entitled to write."""
    receipt = make_receipt(
        run.step,
        target,
        exit_code=run.exit_code,
        command=run.command,
        started_at=run.started_at,
        finished_at=run.finished_at,
        git=git,
        git_after=git_after,
    )
    return WrittenReceipt(receipt, record(target, receipt, key))


def write_receipt(
    step: str,
    *,
    exit_code: int,
    command: Sequence[str],
    started_at: float,
    finished_at: float | None = None,
    lane: str | Lane | None = None,
    root: str | os.PathLike[str] | None = None,
    checkout: str | os.PathLike[str] | None = None,
    git: GitState | None = None,
) -> WrittenReceipt:
    """Record that `command` ran as `step` in this checkout and exited with `exit_code`.

    `lane` is a lane name (default `$LANEWATCH_LANE`, else "default") or a `Lane` this process
    has claimed. By name, the receipt goes into that lane's namespace: inside the owning
    `lanewatch run` directly, otherwise the lane is claimed for the write (ClaimRefused if
    another live owner has it). `git` defaults to the checkout's state now. Raises Unbound
    outside a checkout and BadStep for a step that cannot name a file.
    """
    encode_step(step)
    finished = time.time() if finished_at is None else finished_at
    entitled: contextlib.AbstractContextManager[object]
    if isinstance(lane, Lane):
        if lane.stamp.state is not OwnerState.LIVE:
            raise LanewatchError(f"lane {lane.name!r} is released; claim it to write a receipt")
        target = lane.target
        entitled = contextlib.nullcontext()  # this process holds the lane
    else:
        name = lane if lane is not None else os.environ.get(ENV_LANE) or DEFAULT_LANE
        target = locate(name, root=root, checkout=checkout)
        entitled = holding(target)
    state = git if git is not None else state_of(target)
    run = StepRun(step, command, exit_code, started_at, finished)
    with entitled:
        return write_run(target, run, git=state)
