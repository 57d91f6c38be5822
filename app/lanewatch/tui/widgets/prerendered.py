"""A renderable drawn once at a known width, replayed for every later render at that width.

The detail pane renders its content to learn its height (`DetailPane.show`: a layout pass only
when the height changes), and Textual renders the same content again to count its height and
again to paint it. For a lane under a write load that content (Rich grids of the lane's
processes, files and incidents) took ~20 ms to render on the bench machine, redrawn twice a
second: up to four renders each time, on the UI's thread, while drains waited. Rendered once,
the later renders replay the lines.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.segment import Segment


class Prerendered:
    """`renderable`'s lines at `width`; any other width renders `renderable` itself."""

    def __init__(self, renderable: RenderableType, width: int, lines: list[list[Segment]]):
        self.renderable = renderable
        self.width = width
        self.lines = lines

    @classmethod
    def render(
        cls, console: Console, options: ConsoleOptions, renderable: RenderableType
    ) -> Prerendered:
        """Render `renderable` once with `options` (its width is the one replayed)."""
        lines = console.render_lines(renderable, options, pad=False)
        return cls(renderable, options.max_width, lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[object]:
        if options.max_width != self.width:
            yield self.renderable
            return
        newline = Segment.line()
        for line in self.lines:
            yield from line
            yield newline

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)
