"""What each writer wrote: the Markdown section `lanewatch incidents ID --markdown` ends with.

For every file of an incident's evidence whose content the kernel source hashed, the versions
recorded around the incident (the root's write history, `sources.writelog`, and the evidence
itself) are listed oldest first with their writers; the first version is shown whole and each
later one as a unified diff from the one before, from the root's evidence store
(`sources.evidence`). A version not kept (larger than the store's limit, or evicted) says so.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from lanewatch.inert import inert, inert_lines
from lanewatch.model.views import Incident
from lanewatch.records import evidence, writes

AROUND = 600.0  # seconds of history before the first and after the last observation
MAX_PATHS = 10
MAX_VERSIONS = 20
MAX_LINES = 200  # of a shown content or diff


@dataclass(frozen=True, slots=True)
class Version:
    time: float
    sha256: str
    size: int | None
    writer: str


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def _md(text: str) -> str:
    text = inert(text)
    for ch in ("\\", "|", "`", "*", "_", "[", "]", "<", ">", "#"):
        text = text.replace(ch, "\\" + ch)
    return text.replace("\n", " ")


def _writer(e: writes.WriteEntry) -> str:
    if not e.identified:
        return f"pid {e.pid} ({e.how})"
    who = f"lane {e.lane}" if e.lane else "no lane"
    cmd = " ".join(e.command)[:80]
    return f"{who}, pid {e.pid}" + (f": {cmd}" if cmd else "")


def versions(roots: Sequence[str], incident: Incident, path: str) -> list[Version]:
    lo, hi = incident.first_seen - AROUND, incident.last_seen + AROUND
    found = [
        Version(e.time, e.sha256, e.size, _writer(e))
        for e in writes.history(roots, path)
        if e.sha256 and lo <= e.time <= hi
    ]
    known = {(v.sha256, round(v.time, 3)) for v in found}
    for e in incident.evidence:
        if e.path == path and e.sha256 and (e.sha256, round(e.time, 3)) not in known:
            found.append(Version(e.time, e.sha256, e.size, e.writer or "?"))
    found.sort(key=lambda v: v.time)
    out: list[Version] = []
    for v in found:
        if out and out[-1].sha256 == v.sha256 and out[-1].writer == v.writer:
            continue  # the same writer closing the same content again
        out.append(v)
    return out[-MAX_VERSIONS:]


def _text(data: bytes) -> str | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fenced(body: str, lang: str = "") -> list[str]:
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    lines = [inert_lines(line) for line in body.splitlines()]  # a file's bytes, shown inert
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"... ({len(lines) - MAX_LINES} more lines)"]
    return [fence + lang, *lines, fence]


def _label(v: Version) -> str:
    return inert(f"{_iso(v.time)} {v.writer}")


def content_section(roots: Sequence[str], incident: Incident) -> str:
    """The Markdown section, or "" when no file of the incident has a recorded content."""
    paths = list(dict.fromkeys(e.path for e in incident.evidence if e.path and e.sha256))
    blocks: list[str] = []
    for path in paths[:MAX_PATHS]:
        vs = versions(roots, incident, path)
        if not vs:
            continue
        lines = [f"### {_md(path)}", ""]
        for i, v in enumerate(vs, 1):
            size = "?" if v.size is None else str(v.size)
            lines.append(
                f"{i}. {_iso(v.time)}: {_md(v.writer)}, {size} bytes, sha256 `{v.sha256[:16]}`"
            )
        lines.append("")
        previous: tuple[Version, str] | None = None
        for v in vs:
            data = evidence.load(roots, v.sha256)
            text = _text(data) if data is not None else None
            if data is None:
                lines += [f"Content of {_md(_label(v))}: not kept (too large, or evicted).", ""]
            elif text is None:
                lines += [f"Content of {_md(_label(v))}: binary, {len(data)} bytes.", ""]
            elif previous is None:
                lines += [f"Written by {_md(_label(v))}:", "", *_fenced(text), ""]
            elif previous[1] == text:
                lines += [f"Then {_md(_label(v))}: the same content.", ""]
            else:
                old_v, old_text = previous
                diff = difflib.unified_diff(
                    old_text.splitlines(),
                    text.splitlines(),
                    fromfile=_label(old_v),
                    tofile=_label(v),
                    lineterm="",
                )
                lines += [f"Then {_md(_label(v))}:", "", *_fenced("\n".join(diff), "diff"), ""]
            if text is not None:
                previous = (v, text)
        blocks.append("\n".join(lines))
    if not blocks:
        return ""
    return "\n## What each writer wrote\n\n" + "\n".join(blocks)
