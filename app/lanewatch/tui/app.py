"""The dashboard app and the one factory (`make_app`) the CLI, the demo and the tests all use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.message_pump import MessagePump
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from lanewatch.errors import LanewatchError
from lanewatch.hosts.farviews import host_fixes
from lanewatch.inert import inert, inert_lines
from lanewatch.lanes.roots import Registry, canonical_root, default_root
from lanewatch.model.engine_api import EngineApi
from lanewatch.model.roles import LEGEND
from lanewatch.model.views import Incident, NamespaceView
from lanewatch.tui import clipboard, watch
from lanewatch.tui.actions_adapter import ActionOutcome, ActionsAdapter
from lanewatch.tui.bridge import ChangeBuffer
from lanewatch.tui.commands import LanewatchCommands
from lanewatch.tui.flows import ActionFlows
from lanewatch.tui.later import call_after
from lanewatch.tui.leave import HUNG_UP, Leaving
from lanewatch.tui.messages import ActionsFinished, ChangesPending, EngineFailed, ExportFinished
from lanewatch.tui.notices import Notice, NoticeLog, one_line, toast_budget
from lanewatch.tui.picture import Picture
from lanewatch.tui.screens.confirm import ConfirmScreen
from lanewatch.tui.screens.files import FileScreen, FilesScreen
from lanewatch.tui.screens.help import HelpScreen
from lanewatch.tui.screens.incident import IncidentScreen
from lanewatch.tui.screens.kill_confirm import KillConfirm
from lanewatch.tui.screens.main import MainScreen
from lanewatch.tui.screens.message_log import MessageLog
from lanewatch.tui.screens.trash import TrashScreen
from lanewatch.tui.screens.typeahead import TypeaheadGuard
from lanewatch.tui.widgets.lane_table import LaneTable

log = logging.getLogger(__name__)

FRAME = 1 / 60  # changes reach the screen at most this often (one frame)
TICK = 1.0  # ages move on once a second
REAPER_EVERY = 10.0  # seconds between two reads of the reaper's reap.json
CSS_NAME = "lanewatch.tcss"


def css_path() -> Path:
    """The stylesheet shipped in the wheel (`lanewatch/styles`), else the repo's `styles/`
    (editable installs run from the source tree)."""
    here = Path(__file__).resolve()
    installed = here.parent.parent / "styles" / CSS_NAME
    if installed.is_file():
        return installed
    return here.parents[3] / "styles" / CSS_NAME


def theme_for(color_system: str | None) -> str | None:
    """The theme for a terminal of 16 colours (TERM=xterm, TEXTUAL_COLOR_SYSTEM=standard): the
    ANSI one, whose error and warning are the terminal's own red and yellow. The default theme's
    truecolours, brought down to 16 by nearest match, turn its error colour grey and a hung row
    would read as a live one. None: keep the default."""
    return "ansi-dark" if color_system in ("standard", "windows") else None


class LanewatchApp(App[None]):
    CSS_PATH = css_path()
    TITLE = "lanewatch"
    COMMANDS = App.COMMANDS | {LanewatchCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,f10", "quit", "Quit"),
        Binding("m", "messages", "Messages", show=False),
    ]

    def __init__(
        self,
        engine: EngineApi,
        *,
        root_paths: Sequence[str] = (),
        demo_note: str | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.adapter = ActionsAdapter(engine)
        self.picture = Picture()
        self.buffer = ChangeBuffer(lambda: self.post_from_thread(self, ChangesPending()))
        self.demo_note = demo_note
        self.clock = clock
        self.monotonic = monotonic
        self.engine_error: str | None = None
        self.notices = NoticeLog()  # every notice whole (`m`), and those a dialog holds
        self.action_log: list[ActionOutcome] = []
        self.last_export: Path | None = None
        self._root_paths = list(root_paths)
        self.default_root = str(canonical_root(default_root()))
        self._last_drain = 0.0
        self._attribution_told = False
        self._fixes_told: set[str] = set()  # a half-migrated host's fix, told once (toast)
        self._terminal: int | None = None  # stdin, watched for a hang-up once mounted
        self._drain_timer: asyncio.TimerHandle | None = None  # a drain is scheduled
        self.watch_problem: watch.Problem | None = None  # what the watchdog found, if anything
        self._problem_at = 0.0
        self._ticked = 0.0
        self.reaper_line: str | None = None  # the status line's reaper part (`_read_reaper`)
        self._reaper_at = float("-inf")
        self._stopped = False
        self.leaving = Leaving(self)  # SIGTERM, SIGHUP, a hung-up terminal: `tui/leave.py`
        self.last_key_at = float("-inf")
        self.flows = ActionFlows(
            self.adapter,
            self.picture,
            push_screen=self.push_screen,
            notify=self.notify,
            run_worker=self.run_worker,
            post=lambda message: self.post_from_thread(self, message),
            clock=clock,
            roots=self.root_paths,
        )
        self.main = MainScreen(self.picture, self.flows)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notice (screens' too: theirs call this), its quoted paths, lane names and
        errors inert: whole in the message log (`m`), one line in a toast, and never over a
        dialog (`tui/notices.py`). Every caller gives plain text (`markup` is kept for
        Textual's signature; a notice is never parsed as markup)."""
        notice = Notice(
            self.clock(),
            inert(title),
            inert_lines(message),
            severity,
            self.NOTIFICATION_TIMEOUT if timeout is None else timeout,
        )
        self.notices.add(notice)
        if self.screen_stack and isinstance(self.screen_stack[-1], ModalScreen):
            self.notices.hold(notice)  # shown when the dialog closes, if still fresh
            return
        self._toast(notice)

    def _toast(self, notice: Notice) -> None:
        budget = toast_budget(self.size.width or 80)
        super().notify(
            one_line(notice.title, notice.message, budget),
            severity=notice.severity,  # type: ignore[arg-type]
            timeout=notice.timeout,
            markup=False,
        )

    def push_screen(self, screen: Any, *args: Any, **kwargs: Any) -> Any:
        """A dialog takes the toasts off the screen first (the log keeps them): none covers
        its buttons."""
        if isinstance(screen, ModalScreen):
            self.clear_notifications()
        return super().push_screen(screen, *args, **kwargs)

    def pop_screen(self) -> Any:
        """Closing a dialog shows the notices that waited for it."""
        done = super().pop_screen()
        self.call_later(self._release_notices)
        return done

    def _release_notices(self) -> None:
        if not self.screen_stack or isinstance(self.screen_stack[-1], ModalScreen):
            return  # another dialog: they wait on (or the app is closing)
        for notice in self.notices.release(self.clock()):
            self._toast(notice)

    def action_messages(self) -> None:
        """The message log: every notice whole (`m`)."""
        if not isinstance(self.screen, MessageLog | ModalScreen):
            self.push_screen(MessageLog(self.notices.notices))

    # -- lifecycle ----------------------------------------------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> None:
        """As Textual's, and SIGTERM or SIGHUP end it as `q` does, with 128+N
        (`self.leaving.code`); the process ends within a few seconds even if Textual's shutdown
        blocks on a dead terminal."""
        with self.leaving.on_signals():
            return super().run(*args, **kwargs)

    def on_mount(self) -> None:
        theme = theme_for(self.console.color_system)
        if theme is not None:
            self.theme = theme
        self._terminal = watch.terminal_fd(self.is_headless)
        self.leaving.guard_resume(self._terminal)
        self.push_screen(self.main)
        self.set_interval(TICK, self._tick, name="ages")
        self.run_worker(
            self._start_engine,
            thread=True,
            exclusive=True,
            group="engine",
            description="start the engine",
            exit_on_error=False,
        )

    def _start_engine(self) -> None:
        try:
            self.engine.start(self.buffer.put)
        except (LanewatchError, OSError, RuntimeError) as exc:
            self.post_from_thread(self, EngineFailed(str(exc)))
        self._tell_service()

    def _tell_service(self) -> None:
        """Once, off the UI thread: an always-on service that records while no dashboard runs
        (docs/service.md); its incidents are in the roots, so this picture has them."""
        from lanewatch.records.service import describe, services

        states = [s for s in services() if s.watching]
        if states:
            with contextlib.suppress(RuntimeError):  # the app already stopped
                self.call_from_thread(
                    self.notify, describe(states)[0], title="service", markup=False, timeout=8
                )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed is shown, not fatal (they all run with exit_on_error=False)."""
        if event.state is WorkerState.ERROR:
            worker = event.worker
            self.notify(
                f"{worker.description or worker.name} failed: {worker.error}",
                severity="error",
                markup=False,
                timeout=15,
            )

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.engine_error = message.error
        if self.main_live():
            self.main.update_chrome()

    async def on_unmount(self) -> None:
        await self.stop_engine()

    async def stop_engine(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        self.buffer.close()
        await asyncio.to_thread(self.engine.stop)

    def post_from_thread(self, target: MessagePump, message: Message) -> None:
        """Post from any thread; a no-op once the app's loop has closed (shutdown)."""
        with contextlib.suppress(RuntimeError):  # "Event loop is closed"
            target.post_message(message)

    def on_key(self, event: events.Key) -> None:
        """Runs as a key reaches the bindings (before `App._on_key` looks it up): a key typed
        ahead of what the active screen shows is no command (`screens/typeahead.py`)."""
        previous, self.last_key_at = self.last_key_at, event.time
        screen = self.screen
        if isinstance(screen, TypeaheadGuard) and screen.refuses(event, previous):
            event.prevent_default()
        elif screen is self.main:
            self.main.tell_if_idle(event.key)

    # -- changes → screen ---------------------------------------------------------------------

    def on_changes_pending(self, message: ChangesPending) -> None:
        if self._drain_timer is not None:
            return
        delay = self._last_drain + FRAME - self.monotonic()
        if delay <= 0:
            self.drain()
        else:
            # Not `set_timer`: a one-shot Textual timer whose delay has passed by the time its
            # task runs never fires (`later.py`), and this handle would stay set for good.
            self._drain_timer = call_after(self, delay, self._timed_drain)

    def _timed_drain(self) -> None:
        self._drain_timer = None
        self.drain()

    def drain(self) -> None:
        """Apply everything the engine sent since the last drain, unless the view is paused or
        a modal is open (the user is reading or confirming what is under it; the buffer keeps
        merging meanwhile, and the screen catches up when it closes)."""
        main = self.main
        if not self.main_live():
            return  # not composed yet, or torn down at exit
        if main.paused or isinstance(self.screen, ModalScreen):
            main.update_chrome()
            return
        changes = self.buffer.take()
        self._last_drain = self.monotonic()
        if changes is None:
            return
        main.apply_delta(self.picture.apply(changes))
        if not self._attribution_told and self.picture.attribution == "inferred":
            # Once in the app's life (not once per picture or engine restart): how writers are
            # known, and how to know them exactly. The status line keeps saying the mode.
            self._attribution_told = True
            self.notify(
                self.picture.attribution_hint or "writers are inferred from open files and timing",
                title="attribution: inferred",
                markup=False,
                timeout=10,
            )
        self._tell_fixes()
        if isinstance(self.screen, IncidentScreen):
            self.screen.picture_changed()

    def _tell_fixes(self) -> None:
        """A host flagged as half-migrated (`hosts/flags.py`): its fix whole in a toast, once;
        the status line keeps saying it, as far as its one line reaches."""
        for name, words in host_fixes(self.picture.health):
            said = "\n".join(words)
            if said not in self._fixes_told:
                self._fixes_told.add(said)
                self.notify(
                    said, title=f"host {name}", severity="warning", markup=False, timeout=20
                )

    def main_live(self) -> bool:
        """The main screen is composed and the app is not shutting down (`run_test` tears the
        screens down while the message loop still runs)."""
        return self.is_running and self.main.is_mounted and self.main.is_attached

    def _tick(self) -> None:
        self._watch()
        if self.monotonic() - self._reaper_at >= REAPER_EVERY:
            self._reaper_at = self.monotonic()
            self.run_worker(
                self._read_reaper,
                thread=True,
                exclusive=True,
                group="reaper",
                description="read the reaper's last pass",
                exit_on_error=False,
            )
        if self.main_live() and self.screen is self.main:
            self.main.tick()

    def _read_reaper(self) -> None:
        """Off the UI thread: the service's reaper's last and next pass (reap.json)."""
        from lanewatch.records.reaping import next_text, read_state

        line = next_text(read_state())
        if line != self.reaper_line:
            with contextlib.suppress(RuntimeError):  # the app already stopped
                self.call_from_thread(self._show_reaper, line)

    def _show_reaper(self, line: str | None) -> None:
        self.reaper_line = line
        if self.main_live():
            self.main.update_chrome()

    def _held(self) -> bool:
        """Changes are meant to wait: paused, a modal open, or no main screen to show them."""
        return not self.main_live() or self.main.paused or isinstance(self.screen, ModalScreen)

    def _watch(self) -> None:
        """Once a second: is the picture current (`tui/watch.py`)? Changes stuck in the
        buffer are drained at once; a silent engine process is restarted by `EngineProcess`."""
        now = self.monotonic()
        late, self._ticked = now - self._ticked, now  # over 1 s: the loop itself was busy
        waiting = self.buffer.waiting_for()
        stalled = None if waiting is None or self._held() else waiting
        if stalled is not None and stalled > watch.STALL:
            log.warning(
                "changes waited %.1f s without a drain (last tick %.1f s ago); draining",
                stalled,
                late,
            )
            if self._drain_timer is not None:
                self._drain_timer.cancel()
                self._drain_timer = None
            self.drain()
        if self._terminal is not None and watch.terminal_gone(self._terminal):
            self._terminal = None
            self.leaving.leave(HUNG_UP, "the terminal hung up")  # as if SIGHUP had reached us
            return
        quiet = self.engine.quiet_for()  # None but for an engine in a child process
        self._show_problem(watch.judge(stalled_for=stalled, quiet_for=quiet))

    def _show_problem(self, problem: watch.Problem | None) -> None:
        was = self.watch_problem
        if problem == was:
            return
        now = self.monotonic()
        if was is None and problem is not None:
            self._problem_at = now - problem.age
            log.warning("the picture is not current: %s", problem.text)
        self.watch_problem = problem
        if was is not None and (problem is None or problem.kind != was.kind):
            said = watch.recovered(was, now - self._problem_at)
            log.warning("%s", said)
            self.notify(said, title="picture current again", markup=False, timeout=8)
            if problem is not None:
                self._problem_at = now - problem.age
        if self.main_live():
            self.main.update_chrome()

    # -- helpers for screens --------------------------------------------------------------------

    def root_paths(self) -> list[str]:
        # This host's roots: another host's (`NAME:/path`, `ssh:NAME`) are read over ssh.
        from_health = [h.root for h in self.picture.health if h.root.startswith("/")]
        return from_health or self._root_paths

    def root_count(self) -> int:
        return len(self.root_paths())

    def rescan(self) -> None:
        self.engine.rescan()
        self.notify("Rescanning every root", timeout=3)

    def help_groups(self) -> list[tuple[str, list[BindingType]]]:
        """Every key of every screen, as the help screen lists them."""
        return [
            ("Views and rows", list(self.main.BINDINGS)),
            ("In a table", list(LaneTable.BINDINGS)),
            ("Incident timeline", list(IncidentScreen.BINDINGS)),
            ("Trash", list(TrashScreen.BINDINGS)),
            ("Files of a lane", [*FilesScreen.BINDINGS, *FileScreen.BINDINGS[1:]]),
            ("Confirmation (kill: the signal)", [*ConfirmScreen.BINDINGS, *KillConfirm.BINDINGS]),
            ("Everywhere", [*self.BINDINGS, Binding("ctrl+p", "command_palette", "Commands")]),
        ]

    def show_help(self) -> None:
        groups = self.help_groups()
        hint = self.picture.attribution_hint
        note = f"attribution: {self.picture.attribution}: {hint}" if hint else ""
        legend = f"The ! column of Lanes: {LEGEND} (the detail pane says it in words)."
        note = f"{legend}\n{note}" if note else legend
        self.push_screen(HelpScreen(groups, note))  # type: ignore[arg-type]

    def open_incident(self, incident: Incident) -> None:
        victim = self.picture.namespaces.get(incident.victim or "")
        self.push_screen(IncidentScreen(incident, victim))

    def lane_of_incident(self, incident: Incident, whose: str) -> str | None:
        """The namespace key of an incident's victim or intruder, if the picture has it."""
        spaces = self.picture.namespaces
        if whose == "victim":
            return incident.victim if incident.victim in spaces else None
        intruder = incident.intruder
        named = intruder.get("namespace")
        if isinstance(named, str) and named in spaces:
            return named
        lane, checkout = intruder.get("lane"), intruder.get("checkout_id")
        if not lane:
            return None
        found = [
            k
            for k, ns in spaces.items()
            if ns.lane == lane and (checkout is None or ns.checkout_id == checkout)
        ]
        return incident.victim if incident.victim in found else (found[0] if found else None)

    def jump_to_lane(self, key: str, came_from: Incident | None = None) -> None:
        """Back to the main screen with `key`'s row selected (in whichever view holds it; a
        filter that hides it is cleared); backspace there reopens `came_from`."""
        while self.screen is not self.main and len(self.screen_stack) > 1:
            self.pop_screen()
        self.main.select_lane(key, came_from)

    def open_files(self, key: str) -> None:
        self.push_screen(FilesScreen(key, self.root_paths()))

    def open_file(self, key: str, rel: str) -> None:
        """One file of the namespace `key`, as the files view shows it."""
        self.push_screen(FileScreen(key, rel))

    def copy_path(self, path: str) -> None:
        """Send `path` to the clipboard (OSC 52) and, under tmux, where tmux needs it; say
        what was done, never "Copied" (`tui/clipboard.py`)."""
        self.copy_to_clipboard(path)
        shown = inert(path)

        def tell() -> None:
            told = clipboard.after_osc52(shown)
            with contextlib.suppress(RuntimeError):  # the app already stopped
                self.call_from_thread(self.notify, told.message, title=told.title, markup=False)

        self.run_worker(
            tell, thread=True, group="clipboard", description="copy a path", exit_on_error=False
        )

    def open_trash(self) -> None:
        self.push_screen(TrashScreen(self.root_paths()), self.flows.confirm_restore)

    def confirm_kill(self, targets: Sequence[NamespaceView]) -> None:
        """The kill dialog, as the main screen's `k` opens it (tests open it from here)."""
        self.flows.confirm_kill(targets)

    # -- what the flows' workers post back ------------------------------------------------------

    def on_actions_finished(self, message: ActionsFinished) -> None:
        self.action_log.extend(message.outcomes)
        self.flows.tell_outcomes(message.outcomes)

    def on_export_finished(self, message: ExportFinished) -> None:
        path = self.flows.tell_export(message)
        if path is not None:
            self.last_export = path


def make_app(
    roots: Sequence[Path] | None = None,
    *,
    poll: bool = False,
    engine: EngineApi | None = None,
    demo_note: str | None = None,
    clock: Callable[[], float] | None = None,
    on_leave: Callable[[], object] | None = None,
) -> LanewatchApp:
    """The dashboard on `roots` (None: every registered root). Starts nothing until it runs;
    the app owns the engine from then on and stops it when it exits.

    `clock` (wall time, for the ages shown) is for tests that freeze time. `on_leave` runs at
    once when a signal or a hung-up terminal ends the app (the demo stops its processes there).
    """
    if engine is None:
        from lanewatch.engine.process import EngineProcess

        engine = EngineProcess(list(roots) if roots is not None else None, poll=poll)
    if roots is not None:
        paths = [str(Path(r)) for r in roots]
    else:
        try:
            paths = [str(p) for p in Registry().paths()]
        except LanewatchError:
            paths = []
    app = LanewatchApp(engine, root_paths=paths, demo_note=demo_note, clock=clock or time.time)
    app.leaving.before = on_leave
    return app
