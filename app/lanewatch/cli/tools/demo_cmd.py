"""`lanewatch demo`: the dashboard on a self-contained demo with real simulated lanes."""

from __future__ import annotations

import contextlib
import importlib
import shlex
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from lanewatch.cli.common import friendly_errors, mute_dead_streams, needs_terminal
from lanewatch.demo import DemoScenario

TAKEOVER_DELAY = 6.0  # the takeover arrives in front of an open dashboard
LEAVE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Leave(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _SignalGuard:
    """SIGTERM and SIGHUP (a closed terminal) end the demo as cleanly as quitting does.

    Outside the dashboard (building, --no-ui) the signal just unwinds the main thread, so the
    scenario's `with` block stops everything. While the dashboard runs it has these signals
    itself (`lanewatch.tui.shell.leaving`): the demo's processes are stopped at once (the
    terminal may be gone already) and the app leaves from its own loop, within a few seconds
    whatever Textual does. Should the demo die anyway, its children die with it (see
    `lanewatch.demo.procs`).
    """

    def __init__(self, scenario: DemoScenario) -> None:
        self.scenario = scenario
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _SignalGuard:
        for sig in LEAVE_SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum
        if self.scenario.stopping:
            return
        raise _Leave(signum)


def _dashboard_factory() -> Callable[..., Any] | None:
    """`make_app` of the dashboard, or None while this build has no dashboard."""
    needs_terminal("without one: lanewatch demo --no-ui")
    try:
        module = importlib.import_module("lanewatch.tui.app")
    except ModuleNotFoundError as exc:
        if exc.name == "lanewatch.tui.app":
            return None
        raise
    return getattr(module, "make_app", None)


def _say(text: str = "", err: bool = False) -> None:
    with contextlib.suppress(OSError):  # the terminal may have been closed under us
        click.echo(text, err=err)


def _print_ready(scenario: DemoScenario) -> None:
    _say(f"lanewatch demo: ready in {scenario.build_seconds:.1f} s")
    _say(f"  demo folder   {scenario.base}")
    _say(f"  scratch root  {scenario.scratch_root}")
    _say(f"  shared temp   {scenario.shared_tmp}")
    for note in scenario.notes:
        _say(f"  note: {note}")
    _say()
    for line in scenario.summary_lines():
        _say(f"  {line}")
    _say()


def _print_after(scenario: DemoScenario, started: int) -> None:
    if scenario.leftover:
        _say(f"lanewatch demo: could not stop: {', '.join(scenario.leftover)}", err=True)
    kept = f"kept {scenario.base}" if scenario.keep else f"removed {scenario.base}"
    gone = started - len(scenario.leftover)
    _say(f"lanewatch demo: {gone} of the {started} processes it started are gone; {kept}", err=True)


@click.command("demo")
@click.option(
    "--keep", is_flag=True, help="Keep the demo folder afterwards (processes always stop)."
)
@click.option(
    "--no-ui",
    "no_ui",
    is_flag=True,
    help="No dashboard: build the demo, print where it is, wait for Ctrl-C.",
)
@friendly_errors
def demo_command(keep: bool, no_ui: bool) -> None:
    """Open the dashboard on a demo of real simulated lanes.

    The demo lives in <state dir>/demo (two private checkouts and a scratch root) plus one
    folder in shared temp: live, hung, stale, orphan and released lanes, and a takeover, a
    refused claim, a foreign receipt, a foreign writer and an unbound writer. Leaving it (q,
    Ctrl-C, SIGTERM, a closed terminal) stops every process it started and deletes its files;
    --keep leaves the demo folder for inspection. Nothing outside it is touched.
    """
    make_app = None if no_ui else _dashboard_factory()
    # Without the dashboard (no UI, or none in this build) nothing would watch it happen live.
    live = make_app is not None or no_ui
    scenario = DemoScenario(keep=keep, takeover_delay=TAKEOVER_DELAY if live else 0.0)
    guard = _SignalGuard(scenario)
    code: int | None = None
    _say("lanewatch demo: starting simulated lanes...", err=True)
    try:
        with guard, scenario:
            if make_app is not None:
                app = make_app(
                    [scenario.scratch_root],
                    demo_note=scenario.note,
                    on_leave=scenario.stop,
                    on_abandon=scenario.remove_files,
                    long_lived=True,
                )
                app.run()
                code = app.leaving.code  # SIGTERM, SIGHUP or a hung-up terminal: 128+N
            else:
                _print_ready(scenario)
                root = shlex.quote(str(scenario.scratch_root))
                if no_ui:
                    _say(f"Watch it from another terminal:  lanewatch dash --root {root}")
                    _say(f"                             or:  lanewatch status --root {root}")
                    _say("Ctrl-C stops every demo process.")
                    while True:
                        time.sleep(3600)
                else:
                    _say("The dashboard is not in this build yet, so the demo stops again now.")
                    _say("`lanewatch demo --no-ui` keeps it running for `lanewatch status`.")
    except KeyboardInterrupt:
        pass
    except _Leave:
        pass
    _print_after(scenario, len(scenario.processes))
    if guard.signum is not None:
        code = 128 + guard.signum
    if code is not None:
        mute_dead_streams()  # a hung-up terminal: its unflushed bytes must not make it 120
        sys.exit(code)
