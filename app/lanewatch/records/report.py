"""One incident's report: what the timeline shows, what the dashboard exports and what
`lanewatch incidents ID --markdown` / `--json` print, built and rendered in one place.

Built once (blocking reads: the victim's stamp and ledger, the roots' write history and
evidence store), then rendered as Markdown or JSON. The same incident on the same disk gives
the same bytes from the dashboard and from the CLI: nothing in it depends on who asks or when
(no "exported at" line). The format (docs/keys.md, "Incident reports"): times in UTC ISO 8601
with milliseconds, sha256 in full, writers as "lane L, pid N: command".

"What each writer wrote": for every path of the evidence, the versions recorded around the
incident (the write history, and the evidence itself), oldest first with their writers; the
first text version is shown whole and each later one as a unified diff from the one before,
from the evidence store. Binary or large contents are named by size and sha256, never shown.
Every string from disk is untrusted: made inert here, and never parsed as markup by a caller.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.inert import inert, inert_lines
from lanewatch.lanes import ledger
from lanewatch.lanes.fsutil import open_regular
from lanewatch.lanes.ledger import LedgerLine
from lanewatch.lanes.names import split_namespace_name
from lanewatch.lanes.stamp import StampRead, read_stamp
from lanewatch.model import units
from lanewatch.model.kinds import severity_of
from lanewatch.model.views import Incident
from lanewatch.records import evidence, writes

SCHEMA = "lanewatch.incident/1"  # cli/reports.py names every report; schemas/incident.json
AROUND = 600.0  # seconds of write history before the first and after the last observation
LEDGER_WINDOW = 120.0  # seconds of ledger either side of the incident
LEDGER_MAX = 40
MAX_PATHS = 10
MAX_VERSIONS = 20
MAX_LINES = 200  # of a shown content or diff
SAME_WRITE = 5.0  # seconds between two records of one content that are one write
FORMATS = ("md", "json")


def utc(t: float | None) -> str:
    """The one time format of reports: UTC ISO 8601 with milliseconds."""
    if t is None:
        return "-"
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return f"{whole}.{int((t % 1) * 1000):03d}Z"


def ack_state(inc: Incident) -> str:
    """no; yes, when and by whom; reopened by newer evidence; or resolved by lanewatch, why."""
    if inc.ack_at is None:
        return "no"
    when = f"{utc(inc.ack_at)} by {inc.ack_by or '?'}"
    if inc.resolved:
        return f"resolved {when}: {inc.ack_note}"
    if inc.acknowledged:
        return f"yes, {when}"
    return f"reopened: new evidence after the acknowledgement of {when}"


def who(person: Mapping[str, Any] | None, limit: int | None = None) -> str:
    """A writer or an intruder for people: "lane L, pid N on HOST, gone since T: command"
    (inert; "gone since" once its processes exited); the command cut to `limit` characters if
    given (one line of a narrow screen)."""
    if not person:
        return "unknown"
    parts = [f"lane {person['lane']}" if person.get("lane") else "no lane"]
    if person.get("pid"):
        host = f" on {person['host']}" if person.get("host") else ""
        parts.append(f"pid {person['pid']}{host}")
    gone = person.get("gone_at")
    if isinstance(gone, int | float) and not isinstance(gone, bool):
        parts.append(f"gone since {utc(gone)}")
    text = ", ".join(parts)
    command = person.get("command")
    if isinstance(command, list | tuple):
        # Cut short, absolute paths show their last part: "python3 writer.py --hold x.log".
        args = [str(a) for a in command]
        if limit is not None:
            args = [a.rsplit("/", 1)[-1] if a.startswith("/") else a for a in args]
        command = " ".join(args)
    if isinstance(command, str) and command:
        if limit is not None and len(command) > limit:
            command = command[: max(1, limit - 1)] + "…"
        text += ": " + command
    return inert(text)


def entry_writer(e: writes.WriteEntry, limit: int | None = None) -> str:
    """Who made a recorded write, for people (inert): "lane L, pid N: command"."""
    if e.how == writes.STAMP_CLAIM:
        claimed = who({"lane": e.lane, "pid": e.pid, "command": list(e.command)}, limit)
        return f"{claimed} ({writes.STAMP_CLAIM})"
    if e.how == writes.HELD_READ:
        if len(e.held_by) > 1:  # several lanes held it: any of them may have written it
            return inert(f"{' or '.join(e.held_by)} (inferred: read while each held the file)")
        held = who({"lane": e.lane, "pid": e.pid, "command": list(e.command)}, limit)
        return f"{held} ({writes.HELD_READ})"
    if not e.identified:
        return inert(f"pid {e.pid} ({e.how or 'not identified'})")
    return who({"lane": e.lane, "pid": e.pid, "command": list(e.command)}, limit)


@dataclass(frozen=True, slots=True)
class EvidenceRow:
    time: float | None
    path: str
    size: int | None
    sha256: str | None
    grade: str
    writer: str
    note: str


@dataclass(frozen=True, slots=True)
class Version:
    """One recorded write of a path."""

    time: float
    sha256: str | None  # None: not hashed (a modify of a file still open)
    size: int | None
    writer: str
    event: str = ""
    grade: str = ""  # known (the kernel saw the writer), inferred (it held the file), or ""


@dataclass(frozen=True, slots=True)
class Shown:
    """What the report shows for one version: `kind` is content | diff | same | binary |
    not-kept | not-hashed; `lines` the (inert) content or diff lines, bounded."""

    version: Version
    kind: str
    lines: tuple[str, ...] = ()
    more: int = 0  # lines left out past MAX_LINES


@dataclass(frozen=True, slots=True)
class FileStory:
    path: str
    shown: tuple[Shown, ...]


@dataclass(frozen=True, slots=True)
class IncidentReport:
    incident: Incident
    victim_lane: str | None
    victim_stamp: StampRead | None
    evidence: tuple[EvidenceRow, ...]
    ledger: tuple[LedgerLine, ...]
    files: tuple[FileStory, ...] = field(default=())

    @property
    def about_files(self) -> bool:
        """Whether the evidence names a file: a port incident's names an address, a budget's
        none, and "what each writer wrote" would only say that nothing was."""
        return any(r.path and r.path.startswith("/") for r in self.evidence)

    @property
    def has_victim(self) -> bool:
        """A lane the incident happened to (its ledger and stamp are shown); a shared file or
        port is every writer's, and has none."""
        return self.incident.victim is not None


