"""The columns of the three tables and how one engine view becomes one row of cells.

Every string that came from disk or from another process (lane names, paths, commands, hosts)
goes into a `rich.text.Text`, so it is never parsed as markup, and is made inert
(`lanewatch.inert`): a terminal escape in it is shown as `\x1b`, never sent.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text

from lanewatch.inert import inert
from lanewatch.model.footprint import idle_holding
from lanewatch.model.kinds import Severity, severity_of
from lanewatch.model.ports import ports_cell
from lanewatch.model.roles import Role
from lanewatch.model.states import state_severity, worst
from lanewatch.model.views import Incident, NamespaceView, NsState
from lanewatch.tui.state import humanize
from lanewatch.tui.state.dashboard_store import View
from lanewatch.tui.state.humanize import lane_label
from lanewatch.tui.state.incident_status import incident_state
from lanewatch.tui.widgets.lane_table import Cell, Column, duration_key, number_key
from lanewatch.tui.widgets.spark_cells import WIDTH as SPARK_WIDTH
from lanewatch.tui.widgets.spark_cells import cpu_spark_cell, spark_cell, spark_key

STATE_STYLES = {
    NsState.LIVE: "bold green",
    NsState.HUNG: "bold yellow",
    NsState.UNKNOWN: "bold magenta",
    NsState.STALE: "bold red",
    NsState.ORPHAN: "red",
    NsState.RELEASED: "dim",
    NsState.HEADLESS: "bold cyan",
}
# An incident's kind is coloured by its severity (`model/kinds.py`); the 16 ANSI colours only,
# so it reads the same in every terminal.
SEVERITY_STYLES = {Severity.HIGH: "bold red", Severity.MEDIUM: "yellow", Severity.LOW: "cyan"}


def _ago_key(cell: Cell) -> Any:
    if (cell.plain if isinstance(cell, Text) else cell) == BEAT_OK:
        return (0, -1.0)  # a beat on time: younger than any counted one
    return duration_key(cell)


# Widths: at 80 columns the first columns of each view (what a user scans for) fit without
# scrolling, even with a long lane name, a 7-digit pid and an "unknown?" state; what is left
# of the row (totals, host, paths) follows to the right, a scroll away, and in the detail
# pane. Long names end in "…" (the detail pane and the filter have them whole).
NAME_WIDTH = 16  # a lane name: `pytest-gw12`, `agent-7-retry` fit

STATE = Column("state", "STATE", min_width=5)
# What the lane is to the open collisions (`model/roles.py`), as the `!` column of `lanewatch
# status`: `!` victim, `>` intruder, `~` shared; a glyph each, so it reads without colour. The
# word is in the detail pane (the lane's first line) and the help; 80 columns have no room.
# One cell: a lane both victim and intruder shows the worst (`!`); the pane lists both.
ROLE = Column("victim", "!", width=1)
LANE = Column("lane", "LANE", max_width=NAME_WIDTH)
CHECKOUT = Column("checkout", "CHECKOUT", max_width=11, grow=3)
# DISK: allocated, as `du` counts (what a clear frees, what alerts use); SIZE: the files'
# lengths (apparent). A lane of 3,587 small files: DISK 29MB, SIZE 449kB.
DISK = Column("disk", "DISK", justify="right", sort_key=number_key)
BYTES = Column("bytes", "SIZE", justify="right", sort_key=number_key)
FILES = Column("files", "FILES", justify="right", sort_key=number_key)

LANES = (
    ROLE,
    STATE,
    LANE,
    CHECKOUT,
    Column("pid", "PID", justify="right", sort_key=number_key),
    Column("beat", "BEAT", justify="right", sort_key=_ago_key),
    Column("write", "WRITE", justify="right", sort_key=_ago_key),
    Column("activity", "W/S", width=SPARK_WIDTH, sort_key=spark_key),
    # Past 80 columns:
    DISK,
    # CPU % of the last reading ("idle" for a lane quiet on CPU for long while it
    # holds memory), its history, and the resident memory (`model/footprint.py`).
    Column("cpu", "CPU", justify="right", sort_key=number_key),
    Column("cpu_spark", "CPU~", width=SPARK_WIDTH, sort_key=spark_key),
    Column("mem", "MEM", justify="right", sort_key=number_key),
    BYTES,
    FILES,
    Column("age", "AGE", justify="right", sort_key=_ago_key),
    Column("host", "HOST", max_width=14),
    # What the lane's processes listen on (docs/ports.md): "20000 +1", the rest in the detail.
    Column("ports", "PORTS", max_width=12),
)

COLLISIONS = (
    Column("kind", "KIND", min_width=8),
    Column("victim", "VICTIM", max_width=NAME_WIDTH),
    Column("intruder", "INTRUDER", max_width=20),
    Column("first", "FIRST", justify="right", sort_key=_ago_key),
    Column("last", "LAST", justify="right", sort_key=_ago_key),
    Column("count", "N", justify="right", sort_key=number_key),
    # "reopened": acknowledged once, written again since (the detail pane says by what).
    Column("ack", "STATE"),
    Column("grade", "GRADE"),
    # What it is about, as `lanewatch incidents` says it ("xb writes /tmp/.X99-lock outside
    # its lane"): the path or port, which no column before names. To the view's right edge.
    Column("what", "WHAT", max_width=40, fill=True, grow=4),
)

STALE = (
    STATE,
    LANE,
    Column("since", "SINCE", justify="right", sort_key=_ago_key),
    DISK,
    # The last of the first 80 columns, so it can take the rest of a wider view (`fill`): the
    # reason whole ("released by its owner (exit code 0)"), the columns after it a scroll away.
    Column("why", "WHY", max_width=30, fill=True, grow=4),
    # Past 80 columns:
    BYTES,
    FILES,
    CHECKOUT,
    Column("root", "ROOT", max_width=40),
)

COLUMNS: dict[View, tuple[Column, ...]] = {
    View.LANES: LANES,
    View.COLLISIONS: COLLISIONS,
    View.STALE: STALE,
}
# What a write or a reading changes of a namespace, by view: each field with the columns that
# show it. A row whose change is only these moves nowhere unless the table sorts by one of those
# columns (or filters), so off screen its cells may wait until it can be seen (`MainRows.apply`,
# `LaneTable.defer`). A field not named here changes the row at once.
_READINGS = {
    "footprint": ("cpu", "mem"),
    "cpu_history": ("cpu_spark",),
    "cpu_quiet_since": ("cpu",),
}
ACTIVITY: dict[View, dict[str, tuple[str, ...]]] = {
    View.LANES: {
        "last_write": ("write",),
        "heartbeat_at": ("beat",),
        "write_rate": ("activity",),
        "allocated": ("disk",),
        "disk_growth": (),
        "bytes": ("bytes",),
        "files": ("files",),
        **_READINGS,
    },
    View.STALE: {
        "last_write": ("since",),
        "heartbeat_at": ("since",),
        "write_rate": (),
        "allocated": ("disk",),
        "disk_growth": (),
        "bytes": ("bytes",),
        "files": ("files",),
        **{field: () for field in _READINGS},
    },
}


DEFAULT_SORT: dict[View, tuple[str, bool]] = {
    View.LANES: ("lane", False),
    View.COLLISIONS: ("last", False),
    View.STALE: ("since", False),
}


def untrusted(value: str | None) -> Text:
    """A string from disk or another process, shown as typed, its controls as escapes."""
    return Text(inert(value) if value is not None else humanize.NONE, no_wrap=True, end="")


@functools.cache
def _state_text(state: NsState, inferred: bool) -> Text:
    # Shared between rows: the table copies a Text before it renders it.
    label = state.value + ("?" if inferred else "")
    # A state without a colour of its own (a new one) takes its severity's.
    severity = state_severity(state)
    style = STATE_STYLES.get(state) or (SEVERITY_STYLES[severity] if severity else "")
    return Text(label, style=style, end="")


def state_cell(ns: NamespaceView) -> Text:
    return _state_text(ns.state, ns.grade == "inferred")


def row_tone(row: NamespaceView | Incident, against: Sequence[Incident] = ()) -> str | None:
    """How a row reads at a glance: the severity of its state (`model/states.py`) or of the
    worst open incident it is the victim of; an incident's, by its kind. None: all is well.
    The table styles a row by this name (`.lane-table--high` etc. in styles/lanewatch.tcss)."""
    if isinstance(row, Incident):
        return severity_of(row.kind).value
    found = worst(state_severity(row.state), *(severity_of(i.kind) for i in against))
    return found.value if found is not None else None


# Reverse: a block, even in greys; the glyph and the word say it without colour.
ROLE_STYLES = {Role.VICTIM: "bold reverse red", Role.INTRUDER: "bold reverse yellow"}


@functools.cache
def role_cell(roles: tuple[Role, ...]) -> Cell:
    """`!` victim, `>` intruder, `~` shared (the worst of several); "" for none."""
    if not roles:
        return ""
    return Text(roles[0].glyph, style=ROLE_STYLES.get(roles[0], "bold reverse cyan"), end="")


def lanes_row(ns: NamespaceView, now: float, roles: tuple[Role, ...] = ()) -> tuple[Cell, ...]:
    ages = age_cells(View.LANES, ns, now)
    return (
        role_cell(roles),
        state_cell(ns),
        untrusted(lane_label(ns)),
        untrusted(humanize.checkout_label(ns.checkout_id, ns.checkout_path)),
        humanize.NONE if ns.pid is None else str(ns.pid),
        ages["beat"],
        ages["write"],
        spark_cell(ns.write_rate),
        humanize.size(ns.allocated),
        *footprint_cells(ns, now),
        humanize.size(ns.bytes),
        humanize.count(ns.files),
        ages["age"],
        untrusted(ns.host),
        untrusted(ports_cell(ns.ports)) if ns.ports else humanize.NONE,
    )


_IDLE = Text("idle", style="bold yellow", end="")


def footprint_cells(ns: NamespaceView, now: float) -> tuple[Cell, Cell, Cell]:
    """CPU, its sparkline and MEM; `idle` marks a lane quiet on CPU for long while holding
    memory (`model/footprint.idle_holding`, as `status` says it)."""
    f = ns.footprint
    if f is None:
        return humanize.NONE, cpu_spark_cell(()), humanize.NONE
    cpu: Cell = humanize.NONE if f.cpu is None else f"{f.cpu:.0f}%"
    if idle_holding(ns, now) is not None:
        cpu = _IDLE
    return cpu, cpu_spark_cell(ns.cpu_history), humanize.size(f.memory)


def stale_since(ns: NamespaceView) -> float | None:
    """When the namespace last showed a sign of life."""
    if ns.state is NsState.RELEASED and ns.released_at is not None:
        return ns.released_at
    candidates = [t for t in (ns.heartbeat_at, ns.last_write) if t is not None]
    return max(candidates) if candidates else None


def age_anchors(view: View, row: NamespaceView | Incident) -> dict[str, float | None]:
    """The columns of `row` that show an age, each with the time it counts from: the only
    cells the passing of time changes."""
    if isinstance(row, Incident):
        return {"first": row.first_seen, "last": row.last_seen}
    if view is View.LANES:
        return {"beat": row.heartbeat_at, "write": row.last_write, "age": row.started_at}
    return {"since": stale_since(row)}


def ages_now(view: View, row: NamespaceView | Incident, now: float) -> tuple[dict[str, str], float]:
    """The age cells of `row` at `now`, by column key, and when one of them next shows another
    text: until then, the passing of time changes nothing on the row. One pass (the age tick
    asks both of every row on screen each second)."""
    late_at = _late_at(view, row, now)
    cells: dict[str, str] = {}
    due = math.inf
    for column, then in age_anchors(view, row).items():
        if late_at is not None and column == "beat":
            cells[column], at = BEAT_OK, late_at
        else:
            cells[column], at = humanize.ago(then, now), humanize.ago_changes_at(then, now)
        if at < due:
            due = at
    return cells, due


def age_cells(view: View, row: NamespaceView | Incident, now: float) -> dict[str, str]:
    """The age cells of `row` at `now`, by column key (the row builders use these too)."""
    return ages_now(view, row, now)[0]


def ages_change_at(view: View, row: NamespaceView | Incident, now: float) -> float:
    """When a cell of `row` that shows an age next changes its text."""
    return ages_now(view, row, now)[1]


# A live owner's beat younger than BEAT_ON_TIME of its intervals shows as "ok" rather than its
# age in seconds: counting 0s..4s once a second for every lane on screen redrew the whole table
# every second on an idle dashboard (nearly all its CPU) to say nothing. A late beat counts.
BEAT_OK = "ok"
BEAT_ON_TIME = 2.0


def _late_at(view: View, row: NamespaceView | Incident, now: float) -> float | None:
    """When a live owner's beat on time at `now` turns late (its BEAT cell reads "ok" until
    then); None when BEAT counts (not the lanes' view, not live, no beat, or late already)."""
    if view is not View.LANES or not isinstance(row, NamespaceView):
        return None
    beat, interval = row.heartbeat_at, row.heartbeat_interval
    if row.state is not NsState.LIVE or beat is None or not interval:
        return None
    late = beat + interval * BEAT_ON_TIME
    return late if now < late else None


def stale_row(ns: NamespaceView, now: float) -> tuple[Cell, ...]:
    return (
        state_cell(ns),
        untrusted(lane_label(ns)),
        age_cells(View.STALE, ns, now)["since"],
        humanize.size(ns.allocated),
        untrusted(ns.reason),
        humanize.size(ns.bytes),
        humanize.count(ns.files),
        untrusted(humanize.checkout_label(ns.checkout_id, ns.checkout_path)),
        untrusted(ns.root),
    )


def kind_cell(kind: str) -> Text:
    """An incident's kind as typed (a record from disk may carry any string), in its severity's
    colour."""
    return Text(inert(kind), style=SEVERITY_STYLES[severity_of(kind)], end="")


def intruder_label(intruder: dict[str, Any]) -> str:
    """Who wrote, for display (inert): its lane, its pid, else its command; "gone HH:MM:SS"
    once its process exited (it writes no more: the row must not look as if it did)."""
    parts = []
    if intruder.get("lane"):
        parts.append(str(intruder["lane"]))
    if intruder.get("pid"):
        parts.append(f"pid {intruder['pid']}")
    gone = intruder.get("gone_at")
    if isinstance(gone, int | float) and not isinstance(gone, bool):
        parts.append(f"gone {humanize.clock(gone)}")
    if not parts and intruder.get("command"):
        command = intruder["command"]
        parts.append(" ".join(command) if isinstance(command, list | tuple) else str(command))
    return inert(" ".join(parts)) or "unknown"


def collisions_row(
    incident: Incident, now: float, victim_label: Callable[[str | None], str]
) -> tuple[Cell, ...]:
    ages = age_cells(View.COLLISIONS, incident, now)
    return (
        kind_cell(incident.kind),
        untrusted(victim_label(incident.victim)),
        untrusted(intruder_label(dict(incident.intruder))),
        ages["first"],
        ages["last"],
        str(incident.count),
        Text(incident_state(incident), style="bold", end=""),
        Text(
            inert(incident.grade), style="bold" if incident.grade == "known" else "italic", end=""
        ),
        untrusted(incident.summary),
    )
