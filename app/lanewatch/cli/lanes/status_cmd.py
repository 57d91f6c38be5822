"""`lanewatch status`: every namespace of every root once, as a table or as stable JSON.

Exit codes (docs/engine.md): 0 no open collision; 4 at least one open (unacknowledged)
incident; 5 none open, but some root could not be read (the picture is incomplete).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lanewatch.cli.common import cell, echo_json, friendly_errors
from lanewatch.cli.exits import Exit
from lanewatch.cli.lanes.portsview import ports_json, ports_text
from lanewatch.cli.reports import schema_id
from lanewatch.cli.rootopts import status_roots
from lanewatch.hosts.farviews import split_key
from lanewatch.hosts.stream import HostState
from lanewatch.linux.procid import hostname
from lanewatch.linux.userns import in_one_uid_namespace
from lanewatch.model.footprint import idle_holding
from lanewatch.model.incidents import evidence_json
from lanewatch.model.kinds import is_collision
from lanewatch.model.roles import LEGEND, Role, roles_label, roles_of
from lanewatch.model.units import checkout_label, size
from lanewatch.model.views import (
    Changes,
    HealthStatus,
    Incident,
    LaneMember,
    NamespaceView,
    NsState,
)
from lanewatch.runner.fence import describe as fence_words

SCHEMA = schema_id("status")  # was the number 1 before 0.2
EXIT_OK = Exit.OK
EXIT_COLLISIONS = Exit.COLLISION
EXIT_INCOMPLETE = Exit.INCOMPLETE

_STATE_STYLE = {
    NsState.LIVE: "green",
    NsState.HUNG: "yellow",
    NsState.STALE: "red",
    NsState.ORPHAN: "magenta",
    NsState.RELEASED: "dim",
    NsState.UNKNOWN: "cyan",
    NsState.HEADLESS: "bold cyan",
}
# `disk`: allocated, as `du` counts (what a clear frees); `size`: apparent, the files' lengths.
# `checkout`: `slug:abcd`, so `pytest-gw0` of two worktrees reads as two lanes (--json:
# `checkout_path` whole).
COLUMNS = (
    "state",
    "lane",
    "checkout",
    "pid",
    "ports",
    "fence",
    "host",
    "age",
    "beat",
    "write",
    "files",
    "disk",
    "cpu",
    "mem",
    "size",
    "!",
    "why",
)
# Narrow: no fence or ports column; a live unfenced lane gets its line under the table.
NARROW_COLUMNS = ("state", "lane", "checkout", "pid", "beat", "write", "disk", "!", "why")
WIDE = 120  # narrower consoles get NARROW_COLUMNS
INSIDE_FENCE = (
    "seen from inside a lane's fence (a user namespace of its own): no process outside it can "
    "have its open files read here, so other lanes' ports and open files are not shown, nor "
    "writers inferred from them; `lanewatch status` outside the lane shows them"
)
_BAD_HEALTH = {HealthStatus.MISSING.value, HealthStatus.DEGRADED.value}


def exit_code(changes: Changes) -> int:
    """A warning (a lane over its budget: `Kind.collision` False) is listed, not a collision."""
    if any(not i.acknowledged and is_collision(i.kind) for i in changes.incidents.values()):
        return EXIT_COLLISIONS
    if any(h.status in _BAD_HEALTH for h in changes.health):
        return EXIT_INCOMPLETE
    return EXIT_OK


def _age(t: float | None, now: float) -> float | None:
    return None if t is None else round(max(0.0, now - t), 3)


def namespace_json(v: NamespaceView, now: float) -> dict[str, Any]:
    return {
        "key": v.key,
        "root": v.root,
        "name": v.name,
        "lane": v.lane,
        "checkout_id": v.checkout_id,
        "checkout_path": v.checkout_path,
        "host": v.host,
        "pid": v.pid,
        "user": v.user,
        "uid": v.uid,
        "command": list(v.command),
        "state": v.state.value,
        "reason": v.reason,
        "grade": v.grade,
        "stamp_status": v.stamp_status,
        "mismatch": v.mismatch,
        "started_at": v.started_at,
        "age": _age(v.started_at, now),
        "heartbeat_at": v.heartbeat_at,
        "heartbeat_age": _age(v.heartbeat_at, now),
        "heartbeat_interval": v.heartbeat_interval,
        "released_at": v.released_at,
        "exit_code": v.exit_code,
        "last_write": v.last_write,
        "files": v.files,
        "bytes": v.bytes,  # apparent: the sum of the files' lengths
        # Additive: on disk, as `du -sB1` counts it; what a clear frees.
        "allocated_bytes": v.allocated,
        "incident_ids": list(v.incident_ids),
        "fence": v.fence,
        "fence_note": v.fence_note,
        "fence_private": list(v.fence_private),
        "members": [member_json(m, now) for m in v.members],
        # Additive: the host (`--host NAME`) whose lane this is; null: this one's.
        "from_host": (split_key(v.key) or (None,))[0],
        "scheme": v.scheme,
        # Additive: what the lane costs, and how its processes are known.
        **footprint_json(v, now),
        # Additive: the lane's port lease and what its processes listen on.
        **ports_json(v),
    }


def footprint_json(v: NamespaceView, now: float) -> dict[str, Any]:
    """`membership` ("cgroup" | "rules"; null: no local stamp), `footprint` (null: nothing
    measured, or nothing runs), the CPU history, disk growth and `idle_for` (seconds idle on
    CPU while holding memory, once that is long: `model/footprint.py`; else null)."""
    f = v.footprint
    return {
        "membership": v.membership,
        "footprint": None
        if f is None
        else {
            "at": f.at,
            "cpu_percent": f.cpu,
            "cpu_window": f.window,
            "memory_bytes": f.memory,
            "memory_from": f.memory_from,
            "processes": f.processes,
            "membership": f.membership,
        },
        "cpu_history": list(v.cpu_history),
        "cpu_quiet_since": v.cpu_quiet_since,
        "disk_growth": None if v.disk_growth is None else round(v.disk_growth, 1),
        "idle_for": idle_for(v, now),
    }


def idle_for(v: NamespaceView, now: float) -> float | None:
    idle = idle_holding(v, now)
    return None if idle is None else round(idle, 1)


def member_json(m: LaneMember, now: float) -> dict[str, Any]:
    return {
        "pid": m.pid,
        "start_ticks": m.start_ticks,
        "command": m.command,
        "started_at": m.started_at,
        "age": _age(m.started_at, now),
        "how": m.how,
        "uid": m.uid,
    }


WRITER_FIELDS = ("lane", "namespace", "checkout_id", "pid", "command", "first_seen", "last_seen")


def writer_json(w: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: w.get(k) for k in WRITER_FIELDS}
    out["count"] = w.get("count")
    return out


def ack_word(i: Incident) -> str:
    """The ack column: "yes", "resolved" (by lanewatch), "reopened" (new evidence since)."""
    state = i.ack_state
    return "yes" if state == "acknowledged" else state


def incident_json(i: Incident, *, evidence: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": i.id,
        "kind": i.kind,
        "victim": i.victim,
        "intruder": dict(i.intruder),
        "first_seen": i.first_seen,
        "last_seen": i.last_seen,
        "count": i.count,
        "grade": i.grade,
        "acknowledged": i.acknowledged,
        "ack_at": i.ack_at,
        "ack_by": i.ack_by,
        "summary": i.summary,
        # Additive: every lane that wrote, the shared file, and the acknowledgement.
        "writers": [writer_json(w) for w in i.writers],
        "path": i.path,
        "resolved": i.resolved,
        "reopened": i.reopened,
        "ack_note": i.ack_note,
    }
    if evidence:
        out["evidence"] = [evidence_json(e, key=False) for e in i.evidence]
    return out


def status_json(changes: Changes) -> dict[str, Any]:
    now = changes.at or time.time()
    views = sorted(changes.upserts.values(), key=lambda v: (v.root, v.name))
    incidents = sorted(changes.incidents.values(), key=lambda i: (i.first_seen, i.id))
    return {
        "schema": SCHEMA,
        "generated_at": now,
        "host": hostname(),
        "roots": [{"root": h.root, "status": h.status, "detail": h.detail} for h in changes.health],
        "namespaces": [namespace_json(v, now) for v in views],
        "incidents": [incident_json(i) for i in incidents],
        "open_incidents": sum(not i.acknowledged for i in incidents),
        "exit_code": int(exit_code(changes)),
        "attribution": {"mode": changes.attribution, "hint": changes.attribution_hint},
        "service": service_json(),
    }


def service_json() -> dict[str, Any]:
    """Whether an always-on recorder watches (docs/service.md): its incidents are already in
    the roots' records, which this picture read."""
    from lanewatch.records.service import services

    states = services()
    return {"watching": any(s.watching for s in states), "services": [s.to_json() for s in states]}


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    s = max(0.0, now - t)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.0f}h"
    return f"{s / 86400:.0f}d"