# -- building ---------------------------------------------------------------------------------


def _get(item: object, name: str) -> Any:
    """A field of an evidence item, whether a dataclass or (from a newer record) a mapping."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def evidence_rows(incident: Incident) -> tuple[EvidenceRow, ...]:
    rows = []
    for item in incident.evidence:
        when, size, writer = _get(item, "time"), _get(item, "size"), _get(item, "writer")
        rows.append(
            EvidenceRow(
                time=float(when) if isinstance(when, int | float) else None,
                path=str(_get(item, "path") or ""),
                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                sha256=_get(item, "sha256") or None,
                grade=str(_get(item, "grade") or incident.grade),
                writer=who(writer) if isinstance(writer, dict) else str(writer or "unknown"),
                note=str(_get(item, "note") or ""),
            )
        )
    return tuple(sorted(rows, key=lambda r: (r.time is None, r.time or 0.0)))


def _grade(e: writes.WriteEntry) -> str:
    if e.how == writes.HELD_READ:
        return "inferred"
    return "known" if e.identified else ""


def versions(history: Sequence[writes.WriteEntry], incident: Incident, path: str) -> list[Version]:
    """The versions of `path` recorded around the incident, oldest first."""
    lo, hi = incident.first_seen - AROUND, incident.last_seen + AROUND
    mine = [e for e in history if e.path == path]
    # A stamp the engine read names its writer by claim; the kernel's record of the same
    # content names it by fact: keep the kernel's.
    seen = {e.sha256 for e in mine if e.identified and e.sha256}
    mine = [e for e in mine if not (e.how == writes.STAMP_CLAIM and e.sha256 in seen)]
    inside = [e for e in mine if lo <= e.time <= hi]
    before = [e for e in mine if e.time < lo]
    if before:  # what the file held when the incident began, however long before
        inside.insert(0, max(before, key=lambda e: e.time))
    found = [Version(e.time, e.sha256, e.size, entry_writer(e), e.event, _grade(e)) for e in inside]
    for row in evidence_rows(incident):
        if row.path != path or not row.sha256 or row.time is None:
            continue
        # The same content recorded within a few seconds is the same write, seen twice.
        if not any(v.sha256 == row.sha256 and abs(v.time - row.time) < SAME_WRITE for v in found):
            v = Version(row.time, row.sha256, row.size, row.writer, "evidence", row.grade)
            found.append(v)
    found.sort(key=lambda v: v.time)
    out: list[Version] = []
    for v in found:
        last = out[-1] if out else None
        same = last is not None and last.sha256 == v.sha256 and last.writer == v.writer
        if same and (v.sha256 is not None or last.event == v.event):  # type: ignore[union-attr]
            continue  # the same writer closing (or appending to) the same file again
        out.append(v)
    return out[-MAX_VERSIONS:]


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _bounded(lines: Sequence[str]) -> tuple[tuple[str, ...], int]:
    shown = tuple(inert_lines(line) for line in lines[:MAX_LINES])
    return shown, max(0, len(lines) - MAX_LINES)


def on_disk(path: str, sha256: str) -> bytes | None:
    """The file's content now, if it is a small regular file whose sha256 is still `sha256`
    (a receipt read by the walk, when no kernel source kept its content)."""
    try:
        with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as f:
            data = f.read(evidence.SMALL_FILE + 1)
    except OSError:
        return None
    if len(data) > evidence.SMALL_FILE or hashlib.sha256(data).hexdigest() != sha256:
        return None
    return data


def file_story(roots: Sequence[str], path: str, vs: Sequence[Version]) -> FileStory:
    shown: list[Shown] = []
    previous: str | None = None
    for v in vs:
        data = None
        if v.sha256:
            data = evidence.load(roots, v.sha256)
            if data is None:  # not `or`: an emptied file's content is b"", and kept
                data = on_disk(path, v.sha256)
        text = _text(data) if data is not None else None
        if v.sha256 is None:
            shown.append(Shown(v, "not-hashed"))
        elif data is None:
            shown.append(Shown(v, "not-kept"))
        elif text is None:
            shown.append(Shown(v, "binary"))
        elif previous is None:
            shown.append(Shown(v, "content", *_bounded(text.splitlines())))
        elif previous == text:
            shown.append(Shown(v, "same"))
        else:
            diff = difflib.unified_diff(
                previous.splitlines(), text.splitlines(), "before", "after", lineterm=""
            )
            shown.append(Shown(v, "diff", *_bounded(list(diff))))
        if text is not None:
            previous = text
    return FileStory(path, tuple(shown))


def victim_lane(incident: Incident, stamp: StampRead | None) -> str | None:
    if stamp is not None and stamp.stamp is not None:
        return stamp.stamp.lane
    if incident.victim:
        split = split_namespace_name(Path(incident.victim).name)
        if split is not None:
            return split[1]
    return None


def build_report(roots: Sequence[str], incident: Incident) -> IncidentReport:
    """Read everything the report shows (blocking: call off the UI thread)."""
    stamp = None
    lines: list[LedgerLine] = []
    if incident.victim:
        namespace = Path(incident.victim)
        stamp = read_stamp(namespace)
        low, high = incident.first_seen - LEDGER_WINDOW, incident.last_seen + LEDGER_WINDOW
        lines = [line for line in ledger.read(namespace) if low <= line.time <= high]
    rows = evidence_rows(incident)
    paths = list(dict.fromkeys(r.path for r in rows if r.path))[:MAX_PATHS]
    history = writes.entries(roots) if paths else []
    files = []
    for path in paths:
        vs = versions(history, incident, path)
        if vs:
            files.append(file_story(roots, path, vs))
    return IncidentReport(
        incident=incident,
        victim_lane=victim_lane(incident, stamp),
        victim_stamp=stamp,
        evidence=rows,
        ledger=tuple(lines[-LEDGER_MAX:]),
        files=tuple(files),
    )


# -- rendering --------------------------------------------------------------------------------


def label(v: Version, when: Callable[[float], str] = utc, sha: int = 64) -> str:
    """One version in a list: when, who, size, sha256 (the dashboard passes its local time
    and a short sha; reports keep UTC and the whole sha)."""
    size = "size ?" if v.size is None else f"{v.size} bytes"
    digest = f"sha256 {v.sha256[:sha]}" if v.sha256 else "not hashed"
    return inert(f"{when(v.time)} {v.writer} ({size}, {digest})")


def says(s: Shown) -> str:
    """One line for a shown version, before its content or diff (inert)."""
    v = s.version
    size = "?" if v.size is None else str(v.size)
    if s.kind == "content" and not s.lines:
        return f"Written by {v.writer}: empty."
    return {
        "content": f"Written by {v.writer}:",
        "diff": f"Then {v.writer}, changing it:",
        "same": f"Then {v.writer}: the same content again.",
        "binary": f"{v.writer} wrote binary content ({size} bytes): not shown.",
        "not-kept": f"{v.writer} wrote {size} bytes: content not kept (kept up to "
        f"{units.size(evidence.SMALL_FILE)}: by kernel attribution, or as text read while one "
        "lane held it), and the file no longer holds it.",
        "not-hashed": f"{v.writer} wrote to it ({v.event or 'modify'}) while holding it open: "
        "no content was read.",
    }.get(s.kind, v.writer)


def _md(value: object) -> str:
    """Untrusted text in a Markdown line or table cell: inert, one line, nothing that would
    read as Markdown."""
    text = inert("-" if value is None or value == "" else value)
    for ch in ("\\", "|", "`", "*", "_", "[", "]", "<", ">", "#"):
        text = text.replace(ch, "\\" + ch)
    return " ".join(text.split()) or "-"


def _fence(lines: Sequence[str], lang: str = "") -> list[str]:
    """A code fence longer than any run of backticks inside, so it cannot be closed early."""
    longest = max((len(m) for line in lines for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, *lines, fence]


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]


def _stamp_json(stamp: StampRead | None) -> dict[str, Any] | None:
    if stamp is None:
        return None
    return {
        "status": stamp.status.value,
        "detail": stamp.detail,
        "stamp": stamp.stamp.to_json() if stamp.stamp else None,
    }


def to_markdown(report: IncidentReport) -> str:
    inc = report.incident
    intruder = dict(inc.intruder)
    before = intruder.pop("previous_owner", None)
    out = [
        f"# Incident {_md(inc.id)}: {_md(inc.kind)}",
        "",
        f"- **summary**: {_md(inc.summary)}",
        f"- **severity**: {severity_of(inc.kind).value}",
        f"- **victim**: {_md(report.victim_lane or '-')} (`{_md(inc.victim or '-')}`)",
        f"- **intruder**: {_md(who(intruder))}",
    ]
    if isinstance(before, dict):
        out.append(f"- **owner before**: {_md(who(before))}")
    for writer in inc.writers:  # a shared file or a lane written by several: each of them
        count = writer.get("count")
        times = f" ({count}×)" if count else ""
        out.append(f"- **writer**: {_md(who(writer))}{times}")
    out += [
        f"- **first seen**: {utc(inc.first_seen)}",
        f"- **last seen**: {utc(inc.last_seen)}",
        f"- **observations**: {inc.count}",
        f"- **grade**: {_md(inc.grade)}",
        f"- **acknowledged**: {_md(ack_state(inc))}",
        "",
        "Times are UTC.",
        "",
        "## Evidence",
        "",
    ]
    if report.evidence:
        out += _table(
            ["time", "path", "size", "sha256", "grade", "writer", "note"],
            [
                (utc(r.time), r.path, r.size, r.sha256, r.grade, r.writer, r.note)
                for r in report.evidence
            ],
        )
    else:
        out.append("No evidence recorded.")
    if report.about_files:
        out += ["", "## What each writer wrote", ""]
        if not report.files:
            out += ["No write of these paths was recorded (kernel attribution records them).", ""]
    for story in report.files:
        out += [f"### {_md(story.path)}", ""]
        for n, s in enumerate(story.shown, 1):
            out.append(f"{n}. {_md(label(s.version))}")
        out.append("")
        for s in story.shown:
            out += [_md(says(s)), ""]
            if s.lines:
                more = [f"... ({s.more} more lines)"] if s.more else []
                out += [*_fence([*s.lines, *more], "diff" if s.kind == "diff" else ""), ""]
    if not report.has_victim:  # no lane of its own: no stamp, no ledger
        return "\n".join(out).rstrip("\n") + "\n"
    out += ["## Victim's owner stamp (as read)", ""]
    stamp = report.victim_stamp
    if stamp is None:
        out.append("The victim namespace is not known.")
    elif stamp.stamp is None:
        out.append(f"{_md(stamp.status.value)}: {_md(stamp.detail)}")
    else:
        body = json.dumps(stamp.stamp.to_json(), indent=2, sort_keys=True, ensure_ascii=True)
        out += _fence(body.splitlines(), "json")
    out += ["", f"## Ledger (±{int(LEDGER_WINDOW)} s)", ""]
    if report.ledger:
        out += _table(
            ["time", "event", "lane", "pid", "details"],
            [
                (
                    utc(line.time),
                    line.event,
                    line.lane,
                    line.pid,
                    json.dumps(line.fields, sort_keys=True, default=str),
                )
                for line in report.ledger
            ],
        )
    else:
        out.append("No ledger lines in the window.")
    return "\n".join(out) + "\n"


def to_json(report: IncidentReport) -> dict[str, Any]:
    inc = report.incident
    return {
        "schema": SCHEMA,
        "incident": {
            "id": inc.id,
            "kind": inc.kind,
            "severity": severity_of(inc.kind).value,
            "summary": inc.summary,
            "victim": inc.victim,
            "victim_lane": report.victim_lane,
            "intruder": dict(inc.intruder),
            "intruder_text": who({k: v for k, v in inc.intruder.items() if k != "previous_owner"}),
            "first_seen": utc(inc.first_seen),
            "last_seen": utc(inc.last_seen),
            "count": inc.count,
            "grade": inc.grade,
            "acknowledged": inc.acknowledged,
            "ack_at": utc(inc.ack_at) if inc.ack_at is not None else None,
            "ack_by": inc.ack_by,
            "resolved": inc.resolved,
            "reopened": inc.reopened,
            "writers": [dict(w) for w in inc.writers],
        },
        "evidence": [{**dataclasses.asdict(r), "time": utc(r.time)} for r in report.evidence],
        "files": [
            {
                "path": story.path,
                "versions": [
                    {
                        "time": utc(s.version.time),
                        "writer": s.version.writer,
                        "size": s.version.size,
                        "sha256": s.version.sha256,
                        "event": s.version.event,
                        "grade": s.version.grade,
                        "shown": s.kind,
                        "lines": list(s.lines),
                        "more_lines": s.more,
                    }
                    for s in story.shown
                ],
            }
            for story in report.files
        ],
        "victim_stamp": _stamp_json(report.victim_stamp),
        "ledger": [
            {"time": utc(line.time), "event": line.event, "lane": line.lane, "pid": line.pid}
            | {"fields": line.fields}
            for line in report.ledger
        ],
    }


def render(report: IncidentReport, kind: str) -> str:
    if kind == "json":
        return json.dumps(to_json(report), indent=2, sort_keys=True, default=str) + "\n"
    if kind == "md":
        return to_markdown(report)
    raise ValueError(f"unknown report format {kind!r}")
