"""The detail pane: everything about the selected row. Untrusted strings are `Text`, always,
and inert (`lanewatch.inert`): a stamp's `\x1b]0;` is shown, never sent to the terminal."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from lanewatch.inert import inert
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.model.ports import ports_line
from lanewatch.model.roles import role_in, roles_of
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.runner.fence import describe
from lanewatch.tui.backend.lane_details import Detail
from lanewatch.tui.state import humanize
from lanewatch.tui.state.culprit import writer_rows
from lanewatch.tui.state.forward_hint import forward_line
from lanewatch.tui.state.humanize import lane_label
from lanewatch.tui.state.incident_status import incident_state, state_line
from lanewatch.tui.widgets.prerendered import Prerendered
from lanewatch.tui.widgets.view_columns import ROLE_STYLES, STATE_STYLES, intruder_label


def _grid() -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def _t(value: object, style: str = "") -> Text:
    return Text("–" if value is None or value == "" else inert(value), style=style)


def _section(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def namespace_renderable(
    ns: NamespaceView, detail: Detail | None, incidents: Sequence[Incident]
) -> RenderableType:
    """Absolute times only: the pane changes when the data does, not every second."""
    title = Text(inert(lane_label(ns)), style="bold")
    title.append("  ")
    title.append(ns.state.value, style=STATE_STYLES.get(ns.state, ""))
    title.append(f" ({ns.grade})", style="dim")
    for role in roles_of(ns, incidents):  # the `!` column's glyph, in words
        title.append("  ")
        title.append(role.glyph, style=ROLE_STYLES.get(role, "bold reverse cyan"))
        title.append(f" {role.word}", style="bold")
    owner = _grid()
    owner.add_row("why", _t(ns.reason))
    owner.add_row("checkout", _t(ns.checkout_path))
    owner.add_row("checkout id", _t(ns.checkout_id))
    owner.add_row("host", _t(ns.host))
    owner.add_row("pid", _t(ns.pid))
    owner.add_row("user", _t(ns.user))
    owner.add_row("command", _t(" ".join(ns.command) if ns.command else None))
    owner.add_row("started", _t(humanize.stamp_time(ns.started_at)))
    if ns.heartbeat_interval:  # its age is the BEAT column; here only what does not tick
        owner.add_row("heartbeat", _t(f"every {ns.heartbeat_interval:g}s"))
    if ns.released_at is not None:
        owner.add_row("released", _t(humanize.stamp_time(ns.released_at)))
    if ns.exit_code is not None:
        owner.add_row("exit code", _t(ns.exit_code))
    fence = describe(ns.fence, ns.fence_note, ns.fence_private)
    if fence is not None:
        owner.add_row("fence", _t(fence))
    if ns.lease is not None or ns.ports:
        owner.add_row("ports", _t(ports_line(ns.lease, ns.ports)))
    if detail is not None and detail.names:  # an X display's, say: not fenced (ports.md)
        owner.add_row("unix names", _t("listens on " + ", ".join(detail.names)))
    if "network" in ns.fence_private:  # a `--fence net` lane: how to reach its ports
        owner.add_row("forward", _t(f"{forward_line(ns)} (o: the ports it listens on)"))
    owner.add_row("stamp", _t(ns.stamp_status))
    # another host's scheme, or an older one (None: no stamp)
    if ns.scheme not in (None, SCHEME_VERSION) and ns.stamp_status == "ok":
        owner.add_row("scheme", _t(f"{ns.scheme} (this lanewatch keeps {SCHEME_VERSION})"))
    owner.add_row("path", _t(ns.key))
    owner.add_row(
        "size", _t(f"{humanize.count(ns.files)} files, {humanize.sizes(ns.allocated, ns.bytes)}")
    )
    cost = footprint_words(ns)
    if cost is not None:
        owner.add_row("footprint", _t(cost))
    parts: list[RenderableType] = [title, owner]
    parts.extend(_members(ns))
    parts.extend(_writes_and_ledger(detail))
    parts.append(_section("Incidents"))
    if incidents:
        table = _grid()
        for inc in incidents:
            label = Text(inert(inc.kind), style="red")
            its = role_in(ns, inc)
            if its is not None:
                label.append(f" {its.glyph} {its.word}", style="bold")
            state = incident_state(inc)
            if state:
                label.append(f" ({state})", style="dim")
            row = Text(
                inert(f"{inc.id}  ×{inc.count}  last {humanize.stamp_time(inc.last_seen)}  ")
            )
            row.append(intruder_label(dict(inc.intruder)))
            table.add_row(label, row)
        parts.append(table)
    else:
        parts.append(Text("none", style="dim"))
    return Group(*parts)


MAX_MEMBERS_SHOWN = 20


def footprint_words(ns: NamespaceView) -> str | None:
    """`cpu 97% (last 2s), memory 218MB (resident, 1 process), disk +50kB/s; by its cgroup`
    ; None where nothing was measured."""
    f = ns.footprint
    if f is None:
        return None
    cpu = "cpu -" if f.cpu is None else f"cpu {f.cpu:.0f}% (last {f.window:.0f}s)"
    how = "working set" if f.memory_from == "cgroup" else "resident"
    words = f"{cpu}, memory {humanize.size(f.memory)} ({how}, {f.processes} process(es))"
    if ns.disk_growth is not None:
        sign = "+" if ns.disk_growth >= 0 else "-"
        words += f", disk {sign}{humanize.size(round(abs(ns.disk_growth)))}/s"
    return f"{words}; known by {'its cgroup' if f.membership == 'cgroup' else 'the rules'}"


def _members(ns: NamespaceView) -> list[RenderableType]:
    """The lane's running processes: pid, since when (and how long, as of this change), how
    each is known to be the lane's, its command. Shown when there are any."""
    if not ns.members:
        return []
    n = len(ns.members)
    parts: list[RenderableType] = [_section(f"Processes ({n})")]
    grid = _grid()
    now = time.time()
    for m in ns.members[:MAX_MEMBERS_SHOWN]:
        since = f"since {humanize.clock(m.started_at)} ({humanize.ago(m.started_at, now)})"
        row = Text(f"{since}  ", style="dim").append(Text(f"{m.how}  ", style="dim"))
        row.append(inert(m.command))
        grid.add_row(Text(f"pid {m.pid}"), row)
    parts.append(grid)
    if n > MAX_MEMBERS_SHOWN:
        parts.append(Text(f"and {n - MAX_MEMBERS_SHOWN} more", style="dim"))
    return parts


