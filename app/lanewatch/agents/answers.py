"""The MCP tools' answers, as small JSON-ready dicts (agents/mcp_server.py serves them).

Every string that came from disk or another process is made inert (`lanewatch.inert`): an
agent reads these answers as text, and a file name or a command can carry anything.
Failures the caller can act on are `AgentError`s, with one line saying what to do.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lanewatch.agents.me import Me, who_am_i
from lanewatch.agents.whosepath import judge, known_roots
from lanewatch.errors import LanewatchError
from lanewatch.inert import inert
from lanewatch.lanes.fsutil import UnsafePath
from lanewatch.lanes.lane import TMP_DIR

MAX_WRITES = 50  # versions of a path shown by who_wrote (the newest)
MAX_INCIDENTS = 50
NOT_IN_A_LANE = (
    "you are in no lane: start the agent with `lanewatch run --lane NAME -- CMD` (docs/agents.md)"
)


class AgentError(LanewatchError):
    """A tool cannot answer; the message says why and what to do."""


def _me(me: Me | None) -> Me:
    return who_am_i() if me is None else me


def _bound(me: Me) -> Me:
    if not me.bound:
        raise AgentError(NOT_IN_A_LANE)
    return me


def whoami(me: Me | None = None) -> dict[str, Any]:
    """The asking lane: its name, checkout, namespace, private /tmp and whether it is live."""
    me = _me(me)
    if not me.bound:
        return {"lane": None, "bound": False, "fix": NOT_IN_A_LANE}
    from lanewatch.lanes.stamp import OwnerState, read_stamp
    from lanewatch.linux.procid import Liveness, ProcessIdentity, liveness

    assert me.namespace is not None
    read = read_stamp(Path(me.namespace))
    stamp = read.stamp
    state = "unknown"
    if stamp is not None:
        alive, _ = liveness(ProcessIdentity(stamp.pid, stamp.start_ticks, stamp.boot_id))
        running = alive in (Liveness.ALIVE, Liveness.STOPPED)
        # A stamp that says live is so while its owner runs.
        released = stamp.state is OwnerState.RELEASED
        state = "released" if released else "live" if running else "stale"
    tmp = os.path.join(me.namespace, TMP_DIR)
    return {
        "lane": inert(me.lane),
        "bound": True,
        "state": state,
        "checkout": inert(me.checkout or (stamp.checkout_path if stamp else "")),
        "checkout_id": inert(stamp.checkout_id) if stamp else None,
        "namespace": inert(me.namespace),
        "root": inert(me.root or os.path.dirname(me.namespace)),
        "tmp": inert(tmp),
        "private_tmp": me.private_tmp,
        "fence": me.fence,
        "tmp_note": (
            f"/tmp and /var/tmp are this lane's own ({tmp})"
            if me.private_tmp
            else f"unfenced: /tmp is shared; write temporary files under $TMPDIR ({tmp})"
        ),
        "pid": stamp.pid if stamp else None,
        "started_at": stamp.started_at if stamp else None,
        "found_in": me.found_in,
    }


def is_path_mine(path: str, me: Me | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Whose `path` is: mine, another lane's (named), shared, unbound or outside; with the fix."""
    if not path or "\0" in path:
        raise AgentError("give a path (absolute, or relative to the server's folder)")
    verdict = judge(path, _me(me), cwd=cwd)
    return {k: inert(v) if isinstance(v, str) else v for k, v in verdict.to_json().items()}


def _roots(me: Me) -> list[str]:
    return known_roots(me)


def who_wrote(path: str, me: Me | None = None, cwd: str | None = None) -> dict[str, Any]:
    """Every recorded write of `path`, oldest first: when, which lane (and how that is known),
    size and sha256, and what it held: the first text version whole, then each change as a
    unified diff (the same story an incident report tells, `records/report.py`)."""
    from lanewatch.agents.whosepath import canonical
    from lanewatch.records.report import Version, entry_writer, file_story, utc
    from lanewatch.records.writes import HELD_READ, history

    if not path or "\0" in path:
        raise AgentError("give a path (absolute, or relative to the server's folder)")
    me = _me(me)
    target = canonical(path, cwd)
    roots = _roots(me)
    found = history(roots, target)[-MAX_WRITES:]
    if not found:
        return {
            "path": inert(target),
            "writes": [],
            "note": "no recorded write of this path: writes are recorded while a recorder runs "
            "(`lanewatch record`, the service, or a dashboard; as root, by the kernel)",
        }
    versions = []
    for e in found:
        grade = "inferred" if e.how == HELD_READ else "known" if e.identified else ""
        versions.append(Version(e.time, e.sha256, e.size, entry_writer(e), e.event, grade))
    story = file_story(roots, target, versions)
    writes = []
    for e, shown in zip(found, story.shown, strict=True):
        writes.append(
            {
                "time": utc(e.time),
                "lane": inert(e.lane) if e.lane else None,
                "held_by": [inert(h) for h in e.held_by],
                "pid": e.pid,
                "writer": shown.version.writer,
                "grade": shown.version.grade or "unidentified",
                "size": e.size,
                "sha256": e.sha256,
                "shown": shown.kind,  # content | diff | same | binary | not-kept | not-hashed
                "lines": list(shown.lines),
                "more_lines": shown.more,
            }
        )
    lanes = sorted({w["lane"] for w in writes if w["lane"]})
    return {"path": inert(target), "lanes": lanes, "writes": writes}


