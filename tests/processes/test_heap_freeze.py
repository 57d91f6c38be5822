"""A long-lived process keeps its settled heap out of the collector's full walks
(`linux/heap.py`): the dashboard's engine process once it settles, `lanewatch dash` once the
first picture is on screen; an app in a test's process never (its garbage would stay).

Each runs in a process of its own: freezing pytest's own heap would keep every later test's
garbage alive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanewatch.engine.process import EngineProcess
from tests.conftest import wait_for
from tests.kits.enginekit import Recorder, make_stamp

pytestmark = [pytest.mark.processes, pytest.mark.unprivileged]  # also as a normal user


def _python(code: str, tmp_path: Path, *args: str) -> str:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_frozen_cycles_wait_for_the_refreeze_and_later_ones_are_collected(tmp_path: Path) -> None:
    out = _python(
        """
        import gc, weakref
        from lanewatch.linux import heap

        class Node:
            pass

        def cycle():
            a, b = Node(), Node()
            a.other, b.other = b, a
            return weakref.ref(a)

        before = cycle()  # alive at the freeze: a reference holds it
        keep = before()
        frozen = heap.freeze()
        del keep
        gc.collect()
        kept = before() is not None  # frozen: a full collection no longer walks it
        after = cycle()  # made after the freeze: collected as usual
        gc.collect()
        collected = after() is None
        heap.refreeze()
        freed = before() is None  # the refreeze collects what the freeze kept
        print(frozen > 1000, kept, collected, freed, gc.get_freeze_count() > 0)
        """,
        tmp_path,
    )
    assert out == "True True True True True"


def test_the_engine_process_freezes_its_heap_once_settled(root: Path) -> None:
    make_stamp(root, "a")
    engine = EngineProcess([str(root)])
    engine.start(Recorder())
    try:
        assert engine.settled.wait(30)
        frozen = wait_for(lambda: engine.stats.get("heap_frozen"), 20, what="a frozen heap")
        assert frozen > 1000  # the engine's modules and picture, not a handful
    finally:
        engine.stop()


APP = """
    import asyncio, gc, sys
    from pathlib import Path
    from lanewatch.tui.app import make_app

    async def main(root, long_lived):
        app = make_app([Path(root)], long_lived=long_lived)
        async with app.run_test(size=(120, 36)) as pilot:
            while not app.picture.loaded:
                await pilot.pause(0.02)
            # Scheduled after the feed's own call (if any): both run after the next refresh,
            # in order.
            done = asyncio.Event()
            app.call_after_refresh(done.set)
            app.refresh()
            while not done.is_set():
                await pilot.pause(0.02)
            print(gc.get_freeze_count())

    asyncio.run(main(sys.argv[1], sys.argv[2] == "1"))
"""


@pytest.mark.parametrize("long_lived", [True, False])
def test_the_dashboard_freezes_after_its_first_picture_only_when_long_lived(
    root: Path, tmp_path: Path, long_lived: bool
) -> None:
    make_stamp(root, "a")
    out = _python(APP, tmp_path, str(root), "1" if long_lived else "0")
    frozen = int(out.splitlines()[-1])
    assert (frozen > 1000) if long_lived else frozen == 0
