"""A dashboard run inside a normal user's fenced lane (a user namespace of its own) cannot read
other lanes' open files (`linux/userns.in_one_uid_namespace`): its status line says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.tui.app import make_app
from lanewatch.tui.widgets.status_line import StatusLine

from .fakes import FakeEngine
from .helpers import until

SAID = "inside a lane's fence: other lanes' open files unseen"


@pytest.mark.parametrize("inside", [True, False])
async def test_the_status_line_says_when_other_lanes_open_files_are_unseen(
    isolated_state: Path, inside: bool
) -> None:
    app = make_app([Path("/roots/r1")], engine=FakeEngine())
    app.state.inside_fence = inside  # as run in a lane or not (the suite may run in either)
    async with app.run_test(size=(220, 30)) as pilot:
        line = app.main.query_one(StatusLine)
        await until(pilot, lambda: "root" in str(line.render()), what="the status line")
        assert (SAID in str(line.render())) is inside, str(line.render())