def cpu_words(v: NamespaceView, now: float) -> Text:
    """`97%`, or `idle 12m` (yellow) for a lane quiet on CPU for long while holding memory;
    `-` where nothing was measured."""
    idle = idle_holding(v, now)
    if idle is not None:
        return Text(f"idle {_ago(now - idle, now)}", style="yellow")
    f = v.footprint
    return Text("-" if f is None or f.cpu is None else f"{f.cpu:.0f}%")


def console() -> Console:
    """A console that never parses markup; wide when writing to a pipe or a file, unless
    $COLUMNS says how wide."""
    out = Console(highlight=False)
    if out.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return out
    return Console(highlight=False, width=max(out.width, 160))


def role_text(roles: Sequence[Role], *, words: bool = True) -> Text:
    """The `!` column: a glyph and a word per role, as the dashboard's `!` (`model/roles.py`):
    "! victim", "> intruder", "~ shared"; below 120 columns the glyphs only ("!>"), the
    words in the legend under the table (the reason keeps its room)."""
    said = roles_label(roles) if words else "".join(role.glyph for role in roles)
    return Text(said, style="bold red" if Role.VICTIM in roles else "bold")


def fence_cell(how: str | None) -> Text:
    """kernel / bwrap / none (yellow: the lane shares the real /tmp), "-" for a stamp from
    before the fence; why it is none is under the table, in `--json` and the detail pane."""
    return Text(how or "-", style="yellow" if how == "none" else "")


