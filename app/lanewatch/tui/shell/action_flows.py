"""Action flows shared by every screen: confirm, then run through the adapter in a worker; confirm
an incident's export (the dialog says where it goes), then write it in a worker.

The rows handed in are the ones the user saw when they pressed the key (frozen engine views);
the confirmation names them, and the actions module re-verifies each at the moment of acting.
The app owns one `ActionFlows` (`LanewatchApp.flows`); the workers post `ActionsFinished` and
`ExportFinished` to it, and its handlers hand them back here to be told.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.message import Message

from lanewatch.hosts.farviews import split_key
from lanewatch.inert import inert
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui.backend.actions_adapter import (
    ActionOutcome,
    ActionsAdapter,
    TrashItem,
    describe_clear,
    describe_kill,
    target_label,
    whose,
)
from lanewatch.tui.backend.report_export import (
    IncidentReport,
    build_report,
    default_folder,
    destination,
    write_report,
)
from lanewatch.tui.plumbing.messages import ActionsFinished, ExportFinished
from lanewatch.tui.screens.confirm_dialog import ConfirmScreen
from lanewatch.tui.screens.kill_dialog import KillConfirm
from lanewatch.tui.state import humanize
from lanewatch.tui.state.culprit import kill_reason, still_writing
from lanewatch.tui.state.dashboard_store import Picture
from lanewatch.tui.widgets.view_columns import intruder_label


def _ns_line(ns: NamespaceView) -> Text:
    line = Text(inert(target_label(ns)), style="bold")
    line.append(f"  {ns.state.value}", style="dim")
    if ns.pid is not None:
        line.append(f"  pid {ns.pid}")
    line.append("  owner ")
    line.append(inert(ns.user or "?"))
    line.append(" in ")
    line.append(inert(ns.checkout_path or "?"))
    return line


def _incident_line(incident: Incident, victim: str) -> Text:
    line = Text(inert(incident.kind), style="bold red")
    line.append(inert(f"  {incident.id}  victim "))
    line.append(inert(victim))
    line.append("  intruder ")
    line.append(intruder_label(dict(incident.intruder)))
    return line


class ActionFlows:
    """Confirmations, action workers and export workers, for every screen.

    Built by the app with what the flows use: the actions adapter, the picture (to name an
    incident's victim), the app's `push_screen`, `notify` and `run_worker`, `post` (a message
    to the app, from any thread) and the wall clock.
    """

    def __init__(
        self,
        adapter: ActionsAdapter,
        picture: Picture,
        *,
        push_screen: Callable[..., object],
        notify: Callable[..., None],
        run_worker: Callable[..., object],
        post: Callable[[Message], None],
        clock: Callable[[], float],
        roots: Callable[[], Sequence[str]] = list,
    ) -> None:
        self.adapter = adapter
        self.roots = roots  # the watched roots: their write history and evidence feed reports
        self.picture = picture
        self.push_screen = push_screen
        self.notify = notify
        self.run_worker = run_worker
        self.post = post
        self.clock = clock

    def confirm_kill(
        self, targets: Sequence[NamespaceView], *, reason: str = "", title: str = ""
    ) -> None:
        """The kill dialog, with its signal menu (TERM unless the user picks another).
        `reason`: why this lane (said first: "It is the intruder of …"); `title` replaces
        "Kill 1 lane?"."""
        if not targets:
            return
        frozen = tuple(targets)

        def describe(name: str) -> str:
            if len(frozen) == 1:
                said = describe_kill(frozen[0], name)
                return f"{reason} {said}" if reason else said
            return " ".join(
                [
                    f"Send SIG{name} to the owners of these {len(frozen)} lanes and their "
                    "process groups. Each identity is re-checked at the moment of the signal.",
                    *sorted({w for w in map(whose, frozen) if w}),
                ]
            )

        hosts = sorted({ns.host or "?" for ns in frozen if split_key(ns.key) is not None})
        where = f" on host {', '.join(hosts)}" if hosts else ""
        screen = KillConfirm(
            title or f"Kill {len(frozen)} lane{'s' if len(frozen) > 1 else ''}{where}?",
            [_ns_line(ns) for ns in frozen],
            describe,
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_actions("kill", partial(self.adapter.kill, sig=screen.signal), frozen)
            else:
                self.notify("Kill cancelled", timeout=3)

        self.push_screen(screen, answered)

    def confirm_kill_intruder(self, ns: NamespaceView, incident: Incident) -> None:
        """The kill dialog on the lane that intruded in `incident` (from its timeline or its
        row in Collisions): it names the lane and why."""
        victim = self.picture.victim_label(incident.victim)
        self.confirm_kill(
            [ns],
            reason=kill_reason(incident, victim),
            title=f"Kill the intruding lane {target_label(ns)}?",
        )

    def confirm_clear(self, targets: Sequence[NamespaceView]) -> None:
        if not targets:
            return
        disk = sum(ns.allocated or 0 for ns in targets)
        data = sum(ns.bytes or 0 for ns in targets)
        what = (
            describe_clear(targets[0])
            if len(targets) == 1
            else f"Move these {len(targets)} namespaces ({humanize.sizes(disk, data)}) into their "
            "roots' trash. Any that is locked or in use is refused; t restores."
        )
        self._confirm(
            f"Clear {len(targets)} namespace{'s' if len(targets) > 1 else ''}?",
            [_ns_line(ns) for ns in targets],
            what,
            "Clear",
            "clear",
            self.adapter.clear,
            targets,
        )

    def confirm_acknowledge(self, targets: Sequence[Incident]) -> None:
        if not targets:
            return
        lines = [_incident_line(i, self.picture.victim_label(i.victim)) for i in targets]
        what = (
            "Mark as seen: they leave the Collisions view; `lanewatch incidents` still lists "
            "them and their evidence stays on disk."
        )
        ongoing = [i for i in targets if still_writing(i, self.clock())]
        if ongoing:
            # Acknowledging does not stop a writer: the next write reopens the incident.
            some = "It is" if len(targets) == 1 else f"{len(ongoing)} of them are"
            what += (
                f" {some} still being written (its writer runs, its last write was "
                f"{humanize.ago(max(i.last_seen for i in ongoing), self.clock())} ago): the next "
                "write brings it back, marked reopened. To stop the writer, kill the "
                "intruding lane (k)."
            )
        self._confirm(
            f"Acknowledge {len(targets)} incident{'s' if len(targets) > 1 else ''}?",
            lines,
            what,
            "Acknowledge",
            "acknowledge",
            self.adapter.acknowledge,
            targets,
        )

    def confirm_restore(self, item: TrashItem | None) -> None:
        if item is None:
            return
        line = Text(inert(item.lane or item.name), style="bold")
        line.append("  from the trash of ")
        line.append(inert(item.root))
        far = self.adapter.host_of(item.id)
        title = f"Restore from trash on host {far[0].name}?" if far else "Restore from trash?"
        there = f"On host {far[0].name}, through its own lanewatch (over ssh): " if far else ""
        self._confirm(
            title,
            [line],
            f"{there}Move it back to {item.original}. Refused if that name is taken again.",
            "Restore",
            "restore",
            self.adapter.restore,
            [item],
        )

    def _confirm(
        self,
        title: str,
        lines: list[Text],
        what: str,
        verb_label: str,
        verb: str,
        func: Callable[[Any], ActionOutcome],
        targets: Sequence[Any],
    ) -> None:
        frozen = tuple(targets)

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_actions(verb, func, frozen)
            else:
                self.notify(f"{verb_label} cancelled", timeout=3)

        self.push_screen(ConfirmScreen(title, lines, what, verb_label), answered)

    def run_actions(
        self,
        verb: str,
        func: Callable[[Any], ActionOutcome],
        targets: Sequence[Any],
    ) -> None:
        self.run_worker(
            partial(self._act, verb, func, tuple(targets)),
            thread=True,
            group="actions",
            description=f"{verb} {len(targets)} target(s)",
            exit_on_error=False,
        )

    def _act(
        self,
        verb: str,
        func: Callable[[Any], ActionOutcome],
        targets: tuple[Any, ...],
    ) -> None:
        outcomes = tuple(func(target) for target in targets)
        self.post(ActionsFinished(verb, outcomes))

    def tell_outcomes(self, outcomes: Sequence[ActionOutcome]) -> None:
        """A toast per outcome (`ActionsFinished`, back on the UI thread)."""
        for outcome in outcomes:
            self.notify(
                outcome.message,
                title=f"{outcome.verb}: {outcome.target}",
                severity="information" if outcome.ok else "error",
                markup=False,
                timeout=6 if outcome.ok else 12,
            )

    # -- incidents ---------------------------------------------------------------------------

    def confirm_export(
        self,
        incident: Incident,
        kind: str,
        target: Path | None = None,
        report: IncidentReport | None = None,
    ) -> None:
        """The export dialog (Cancel focused, like every other): it names the file to be
        written; yes writes `report` (the timeline's) or builds it afresh."""
        path = destination(incident, kind, target)
        fmt_name = "JSON" if kind == "json" else "Markdown"
        then = ""
        if path.exists():  # an explicit file is replaced as asked; a default name never is
            then = (
                " It replaces the file there."
                if path == target
                else " That name is taken: -1, -2… is added; nothing is overwritten."
            )
        victim = self.picture.victim_label(incident.victim)

        def answered(yes: bool | None) -> None:
            if not yes:
                self.notify("Export cancelled", timeout=3)
            elif report is not None:
                self.write_export(report, kind, target)
            else:
                self.export_incident(incident, kind, target)

        self.push_screen(
            ConfirmScreen(
                f"Export incident as {fmt_name}?",
                [_incident_line(incident, victim)],
                f"Write the report to {path}.{then}",
                "Export",
            ),
            answered,
        )

    def export_incident(self, incident: Incident, kind: str, target: Path | None = None) -> None:
        """Build the incident's report and write it (both off the UI thread)."""
        roots = list(self.roots())
        self._export(lambda: build_report(roots, incident), kind, target)

    def write_export(self, report: IncidentReport, kind: str, target: Path | None = None) -> None:
        self._export(lambda: report, kind, target)

    def _export(
        self,
        report: Callable[[], IncidentReport],
        kind: str,
        target: Path | None,
    ) -> None:
        def work() -> None:
            try:
                path = write_report(report(), kind, target)
            except OSError as exc:
                self.post(ExportFinished(str(target or default_folder()), str(exc)))
                return
            self.post(ExportFinished(str(path)))

        self.run_worker(
            work,
            thread=True,
            group="export",
            description=f"export as {kind}",
            exit_on_error=False,
        )

    def tell_export(self, message: ExportFinished) -> Path | None:
        """Say how an export went (back on the UI thread); the file written, if one was."""
        if message.error:
            self.notify(f"Export failed: {message.error}", severity="error", markup=False)
            return None
        self.notify(f"Wrote {message.path}", title="Exported", markup=False)
        return Path(message.path)
