"""The dashboard says once, when it starts, that an always-on service records while no
dashboard runs (docs/service.md). The beat is a real one,
naming this test's own process (alive, fresh), in the test's own state folder."""

from __future__ import annotations

import os
from pathlib import Path

from lanewatch.records import service as svc
from lanewatch.tui.app import make_app
from lanewatch.tui.state.notice_log import one_line, toast_budget

from .fakes import FakeEngine
from .helpers import until


async def test_the_dashboard_says_a_service_is_watching(isolated_state: Path) -> None:
    svc.write_beat(isolated_state, svc.Beat.mine("user", ["/roots/r1"]))
    app = make_app([Path("/roots/r1")], engine=FakeEngine())
    async with app.run_test(size=(120, 30)) as pilot:
        await until(
            pilot,
            lambda: any(n.title == "service" for n in app.notices.notices),
            what="the service notice",
        )
        (notice,) = [n for n in app.notices.notices if n.title == "service"]
        assert notice.message.startswith(f"watching: pid {os.getpid()} alive")  # titled once
        # The toast's one line, as `_toast` hands it to Textual (Textual's own list drops a toast
        # once its 8 s are up, which a loaded machine can pass before this line runs).
        toast = one_line(notice.title, notice.message, toast_budget(120))
        assert toast.startswith(f"service: watching: pid {os.getpid()}"), toast