def _involves(record: Any, me: Me) -> bool:
    ns = me.namespace
    if record.victim and os.path.realpath(record.victim) == ns:
        return True
    intruder = dict(record.intruder)
    if intruder.get("namespace") and os.path.realpath(str(intruder["namespace"])) == ns:
        return True
    for w in record.writers:
        if w.get("namespace") and os.path.realpath(str(w["namespace"])) == ns:
            return True
    return False


def my_collisions(me: Me | None = None) -> dict[str, Any]:
    """The open incidents (not acknowledged, or reopened) in which my lane is the victim or a
    writer, as the recorders wrote them in the roots' incident logs."""
    from lanewatch.records.incident_log import read_all
    from lanewatch.records.report import utc

    me = _bound(_me(me))
    records = read_all(_roots(me))
    mine = [r.to_view() for r in records.values() if _involves(r, me)]
    open_ = sorted((i for i in mine if not i.acknowledged), key=lambda i: i.last_seen)
    out = []
    for i in open_[-MAX_INCIDENTS:]:
        victim = os.path.realpath(i.victim) if i.victim else None
        out.append(
            {
                "id": i.id,
                "kind": i.kind,
                "summary": inert(i.summary),
                "my_role": "victim" if victim == me.namespace else "writer",
                "victim": inert(i.victim) if i.victim else None,
                "path": inert(i.path) if i.path else None,
                "writers": sorted({inert(w.get("lane") or "no lane") for w in i.writers}),
                "count": i.count,
                "grade": i.grade,
                "reopened": i.reopened,
                "first_seen": utc(i.first_seen),
                "last_seen": utc(i.last_seen),
            }
        )
    note = "" if out else "no open incident involves your lane (recorded while a recorder runs)"
    return {"lane": inert(me.lane), "open": out, **({"note": note} if note else {})}


def _checkout_id(me: Me) -> str:
    from lanewatch.lanes.names import split_namespace_name

    assert me.namespace is not None
    split = split_namespace_name(os.path.basename(me.namespace))
    if split is None:
        raise AgentError(f"your namespace {me.namespace} is not one the scheme named")
    return split[0]


def release_stale(confirm: bool = False, me: Me | None = None) -> dict[str, Any]:
    """Move the stale namespaces of my checkout (stale, orphan or released: nobody runs in
    them) into their root's trash, restorable (`lanewatch restore`). Without `confirm` it only
    says what it would move. Each is checked in full at the moment it is moved, as `lanewatch
    clear` checks it; a live or hung lane is never moved."""
    from lanewatch.actions.assess import Seen, assess
    from lanewatch.actions.clear import clear_target
    from lanewatch.actions.targets import namespaces
    from lanewatch.model.views import STALE_STATES

    me = _bound(_me(me))
    prefix = _checkout_id(me) + "."
    roots: Sequence[Path] = [Path(r) for r in _roots(me)]
    chosen = [
        t
        for t in namespaces(list(roots))
        if t.name.startswith(prefix) and str(t.path) != me.namespace
    ]
    seen = [a for a in (assess(t) for t in chosen) if a.state in STALE_STATES]
    results: list[dict[str, str | None]] = []
    for a in seen:
        try:
            r = clear_target(a.target, dry_run=not confirm, seen=Seen.of(a.stamp))
        except (UnsafePath, OSError) as exc:
            results.append(
                {"namespace": inert(a.target.path), "outcome": "refused", "why": inert(exc)}
            )
            continue
        results.append(
            {
                "namespace": inert(r.target),
                "lane": inert(a.target.lane) if a.target.lane else None,
                "state": a.state.value,
                "outcome": r.outcome,
                "message": inert(r.message),
                "trash_id": r.trash_id,
            }
        )
    out: dict[str, Any] = {"confirmed": confirm, "results": results}
    if not confirm and results:
        out["note"] = "nothing was moved: call again with confirm=true to move these to the trash"
    if not results:
        out["note"] = "no stale namespace of your checkout"
    return out
