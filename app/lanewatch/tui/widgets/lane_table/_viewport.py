"""What the table's parts (the cursor, the painter) read of the table's place on the screen:
Textual's own `Widget` properties, declared once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.geometry import Offset, Region


class Viewport(Protocol):
    @property
    def is_mounted(self) -> bool: ...

    @property
    def scroll_offset(self) -> Offset: ...

    @property
    def scrollable_content_region(self) -> Region: ...
