"""What every screen reads of the dashboard: the picture (the store), the clocks, this host's
roots, the actions adapter, and the facts the status line shows. The app owns one, writes its
facts, and hands it to each screen it opens; screens read it and never reach into the app
(what they want done, they ask by a message: `plumbing/screen_requests.py`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lanewatch.linux.userns import in_one_uid_namespace
from lanewatch.tui.state.dashboard_store import Picture

if TYPE_CHECKING:
    from lanewatch.tui.backend.actions_adapter import ActionsAdapter


@dataclass
class DashboardState:
    picture: Picture
    adapter: ActionsAdapter
    clock: Callable[[], float]  # wall time, for the ages shown (frozen by tests)
    monotonic: Callable[[], float]
    roots: Callable[[], list[str]]  # this host's roots (another host's are read over ssh)
    pending: Callable[[], int]  # the engine's changes waiting for a drain
    demo_note: str | None = None
    default_root: str = ""
    engine_error: str | None = None  # the engine could not start
    watchdog: str | None = None  # the picture is not current, in words (`shell/staleness.py`)
    reaper_line: str | None = None  # the reaper's last and next pass (the status line)
    # run inside a normal user's fenced lane: other lanes' open files cannot be read from here
    inside_fence: bool = field(default_factory=in_one_uid_namespace)