def _writes_and_ledger(detail: Detail | None) -> list[RenderableType]:
    far = detail.host if detail is not None else None
    if detail is not None and detail.elsewhere and far is None:  # nothing listed there
        return [_section("Recent writes and ledger"), Text(inert(detail.elsewhere), style="yellow")]
    title = f"Recent writes (listed on host {inert(far)})" if far else "Recent writes"
    parts: list[RenderableType] = [_section(title)]
    if detail is None:
        parts.append(Text("reading…", style="dim"))
    elif detail.error:
        parts.append(Text(inert(detail.error), style="red"))
    elif not detail.writes:
        parts.append(Text("no files yet", style="dim"))
    else:
        writes = _grid()
        for w in detail.writes:
            row = Text(f"{humanize.size(w.size):>6}  ").append(inert(w.path))
            row.append("  by ", style="dim")
            row.append(inert(w.writer) if w.writer else "writer not recorded", style="dim")
            writes.add_row(Text(humanize.clock(w.mtime), style="dim"), row)
        parts.append(writes)
        if detail.truncated:
            parts.append(Text(f"(looked at the first {detail.scanned} entries)", style="dim"))
    parts.append(_section("Ledger"))
    if detail is not None and detail.elsewhere:  # a far lane's: on its disk
        parts.append(Text(inert(detail.elsewhere), style="yellow"))
        return parts
    if detail is None:
        parts.append(Text("reading…", style="dim"))
    elif not detail.ledger:
        parts.append(Text("empty", style="dim"))
    else:
        ledger = _grid()
        for line in detail.ledger:
            extra = json.dumps(line.fields, sort_keys=True, default=str) if line.fields else ""
            ledger.add_row(
                Text(humanize.clock(line.time), style="dim"),
                Text(inert(f"{line.event} "), style="bold").append(
                    inert(f"{line.lane} pid {line.pid} ")
                )
                + Text(extra, style="dim"),
            )
        parts.append(ledger)
    if detail is not None and detail.stamp is not None and not detail.stamp.ok:
        parts.append(_section("Owner stamp"))
        stamp = detail.stamp
        parts.append(Text(inert(f"{stamp.status.value}: {stamp.detail}"), style="yellow"))
    return parts


DETAIL_COMMAND = 40  # characters of a writer's command in the pane (the timeline has more)


def incident_renderable(inc: Incident, victim_label: Callable[[str | None], str]) -> RenderableType:
    title = Text(inert(inc.kind), style="bold red")
    title.append(inert(f"  {inc.id}"), style="dim")
    grid = _grid()
    if inc.summary:
        grid.add_row("what", _t(inc.summary))
    grid.add_row("victim", _t(victim_label(inc.victim)))
    grid.add_row("namespace", _t(inc.victim))
    grid.add_row("intruder", _t(intruder_label(dict(inc.intruder))))
    command = inc.intruder.get("command")
    if command:
        grid.add_row(
            "command", _t(" ".join(command) if isinstance(command, list | tuple) else command)
        )
    for label, line, _gone in writer_rows(inc, DETAIL_COMMAND):  # every lane of a shared path
        grid.add_row(label, _t(line))
    grid.add_row("first seen", _t(humanize.stamp_time(inc.first_seen)))
    grid.add_row("last seen", _t(humanize.stamp_time(inc.last_seen)))
    grid.add_row("count", _t(inc.count))
    grid.add_row("grade", _t(inc.grade))
    state = state_line(inc)
    if state:
        grid.add_row("state", _t(state, "bold"))
    grid.add_row(
        "evidence", _t(f"{humanize.many(len(inc.evidence), 'item')} — enter opens the timeline")
    )
    return Group(title, grid)


class DetailPane(VerticalScroll, can_focus=False):
    """A scrollable pane; the screen decides what goes in."""

    _key: object = None
    _lines: tuple[int, int] | None = None  # (width, lines) of what is shown

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("", id="detail-body", markup=False)

    def show(self, renderable: RenderableType, key: object = None) -> None:
        """Show `renderable`; with a `key` equal to the last one, skip the update.

        A layout pass re-arranges and repaints the whole screen (~60-80 ms of CPU with
        1,000 rows); it is needed only when the pane's content changes height. The selected
        lane's counts change with every write to it, its height seldom: rendering the new
        content once (replayed by Textual's own renders) decides."""
        if key is not None and key == self._key:
            return
        self._key = key
        body = self.query_one("#detail-body", Static)
        width = body.content_region.width
        if width > 0:
            # Rendered once, as Textual renders a Static's content, and replayed when Textual
            # counts its height and paints it (`prerendered.py`).
            options = self.app.console_options.update(highlight=False).update_width(width)
            renderable = Prerendered.render(self.app.console, options, renderable)
            lines: tuple[int, int] | None = (width, len(renderable.lines))
        else:
            lines = None  # not laid out yet
        body.update(renderable, layout=lines is None or lines != self._lines)
        self._lines = lines
