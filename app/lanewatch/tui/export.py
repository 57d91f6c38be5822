"""An incident's timeline as a report: built once (blocking reads), shown on the timeline screen,
and exported as Markdown or JSON for a postmortem. No Textual here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.inert import inert
from lanewatch.lanes import ledger
from lanewatch.lanes.ledger import LedgerLine
from lanewatch.lanes.stamp import StampRead, read_stamp
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui import fmt
from lanewatch.tui.columns import intruder_label

LEDGER_WINDOW = 120.0  # seconds of ledger shown either side of the incident
LEDGER_MAX = 40
FORMATS = ("md", "json")


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
class IncidentReport:
    incident: Incident
    victim: NamespaceView | None
    victim_stamp: StampRead | None
    evidence: tuple[EvidenceRow, ...]
    ledger: tuple[LedgerLine, ...]
    generated_at: float


def _writer_text(writer: Any) -> str:
    if writer is None:
        return "unknown"
    if isinstance(writer, dict):
        return intruder_label(writer)
    return str(writer)


def evidence_rows(incident: Incident) -> tuple[EvidenceRow, ...]:
    rows = []
    for item in incident.evidence:
        get = item.get if isinstance(item, dict) else lambda name, it=item: getattr(it, name, None)
        when = get("time")
        size = get("size")
        rows.append(
            EvidenceRow(
                time=float(when) if isinstance(when, int | float) else None,
                path=str(get("path") or ""),
                size=size if isinstance(size, int) else None,
                sha256=get("sha256") or None,
                grade=str(get("grade") or incident.grade),
                writer=_writer_text(get("writer")),
                note=str(get("note") or ""),
            )
        )
    return tuple(sorted(rows, key=lambda r: (r.time is None, r.time or 0.0)))


def build_report(incident: Incident, victim: NamespaceView | None, now: float) -> IncidentReport:
    """Read the victim's stamp and the ledger lines around the incident (blocking)."""
    stamp = None
    lines: list[LedgerLine] = []
    if victim is not None:
        namespace = Path(victim.key)
        stamp = read_stamp(namespace)
        low, high = incident.first_seen - LEDGER_WINDOW, incident.last_seen + LEDGER_WINDOW
        lines = [line for line in ledger.read(namespace) if low <= line.time <= high]
    return IncidentReport(
        incident=incident,
        victim=victim,
        victim_stamp=stamp,
        evidence=evidence_rows(incident),
        ledger=tuple(lines[-LEDGER_MAX:]),
        generated_at=now,
    )


def to_json(report: IncidentReport) -> dict[str, Any]:
    inc = report.incident
    stamp = report.victim_stamp
    return {
        "schema": 1,
        "generated_at": fmt.iso(report.generated_at),
        "incident": {
            "id": inc.id,
            "kind": inc.kind,
            "victim": inc.victim,
            "victim_lane": report.victim.lane if report.victim else None,
            "intruder": dict(inc.intruder),
            "first_seen": fmt.iso(inc.first_seen),
            "last_seen": fmt.iso(inc.last_seen),
            "count": inc.count,
            "grade": inc.grade,
            "acknowledged": inc.acknowledged,
        },
        "evidence": [
            {**dataclasses.asdict(row), "time": fmt.iso(row.time)} for row in report.evidence
        ],
        "victim_stamp": {
            "status": stamp.status.value,
            "detail": stamp.detail,
            "stamp": stamp.stamp.to_json() if stamp.stamp else None,
        }
        if stamp is not None
        else None,
        "ledger": [
            {"time": fmt.iso(line.time), "event": line.event, "lane": line.lane, "pid": line.pid}
            | {"fields": line.fields}
            for line in report.ledger
        ],
    }


def _md(value: object) -> str:
    """A table cell or inline value from untrusted text: inert (no raw ESC, no newline), and
    no pipes or backticks."""
    text = inert(value).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")
    return " ".join(text.split()) or "–"


def _fence(body: str) -> str:
    """A code fence longer than any run of backticks in `body`, so it cannot be closed early."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    return "`" * max(3, longest + 1)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows]
    return lines


def to_markdown(report: IncidentReport) -> str:
    inc = report.incident
    victim = report.victim
    out = [
        f"# Incident {_md(inc.id)}: {_md(inc.kind)}",
        "",
        f"- **Victim**: {_md(victim.lane if victim and victim.lane else inc.victim or '–')}"
        + (f" (`{_md(inc.victim)}`)" if inc.victim else ""),
        f"- **Intruder**: {_md(intruder_label(dict(inc.intruder)))}",
        f"- **First seen**: {fmt.iso(inc.first_seen)}",
        f"- **Last seen**: {fmt.iso(inc.last_seen)}",
        f"- **Count**: {inc.count}",
        f"- **Evidence grade**: {_md(inc.grade)}",
        f"- **Acknowledged**: {'yes' if inc.acknowledged else 'no'}",
        "",
        "## Timeline",
        "",
    ]
    if report.evidence:
        out += _md_table(
            ["time (UTC)", "path", "size", "sha256", "grade", "writer", "note"],
            [
                (
                    fmt.iso(r.time) or "–",
                    r.path,
                    fmt.size(r.size) if r.size is not None else "–",
                    (r.sha256 or "–")[:16],
                    r.grade,
                    r.writer,
                    r.note,
                )
                for r in report.evidence
            ],
        )
    else:
        out.append("No evidence recorded.")
    out += ["", "## Victim's owner stamp (now)", ""]
    stamp = report.victim_stamp
    if stamp is None:
        out.append("The victim namespace is not known.")
    elif stamp.stamp is None:
        out.append(f"{_md(stamp.status.value)}: {_md(stamp.detail)}")
    else:
        body = json.dumps(stamp.stamp.to_json(), indent=2, sort_keys=True)
        fence = _fence(body)
        out += [fence + "json", body, fence]
    out += ["", f"## Ledger (±{int(LEDGER_WINDOW)} s)", ""]
    if report.ledger:
        out += _md_table(
            ["time (UTC)", "event", "lane", "pid", "details"],
            [
                (
                    fmt.iso(line.time),
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
    out += ["", f"_Exported by lanewatch at {fmt.iso(report.generated_at)}._", ""]
    return "\n".join(out)


def render(report: IncidentReport, kind: str) -> str:
    if kind == "json":
        return json.dumps(to_json(report), indent=2, sort_keys=True, default=str) + "\n"
    if kind == "md":
        return to_markdown(report)
    raise ValueError(f"unknown export format {kind!r}")


def default_name(incident: Incident, kind: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in incident.id)[:64]
    return f"lanewatch-incident-{safe}.{kind}"


def write_report(report: IncidentReport, kind: str, target: Path | None = None) -> Path:
    """Write the report and return where. `target` may be a folder (default: the current one)
    or a file. A default-named file never overwrites: `-1`, `-2`... are tried; an explicit file
    name is created or replaced as asked."""
    data = render(report, kind).encode("utf-8")
    if target is not None and not target.is_dir():
        target.write_bytes(data)
        return target.resolve()
    folder = target if target is not None else Path.cwd()
    stem, _, suffix = default_name(report.incident, kind).rpartition(".")
    for n in range(1000):
        path = folder / (f"{stem}.{suffix}" if n == 0 else f"{stem}-{n}.{suffix}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path.resolve()
    raise FileExistsError(f"too many exports of {report.incident.id} in {folder}")
