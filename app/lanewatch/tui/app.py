"""The dashboard app (the shell: the engine, the lifecycle, the state every screen reads) and
the one factory (`make_app`) the CLI, the demo and the tests all use. What it owns beside this
file is in `shell/`: the feed of changes and its watchdog (`picture_feed.py`), the answers to
what screens ask (`navigator.py`), the confirm-then-act flows (`action_flows.py`), leaving
(`leaving.py`); notices are kept whole in `state/notice_log.py`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.message_pump import MessagePump
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.worker import Worker, WorkerState

from lanewatch.errors import LanewatchError
from lanewatch.inert import inert, inert_lines
from lanewatch.lanes.roots import Registry, canonical_root, default_root
from lanewatch.linux import heap
from lanewatch.model.engine_api import EngineApi
from lanewatch.tui.backend.actions_adapter import ActionOutcome, ActionsAdapter
from lanewatch.tui.plumbing.change_buffer import ChangeBuffer
from lanewatch.tui.plumbing.messages import (
    ActionsFinished,
    ChangesPending,
    EngineFailed,
    ExportFinished,
    ScreenRequest,
    post_quietly,
)
from lanewatch.tui.plumbing.thread_work import in_thread
from lanewatch.tui.screens.main_screen import MainScreen
from lanewatch.tui.screens.message_log import MessageLog
from lanewatch.tui.screens.typeahead_guard import TypeaheadGuard
from lanewatch.tui.shell import staleness
from lanewatch.tui.shell.action_flows import ActionFlows
from lanewatch.tui.shell.leaving import Leaving
from lanewatch.tui.shell.navigator import Navigator
from lanewatch.tui.shell.palette import LanewatchCommands
from lanewatch.tui.shell.picture_feed import FRAME, PictureFeed
from lanewatch.tui.state.dashboard_state import DashboardState
from lanewatch.tui.state.dashboard_store import Picture
from lanewatch.tui.state.notice_log import Notice, NoticeLog, one_line, toast_budget

__all__ = ["FRAME", "LanewatchApp", "make_app"]

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
        self.clock = clock
        self.monotonic = monotonic
        self.notices = NoticeLog()  # every notice whole (`m`), and those a dialog holds
        self.action_log: list[ActionOutcome] = []
        self.last_export: Path | None = None
        self._root_paths = list(root_paths)
        self.state = DashboardState(
            self.picture,
            self.adapter,
            clock,
            monotonic,
            roots=self.root_paths,
            pending=lambda: self.buffer.pending,
            demo_note=demo_note,
            default_root=str(canonical_root(default_root())),
        )
        self._terminal: int | None = None  # stdin, watched for a hang-up once mounted
        self._reaper_at = float("-inf")
        self._stopped = False
        # `lanewatch dash` runs for hours: its heap is kept out of the collector's full walks
        # once the first picture is in (`linux/heap.py`). Not for an app in a test's process.
        self.long_lived = False
        self.leaving = Leaving(self)  # SIGTERM, SIGHUP, a hung-up terminal: `shell/leaving.py`
        self.feed = PictureFeed(self)  # changes → screen, and the watchdog over them
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
        self.navigator = Navigator(self)  # what the screens ask (`ScreenRequest`)
        self.main = MainScreen(self.state, self.flows)

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
        dialog (`state/notice_log.py`). Every caller gives plain text (`markup` is kept for
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
        self._terminal = staleness.terminal_fd(self.is_headless)
        self.leaving.guard_resume(self._terminal)
        self.push_screen(self.main)
        self.set_interval(TICK, self._tick, name="ages")
        if self.long_lived:
            self.set_interval(heap.REFREEZE_EVERY, heap.refreeze, name="refreeze")
        in_thread(self, self._start_engine, "engine", "start the engine")

    def _start_engine(self) -> None:
        try:
            self.engine.start(self.buffer.put)
        except (LanewatchError, OSError, RuntimeError) as exc:
            self.post_from_thread(self, EngineFailed(str(exc)))
        self._tell_service()

    def _tell_service(self) -> None:
        """Once, off the UI thread: an always-on service that records while no dashboard runs
        (docs/service.md); its incidents are in the roots, so this picture has them."""
        from lanewatch.records.service import services, verdict

        states = [s for s in services() if s.watching]
        if states:
            with contextlib.suppress(RuntimeError):  # the app already stopped
                self.call_from_thread(
                    self.notify, verdict(states[0]), title="service", markup=False, timeout=8
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
        self.state.engine_error = message.error
        if self.main_live():
            self.main.chrome.update()

    async def on_unmount(self) -> None:
        await self.stop_engine()

    async def stop_engine(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.feed.cancel()
        self.buffer.close()
        await asyncio.to_thread(self.engine.stop)

    def post_from_thread(self, target: MessagePump, message: Message) -> None:
        """Post from any thread; a no-op once the app's loop has closed (shutdown)."""
        post_quietly(target, message)

    def on_key(self, event: events.Key) -> None:
        """Runs as a key reaches the bindings (before `App._on_key` looks it up): a key typed
        ahead of what the active screen shows is no command (`screens/typeahead_guard.py`)."""
        previous, self.last_key_at = self.last_key_at, event.time
        screen = self.screen
        if isinstance(screen, TypeaheadGuard) and screen.refuses(event, previous):
            event.prevent_default()
        elif screen is self.main:
            self.main.keys.tell_if_idle(event.key)

    @on(ScreenRequest)
    def _asked(self, request: ScreenRequest) -> None:
        """A screen asks for what the app owns (`shell/navigator.py` answers)."""
        self.navigator.handle(request)

    # -- changes → screen ---------------------------------------------------------------------

    def on_changes_pending(self, message: ChangesPending) -> None:
        self.feed.pending()

    def drain(self) -> None:
        """Apply what the engine sent since the last drain (`shell/picture_feed.py`)."""
        self.feed.drain()

    def picture_loaded(self) -> None:
        """The first whole picture is on screen (`PictureFeed.drain`)."""
        if self.long_lived:
            # After the frame that shows it: a full collection of 85,000 objects (~45 ms on
            # the bench machine) would delay that frame. Later ones walk only what came after.
            self.call_after_refresh(heap.freeze)

    def main_live(self) -> bool:
        """The main screen is composed and the app is not shutting down (`run_test` tears the
        screens down while the message loop still runs)."""
        return self.is_running and self.main.is_mounted and self.main.is_attached

    def _tick(self) -> None:
        if not self.feed.watch(self._terminal):
            self._terminal = None  # it hung up: the app is leaving
        if self.monotonic() - self._reaper_at >= REAPER_EVERY:
            self._reaper_at = self.monotonic()
            in_thread(self, self._read_reaper, "reaper", "read the reaper's last pass")
        if self.main_live() and self.screen is self.main:
            self.main.rows.tick()

    def _read_reaper(self) -> None:
        """Off the UI thread: the service's reaper's last and next pass (reap.json)."""
        from lanewatch.records.reaping import next_text, read_state

        line = next_text(read_state())
        if line != self.state.reaper_line:
            with contextlib.suppress(RuntimeError):  # the app already stopped
                self.call_from_thread(self._show_reaper, line)

    def _show_reaper(self, line: str | None) -> None:
        self.state.reaper_line = line
        if self.main_live():
            self.main.chrome.update()

    def root_paths(self) -> list[str]:
        # This host's roots: another host's (`NAME:/path`, `ssh:NAME`) are read over ssh.
        from_health = [h.root for h in self.picture.health if h.root.startswith("/")]
        return from_health or self._root_paths

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
    on_abandon: Callable[[], object] | None = None,
    long_lived: bool = False,
) -> LanewatchApp:
    """The dashboard on `roots` (None: every registered root). Starts nothing until it runs;
    the app owns the engine from then on and stops it when it exits.

    `clock` (wall time, for the ages shown) is for tests that freeze time. `on_leave` runs at
    once when a signal or a hung-up terminal ends the app (the demo stops its processes there);
    `on_abandon` before a process that did not end within the grace is ended anyway.
    `long_lived`: the app is its process's one job (`lanewatch dash`, the demo), so it may
    freeze its heap for the collector (`linux/heap.py`); a test's app must not.
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
    app.long_lived = long_lived
    app.leaving.before = on_leave
    app.leaving.last = on_abandon
    return app