def render(changes: Changes, console: Console, hosts: Sequence[HostState] = ()) -> None:
    now = changes.at or time.time()
    narrow = console.width < WIDE
    # Narrow: no vertical rules and no host, age or files (the JSON has them all), so the
    # reason keeps room to wrap between words.
    table = Table(
        title="lanes",
        title_justify="left",
        expand=narrow,
        box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
        pad_edge=not narrow,
    )
    shown = NARROW_COLUMNS if narrow else COLUMNS
    if hosts and narrow:  # many hosts: whose lane it is matters more than its age
        shown = ("host", *shown)
    for col in shown:
        table.add_column(
            col,
            no_wrap=col not in ("lane", "why"),
            overflow="fold" if col in ("lane", "why") else "ellipsis",
            ratio=1 if col == "why" and narrow else None,
            max_width=16 if col == "lane" and narrow else 14 if col == "checkout" else None,
            min_width=14 if col == "why" and narrow else None,
        )
    open_ = [i for i in changes.incidents.values() if not i.acknowledged]
    for v in sorted(changes.upserts.values(), key=lambda v: (v.root, v.name)):
        # `?`: the state was inferred, as the dashboard says it.
        state = v.state.value + ("?" if v.grade == "inferred" else "")
        cells: dict[str, str | Text] = {
            "state": Text(state, style=_STATE_STYLE.get(v.state, "")),
            "lane": cell(v.lane if v.lane is not None else v.name),
            "pid": Text(str(v.pid) if v.pid else "-"),
            "ports": ports_text(v),
            "fence": fence_cell(v.fence),
            "host": cell(v.host or "-"),
            "age": _ago(v.started_at, now),
            "beat": _ago(v.heartbeat_at, now),
            "write": _ago(v.last_write, now),
            "files": "…" if v.files is None else str(v.files),
            "checkout": cell(checkout_label(v.checkout_id, v.checkout_path, "-")),
            "disk": size(v.allocated),
            "cpu": cpu_words(v, now),
            "mem": size(v.footprint.memory) if v.footprint else "-",
            "size": size(v.bytes),
            "!": role_text(roles_of(v, open_), words=not narrow),
            "why": cell(v.reason),
        }
        table.add_row(*(cells[col] for col in shown))
    console.print(table)
    if any(v.grade == "inferred" for v in changes.upserts.values()):
        console.print(cell("?: inferred from timing or open files, not known from the kernel"))
    for v in sorted(changes.upserts.values(), key=lambda v: (v.root, v.name)):
        if v.state is NsState.LIVE and (v.fence == "none" or v.fence_note):
            words = fence_words(v.fence, v.fence_note, v.fence_private)
            console.print(cell(f"lane {v.lane}: {words}", style="yellow"))
    for v in sorted(changes.upserts.values(), key=lambda v: (v.root, v.name)):
        if v.state is NsState.HEADLESS:
            listed = ", ".join(f"pid {m.pid} ({m.command[:60]})" for m in v.members[:5])
            more = f" and {len(v.members) - 5} more" if len(v.members) > 5 else ""
            line = f"{v.lane or v.name}: runner gone, still running: {listed}{more}"
            console.print(cell(line, style=_STATE_STYLE[NsState.HEADLESS]))
    if any(roles_of(v, open_) for v in changes.upserts.values()):
        console.print(cell(f"!: what the lane is to an open collision: {LEGEND}"))
    running = [v for v in changes.upserts.values() if v.footprint is not None and v.membership]
    if running:
        ways = Counter(v.membership for v in running)
        said = ", ".join(f"{n} by {'their cgroup' if how == 'cgroup' else 'the rules'}"
                         for how, n in sorted(ways.items()))  # fmt: skip
        console.print(cell(f"running lanes' processes known: {said}", style="dim"))
    if open_:
        inc = Table(title="open incidents", title_justify="left")
        # The ID whole, however narrow the terminal (`incidents ID` takes it, or a prefix):
        # the other columns shrink, the summary wraps.
        whole = max(len(i.id) for i in open_)
        for col in ("id", "kind", "grade", "count", "last seen", "ack", "summary"):
            inc.add_column(col, no_wrap=col != "summary", min_width=whole if col == "id" else None)
        for i in sorted(open_, key=lambda i: i.last_seen, reverse=True):
            inc.add_row(
                cell(i.id),
                cell(i.kind),
                cell(i.grade),
                str(i.count),
                _ago(i.last_seen, now),
                ack_word(i),
                cell(i.summary),
            )
        console.print(inc)
    for h in changes.health:
        if hosts and h.root.startswith("ssh:"):
            continue  # said below, host by host
        style = "red" if h.status in _BAD_HEALTH else "dim"
        console.print(cell(f"root {h.root}: {h.status} ({h.detail})", style=style))
    for far in hosts:
        hello = far.hello or {}
        said = f"host {far.host.name}: {far.status} ({far.detail})"
        if hello.get("version"):
            said += f", lanewatch {hello['version']}, scheme {hello.get('scheme')}"
        style = "dim" if far.status == "ok" and not far.flags else "red"
        console.print(cell(said, style=style))
        for flag in far.flags:
            console.print(cell(f"  {flag.detail}", style="bold red"))
            console.print(cell(f"  fix: {flag.fix}", style="bold"))
    if changes.attribution:
        line = f"attribution: {changes.attribution}: {changes.attribution_hint}"
        console.print(cell(line, style="dim"))
    if in_one_uid_namespace():
        console.print(cell(INSIDE_FENCE, style="yellow"))
    from lanewatch.records.service import describe, services

    for line in describe(services()):
        console.print(cell(line, style="dim"))


