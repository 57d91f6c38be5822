"""Writing an incident's report (`records/report.py`: one format for the dashboard and
`lanewatch incidents ID --markdown` / `--json`) to a file. No Textual here.

By default a report goes to `<state dir>/exports/`, not the current folder: that is usually a
checkout, and a stray file there turns the tree dirty (`gate` refuses it)."""

from __future__ import annotations

import os
from pathlib import Path

from lanewatch.lanes.roots import state_dir
from lanewatch.model.views import Incident
from lanewatch.records.report import (
    FORMATS,
    IncidentReport,
    build_report,
    evidence_rows,
    render,
    victim_lane,
)

__all__ = [
    "FORMATS",
    "IncidentReport",
    "build_report",
    "default_folder",
    "destination",
    "far_report",
    "write_report",
]

EXPORTS = "exports"


def default_folder() -> Path:
    return state_dir() / EXPORTS


def far_report(incident: Incident) -> IncidentReport:
    """Another host's incident: what it carried over the stream (its evidence), nothing read
    from this disk (its victim's stamp, its ledger and the recorded contents are that host's;
    the same path here is another file)."""
    rows = tuple(evidence_rows(incident))
    return IncidentReport(incident, victim_lane(incident, None), None, rows, ())


def default_name(incident: Incident, kind: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in incident.id)[:64]
    return f"lanewatch-incident-{safe}.{kind}"


def destination(incident: Incident, kind: str, target: Path | None = None) -> Path:
    """Where `write_report` will put this report, as far as can be told before writing (the
    confirmation names it): an explicit file as given, else the default name in the folder
    (`-1`, `-2`... if that name is taken by then)."""
    if target is not None and not target.is_dir():
        return target
    return (target if target is not None else default_folder()) / default_name(incident, kind)


def write_report(report: IncidentReport, kind: str, target: Path | None = None) -> Path:
    """Write the report and return where. `target` may be a folder (default: the state
    folder's `exports/`, made if need be) or a file. A default-named file never overwrites:
    `-1`, `-2`... are tried; an explicit file name is created or replaced as asked."""
    data = render(report, kind).encode("utf-8")
    if target is not None and not target.is_dir():
        if target.parent == default_folder():
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        target.write_bytes(data)
        return target.resolve()
    folder = target if target is not None else default_folder()
    if target is None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
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
