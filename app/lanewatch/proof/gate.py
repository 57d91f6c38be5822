"""The gate: pass only on this checkout's own, current, successful receipt. Fail closed.

`check_gate` reads exactly one file: `<namespace of (this checkout, lane)>/receipts/<step>.json`.
Never the ledger, never the receipt history, never another lane, checkout or root, never a
shared fallback. Whatever it cannot parse, or cannot compare, is a refusal with its own reason
and exit code. It creates nothing and claims nothing.

Checks, in order (the first that fails is the reason):

| reason        | exit | when                                                                |
|---------------|------|---------------------------------------------------------------------|
| pass          | 0    | every check below held                                              |
| unbound       | 6    | no checkout binds this place, or the lane/step cannot name a path   |
| missing       | 10   | no receipt for this step in this checkout's lane                    |
| unreadable    | 16   | the receipt is empty, garbage, contradictory, oversized, a symlink, |
|               |      | of a newer schema, or cannot be read                                |
| bad-seal      | 19   | the receipt's seal is missing or does not match this user's key, or |
|               |      | the key cannot be trusted (see proof.seal)                         |
| foreign       | 11   | the receipt names another checkout, lane or step                    |
| failed        | 14   | the step's last run failed (non-zero exit)                          |
| head-unknown  | 18   | the receipt, or this checkout, has no readable HEAD                 |
| head-moved    | 12   | HEAD is not the proven commit, or moved while the step ran, or     |
|               |      | (with `pushed`) a pushed commit is not it                          |
| tree-changed  | 13   | the dirty digest differs from the receipt's, or the tree changed    |
|               |      | while the step ran (ignored with allow_dirty)                       |
| too-old       | 15   | the receipt is older than max_age, or dated more than FUTURE_SKEW   |
|               |      | ahead of our clock (with or without max_age)                        |

Codes 10-19 keep clear of 1 (a crash) and 2 (a usage error).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes.lane import DEFAULT_LANE, ENV_LANE, LaneTarget, locate
from lanewatch.proof.gitstate import GitFailed, GitState, run_git
from lanewatch.proof.receipts import (
    HEAD_MOVED_DURING,
    Receipt,
    ReceiptRead,
    ReceiptStatus,
    read_receipt,
    receipt_path,
    state_of,
)
from lanewatch.proof.seal import BadSealKey, load_key, seal_problem

FUTURE_SKEW = 5.0  # seconds a receipt may be dated ahead of our clock before it is refused
_ZERO_SHA = re.compile(r"0+")
_OBJECT_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_REF_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./@{}~^-]*")  # HEAD, main, origin/main, HEAD~1


class GateReason(StrEnum):
    PASS = "pass"
    MISSING = "missing"
    FOREIGN = "foreign"
    HEAD_MOVED = "head-moved"
    TREE_CHANGED = "tree-changed"
    FAILED = "failed"
    TOO_OLD = "too-old"
    UNREADABLE = "unreadable"
    UNBOUND = "unbound"
    HEAD_UNKNOWN = "head-unknown"
    BAD_SEAL = "bad-seal"


EXIT_CODES: dict[GateReason, int] = {
    GateReason.PASS: 0,
    GateReason.MISSING: 10,
    GateReason.FOREIGN: 11,
    GateReason.HEAD_MOVED: 12,
    GateReason.TREE_CHANGED: 13,
    GateReason.FAILED: 14,
    GateReason.TOO_OLD: 15,
    GateReason.UNREADABLE: 16,
    GateReason.UNBOUND: 6,  # the code every command uses for unbound (cli/exits.py); was 17
    GateReason.HEAD_UNKNOWN: 18,
    GateReason.BAD_SEAL: 19,
}


@dataclass(frozen=True, slots=True)
class GateResult:
    reason: GateReason
    message: str  # one line that says exactly why
    step: str
    lane: str
    checkout_id: str | None = None
    checkout_path: str | None = None
    path: Path | None = None  # the one receipt path the gate read
    receipt: Receipt | None = None
    head: str | None = None  # this checkout's HEAD when it was read
    age: float | None = None

    @property
    def ok(self) -> bool:
        return self.reason is GateReason.PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "reason": self.reason.value,
            "exit_code": self.exit_code,
            "message": self.message,
            "step": self.step,
            "lane": self.lane,
            "checkout_id": self.checkout_id,
            "checkout_path": self.checkout_path,
            "receipt_path": str(self.path) if self.path else None,
            "head": self.head,
            "age": self.age,
            "receipt": self.receipt.to_json() if self.receipt else None,
        }


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> float:
    """Seconds in `90`, `90s`, `10m`, `1h30m`, `2d`; ValueError otherwise."""
    s = text.strip().lower()
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        if value < 0 or value != value:
            raise ValueError(f"not a duration: {text!r}")
        return value
    if not s or "".join(m.group(0) for m in _DURATION_RE.finditer(s)) != s:
        raise ValueError(f"not a duration: {text!r} (try 90s, 10m, 1h30m, 2d)")
    return sum(float(n) * _UNITS[unit] for n, unit in _DURATION_RE.findall(s))


def format_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _foreign(receipt: Receipt, target: LaneTarget, step: str) -> str | None:
    mine = target.checkout
    if receipt.checkout_id != mine.checkout_id or receipt.checkout_path != mine.root:
        return (
            f"the receipt names checkout {receipt.checkout_id} ({receipt.checkout_path}), "
            f"not this one, {mine.checkout_id} ({mine.root})"
        )
    if receipt.lane != target.lane or receipt.namespace != target.namespace.name:
        return f"the receipt names lane {receipt.lane!r}, not {target.lane!r}"
    if receipt.step != step:
        return f"the receipt is for step {receipt.step!r}, not {step!r}"
    return None


def _seal(read: ReceiptRead) -> str | None:
    """Why the receipt as read does not carry this user's seal; None if it does.
    The gate only reads the key: it never makes one."""
    try:
        key = load_key()
    except BadSealKey as exc:
        return f"the receipt's seal cannot be checked: {exc}"
    problem = seal_problem(read.raw or {}, key)
    return f"{problem}; prove again" if problem else None


def check_gate(
    step: str,
    *,
    lane: str | None = None,
    checkout: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    allow_dirty: bool = False,
    max_age: float | None = None,
    pushed: Sequence[str] | None = None,
    now: float | None = None,
) -> GateResult:
    """Whether this checkout's receipt for `step` lets work through. Never raises.

    `lane` defaults to `$LANEWATCH_LANE`, else "default"; `checkout` to `$LANEWATCH_CHECKOUT`,
    else the current directory; `root` to `$LANEWATCH_ROOT`, else the state dir's root.
    `pushed`: commit ids about to be pushed (git's pre-push input); each must be the proven HEAD.
    """
    name = lane if lane is not None else os.environ.get(ENV_LANE) or DEFAULT_LANE
    try:
        target = locate(name, root=root, checkout=checkout)
        path = receipt_path(target.namespace, step)
    except LanewatchError as exc:
        return GateResult(GateReason.UNBOUND, str(exc), step, name)

    def result(reason: GateReason, message: str, **extra: Any) -> GateResult:
        return GateResult(
            reason,
            message,
            step,
            name,
            target.checkout.checkout_id,
            target.checkout.root,
            path,
            **extra,
        )

    read = read_receipt(target.namespace, step)
    if read.status is ReceiptStatus.MISSING:
        return result(
            GateReason.MISSING,
            f"no receipt for step {step!r} in lane {name!r} of this checkout ({path}); "
            f"run `lanewatch prove {step} -- CMD` here",
        )
    receipt = read.receipt
    if receipt is None:
        return result(
            GateReason.UNREADABLE, f"the receipt at {path} is {read.status.value}: {read.detail}"
        )
    broken = _seal(read)
    if broken:
        return result(GateReason.BAD_SEAL, broken, receipt=receipt)
    foreign = _foreign(receipt, target, step)
    if foreign:
        return result(GateReason.FOREIGN, f"{foreign}; a gate only trusts its own", receipt=receipt)
    if not receipt.passed:
        return result(
            GateReason.FAILED,
            f"the last run of {step!r} failed with exit code {receipt.exit_code} "
            f"({format_duration(time.time() - receipt.finished_at)} ago)",
            receipt=receipt,
        )
    if receipt.git_head is None:
        return result(
            GateReason.HEAD_UNKNOWN,
            f"the receipt has no HEAD: {receipt.git_error}",
            receipt=receipt,
        )
    current: GitState = state_of(target)
    if current.head is None:
        return result(
            GateReason.HEAD_UNKNOWN,
            f"this checkout's HEAD cannot be read: {current.error}",
            receipt=receipt,
        )
    if current.head != receipt.git_head:
        return result(
            GateReason.HEAD_MOVED,
            f"the receipt proved HEAD {receipt.git_head[:12]}, but HEAD is now "
            f"{current.head[:12]}; prove again",
            receipt=receipt,
            head=current.head,
        )
    moved = receipt.changed_during_run or ""
    if moved.startswith(HEAD_MOVED_DURING):  # even with allow_dirty: which commit was tested?
        return result(
            GateReason.HEAD_MOVED,
            f"{moved}, so the receipt proves no one commit",
            receipt=receipt,
            head=current.head,
        )
    for commit in pushed or ():
        if _ZERO_SHA.fullmatch(commit) or commit == receipt.git_head:
            continue  # a deletion, or the proven commit itself
        if _peel(target.checkout.root, commit) != receipt.git_head:
            return result(
                GateReason.HEAD_MOVED,
                f"the push sends {commit[:12]}, but the receipt proved HEAD "
                f"{receipt.git_head[:12]}",
                receipt=receipt,
                head=current.head,
            )
    if not allow_dirty:
        if receipt.changed_during_run:
            return result(
                GateReason.TREE_CHANGED,
                f"{receipt.changed_during_run}, so the receipt proves no one state",
                receipt=receipt,
                head=current.head,
            )
        if (current.dirty, current.digest) != (receipt.dirty, receipt.dirty_digest):
            return result(
                GateReason.TREE_CHANGED,
                f"the working tree is {_tree(current.dirty, current.digest)} but the receipt "
                f"proved it {_tree(receipt.dirty, receipt.dirty_digest)}; prove again",
                receipt=receipt,
                head=current.head,
            )
    t = time.time() if now is None else now
    age = t - receipt.finished_at
    if age < -FUTURE_SKEW:  # whatever max_age says: a receipt from the future proves nothing
        return result(
            GateReason.TOO_OLD,
            f"the receipt is dated {format_duration(-age)} in the future, more than the "
            f"{FUTURE_SKEW:g}s a clock may be off: its age is unknown",
            receipt=receipt,
            head=current.head,
        )
    if max_age is not None and age > max_age:
        return result(
            GateReason.TOO_OLD,
            f"the receipt is {format_duration(age)} old, older than {format_duration(max_age)}",
            receipt=receipt,
            head=current.head,
            age=age,
        )
    tree = "" if not receipt.dirty else f", dirty tree {receipt.dirty_digest[:12]}"  # type: ignore[index]
    return result(
        GateReason.PASS,
        f"{step!r} passed at HEAD {receipt.git_head[:12]}{tree} in {target.checkout.checkout_id}"
        f" (lane {name!r}), {format_duration(age)} ago",
        receipt=receipt,
        head=current.head,
        age=age,
    )


def _peel(worktree: str, object_id: str) -> str | None:
    """The commit an object id (an annotated tag's, say) or a ref name (`pre-commit run
    --to-ref main`) points at; None if it is none. Never an option: nothing starting with '-'."""
    if not (_OBJECT_RE.fullmatch(object_id) or _REF_RE.fullmatch(object_id)):
        return None
    try:
        out = run_git(worktree, "rev-parse", "--verify", "--quiet", f"{object_id}^{{commit}}")
    except GitFailed:
        return None
    return out.decode("ascii", "replace").strip()


def _tree(dirty: bool | None, digest: str | None) -> str:
    if dirty is None:
        return "unknown"
    return f"dirty ({digest[:12]})" if dirty and digest else "clean"