@click.command("status")
@status_roots
@click.option("--json", "as_json", is_flag=True, help="Print the documented JSON (docs/engine.md).")
@click.option(
    "--poll",
    is_flag=True,
    help="Report roots as polled (network filesystems). status reads each root once either way.",
)
@click.option(
    "--host",
    "host_names",
    multiple=True,
    metavar="NAME",
    help="Add this host's lanes, read over ssh (repeatable; a name of hosts.toml or an ssh "
    "destination; docs/hosts.md). Default: the hosts.toml hosts marked `default`.",
)
@friendly_errors
def status_command(
    roots: Sequence[str], as_json: bool, poll: bool, host_names: Sequence[str]
) -> None:
    """Every namespace of every known root, with its state, owner and open incidents.

    Exits 0 when no collision is open, 4 when one is, 5 when none is but a root (or a host)
    is unreadable.
    """
    from lanewatch.engine.engine import Engine
    from lanewatch.hosts import config, snapshot

    hosts = config.pick(host_names)
    pictures = snapshot.gather(hosts)
    changes = snapshot.merged(
        Engine(list(roots) if roots else None, poll=poll).snapshot(), pictures
    )
    states = [p.state for p in pictures]
    if as_json:
        data = status_json(changes)
        if hosts:  # additive: each host's link, version, scheme and flags
            data["hosts"] = [s.to_json() for s in states]
        echo_json(data)
    else:
        render(changes, console(), states)
    raise SystemExit(exit_code(changes))
