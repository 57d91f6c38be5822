"""Shell completion of what only lanewatch knows: lane and namespace names, trash ids.

click calls these while the user presses TAB (`lanewatch completion bash|zsh|fish` prints the
script that asks). They read the roots registry and list folders, nothing more: no /proc, no
lock, no stamp. A root that cannot be read completes nothing; completion never fails loudly.

Every command that offers completion imports this module, `run` among them, so what the
callbacks need is imported when one is called (TAB), not with the command: `run` starts
without the roots registry's and click.shell_completion's import cost.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from lanewatch.errors import LanewatchError

if TYPE_CHECKING:
    import click
    from click.shell_completion import CompletionItem

# A registry or a root that cannot be read (CorruptRegistry is a LanewatchError).
_QUIET = (OSError, ValueError, LanewatchError)


def _item(value: str, hint: str | None = None) -> CompletionItem:
    from click.shell_completion import CompletionItem  # at TAB only (module doc)

    return CompletionItem(value, help=hint)


def _namespaces() -> list[tuple[str, str | None]]:
    """(folder name, lane or None for a foreign folder) in every known root."""
    from lanewatch.lanes.names import split_namespace_name  # at TAB only (module doc)
    from lanewatch.lanes.roots import ROOT_META, Registry

    found: list[tuple[str, str | None]] = []
    try:
        roots = Registry().paths()
    except _QUIET:
        return found
    for root in roots:
        try:
            with os.scandir(root) as entries:
                names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except _QUIET:
            continue
        for name in names:
            if name != ROOT_META and not name.startswith("."):
                split = split_namespace_name(name)
                found.append((name, split[1] if split else None))
    return found


def lanes(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Lane names seen in the known roots (for --lane)."""
    names = sorted({lane for _, lane in _namespaces() if lane is not None})
    return [_item(n) for n in names if n.startswith(incomplete)]


def targets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """What `kill` and `clear` take: a lane name, or a namespace folder's name."""
    words: set[str] = set()
    for name, lane in _namespaces():
        words.add(name)
        if lane is not None:
            words.add(lane)
    return [_item(w) for w in sorted(words) if w.startswith(incomplete)]


def trash_ids(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Trash ids of every known root, with the lane they held as help."""
    from lanewatch.actions.trashbox import list_all  # only when completing a restore

    try:
        entries = list_all()
    except _QUIET:
        return []
    return [_item(e.id, e.lane or e.name) for e in entries if e.id.startswith(incomplete)]
