"""Type-ahead never acts: a key that came in a burst, or before the user could see the screen it
lands on, is not taken as a command that changes or writes something.

Why keys go astray (Textual 8): the app forwards each key to the widget focused when it dequeues
the key, and bindings are looked up only when the key has bubbled back up to the app, on the
screen that is active *then*. In a burst (a paste, `tmux send-keys`, typing while the UI is
busy) every key is forwarded before the first one has acted: `k` opens the kill dialog and the
`y` typed with it, still bubbling through the main screen, answers it.

So `/` is a priority binding (run as the app dequeues it) that focuses the filter at once
(`FilterControl.open`): the keys behind it are forwarded to the filter. And the dates of
keys are checked (`Key.time`, stamped when the driver read the key):
- the app, as a key reaches its bindings (`LanewatchApp.on_key`),
  asks the screen active then (`refuses`): a key that would run one of the screen's
  `GUARDED_ACTIONS`, typed less than `GUARD` after the screen appeared, changed view or moved
  its focus, or less than `BURST` after the previous key, is not run, and the screen says so;
- a screen drops a key bubbling through it once another screen covers it (it was typed for the
  screen underneath).
The decision waits until the key reaches the app because an earlier key of the same burst may
still change what a key means (`2` switches view; only then does `a` acknowledge).
Textual calls the handlers of every class in a screen's MRO, so those below run alongside the
screen's own `on_screen_resume`; the mixin must come before `Screen` in the bases.

Why a mixin and not an object the screen owns: what it adds is hooks on the screen itself. It
listens to the screen's own events (`ScreenResume`, a `Key` bubbling through it), which Textual
delivers only to handlers on the screen's class, wraps the screen's `set_focus`, reads its
`active_bindings`, and the app asks whichever screen is on top (`isinstance(screen,
TypeaheadGuard)`). An owned object would need each of five screens to forward three handlers to
it and the app to reach through every screen; the state it keeps is one timestamp.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual._time import get_time  # the clock `Message.time` is stamped with
from textual.actions import parse

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget

    _Base = Screen[object]
else:
    _Base = object

GUARD = 0.2  # no human reacts to a new screen or focus faster than this
BURST = 0.05  # keys closer than this came from a paste or a script, not from a hand


class TypeaheadGuard(_Base):
    GUARDED_ACTIONS: ClassVar[frozenset[str]] = frozenset()
    _changed_at = math.inf  # not shown yet: nothing counts as a command
    _had_focus = False  # a widget of this screen has had the focus

    def mark_changed(self) -> None:
        """What the user sees just changed (a view, the focus): keys typed before they could
        see it are type-ahead."""
        self._changed_at = get_time()

    def settled(self) -> bool:
        """Would a key pressed now be taken as a command (bursts aside)?"""
        return get_time() >= self._changed_at + GUARD

    def guards(self, key: str) -> bool:
        """`key` would run one of `GUARDED_ACTIONS` here, now."""
        active = self.active_bindings.get(key)
        if active is None or not active.enabled:
            return False
        _namespace, name, _params = parse(active.binding.action)
        return name in self.GUARDED_ACTIONS

    def refuses(self, event: events.Key, previous: float) -> bool:
        """`event` reaches the bindings with this screen on top, `previous` (the last key's time)
        before it: is it type-ahead for a guarded action? If so it was ignored: say so."""
        in_burst = event.time < previous + BURST
        early = event.time < self._changed_at + GUARD or in_burst
        if early and self.guards(event.key):
            # A burst once the screen had settled (`4y` in the kill dialog) is told as one.
            self.typed_ahead(event.key, burst=in_burst and event.time >= self._changed_at + GUARD)
            return True
        return False

    def typed_ahead(self, key: str, burst: bool = False) -> None:
        """Say that `key` was ignored (screens with a better place for it override this);
        `burst`: it came in a burst of keys after the screen was on screen."""
        self.notify(
            f"{key} not taken as a command: it came in a burst of keys or right after the "
            "screen changed. Press it again.",
            severity="warning",
            timeout=4,
            markup=False,
        )

    def on_screen_resume(self) -> None:
        self.mark_changed()

    def set_focus(
        self, widget: Widget | None, scroll_visible: bool = True, from_app_focus: bool = False
    ) -> None:
        """A focus move re-arms the guard when it happens: keys are forwarded to the focused
        widget from this moment. Not when its `DescendantFocus` reaches the screen, hops later:
        under load that came after the user could see the dialog, and refused the `y` they then
        typed. The first focus a screen ever gets (its auto-focus, a dialog's default button)
        is part of its appearing, already guarded by `on_screen_resume`, not a move."""
        before = self.focused
        super().set_focus(widget, scroll_visible, from_app_focus)
        if self.focused is None or self.focused is before:
            return
        if self._had_focus:
            self.mark_changed()
        self._had_focus = True

    def on_key(self, event: events.Key) -> None:
        if not self.is_active:
            # Forwarded to this screen, then another covered it before the key could act.
            event.stop()
            event.prevent_default()
            top = self.app.screen
            if isinstance(top, TypeaheadGuard) and top.guards(event.key):
                top.typed_ahead(event.key)
