"""The detail pane renders its content once per change, and shows what the content says.

Textual renders a Static's content to count its height and again to paint it; the pane also
renders it to decide whether the height changed. A lane under a write load redraws its pane
twice a second, so each of those renders cost the UI's thread (`prerendered.py`).
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, ConsoleOptions
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from lanewatch.tui.widgets.detail_pane import DetailPane


class Counted:
    """A renderable that counts its renders: lines of text, wrapped to the width."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.renders = 0

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        self.renders += 1
        for line in self.lines:
            yield Text(line)


class PaneApp(App[None]):
    CSS = "DetailPane { width: 40; height: 20; }"

    def compose(self) -> ComposeResult:
        yield DetailPane()


def shown(app: PaneApp) -> list[str]:
    body = app.query_one("#detail-body", Static)
    return [strip.text.rstrip() for strip in body.render_lines(body.content_region.reset_offset)]


async def test_a_new_content_is_rendered_once_and_painted_as_it_reads() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(DetailPane)
        await pilot.pause()
        first = Counted(["processes (2)", "pid 200 tmux"])
        pane.show(first, key=1)
        await pilot.pause()
        assert shown(app)[:2] == ["processes (2)", "pid 200 tmux"]
        # Taller: a layout pass (Textual counts the height) and a paint, from the one render.
        taller = Counted(["processes (3)", "pid 200 tmux", "pid 201 make", "files 4"])
        pane.show(taller, key=2)
        await pilot.pause()
        assert shown(app)[:4] == ["processes (3)", "pid 200 tmux", "pid 201 make", "files 4"]
        assert taller.renders == 1
        # The same key again: nothing is rendered.
        pane.show(taller, key=2)
        await pilot.pause()
        assert taller.renders == 1


async def test_another_width_renders_the_content_itself() -> None:
    """A resize after the render: the replay is for one width only, the rest is wrapped
    afresh (a 36-character line in a pane narrowed to 20 columns folds)."""
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(DetailPane)
        await pilot.pause()
        long = Counted(["x" * 36])
        pane.show(long, key=1)
        await pilot.pause()
        assert shown(app)[0] == "x" * 36
        pane.styles.width = 20
        await pilot.pause()
        width = app.query_one("#detail-body", Static).content_region.width
        assert width < 36
        assert long.renders > 1
        assert shown(app)[0] == "x" * width
