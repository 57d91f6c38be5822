"""The one place the dashboard calls the actions module (kill, clear, trash, restore) and the
engine's acknowledge. Every check lives in `lanewatch.actions`; this file only hands it the row
the user saw (a changed owner is refused there); `actions.routed` decides whether it runs here
or on another host, and turns the result into an `ActionOutcome`.

Methods here block (a kill waits for its grace period): call them from a thread worker.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lanewatch.actions import restore as trash_mod
from lanewatch.actions import routed
from lanewatch.actions.authority import owner_label
from lanewatch.actions.kill import KILLABLE
from lanewatch.actions.routed import ActionOutcome
from lanewatch.actions.trashbox import TrashEntry as TrashItem
from lanewatch.errors import LanewatchError
from lanewatch.hosts import actions as remote
from lanewatch.hosts import elsewhere
from lanewatch.hosts.config import Host
from lanewatch.hosts.farviews import SEP, remote_key, split_key
from lanewatch.hosts.many import ManyHosts
from lanewatch.linux.procid import hostname
from lanewatch.model.engine_api import EngineApi
from lanewatch.model.views import STALE_STATES, Incident, NamespaceView, NsState
from lanewatch.tui.state import humanize
from lanewatch.tui.state.humanize import lane_label as target_label

__all__ = ["KILLABLE", "ActionOutcome", "ActionsAdapter"]


def can_kill(ns: NamespaceView) -> bool:
    """Worth offering: a live or hung owner on this host whose stamp's claims match (a
    mismatched one is `unknown`, and says so), ours, or anyone's for root. The actions module
    re-checks it all."""
    if split_key(ns.key) is not None:  # another host's lane: its lanewatch checks the owner
        return ns.state in KILLABLE and ns.mismatch is None and ns.pid is not None
    return (
        ns.state in KILLABLE
        and ns.mismatch is None
        and ns.pid is not None
        and ns.host == hostname()
        and (not _other_user(ns) or os.geteuid() == 0)
    )


def why_not_kill(ns: NamespaceView) -> str:
    """Why `can_kill` says no, in a few words for a toast."""
    label = target_label(ns)
    if ns.state not in KILLABLE:
        return f"{label} is {ns.state.value}: only live or hung lanes are killed"
    if ns.mismatch is not None:
        return f"{label}: its stamp's claims do not match ({ns.mismatch})"
    if ns.pid is None:
        return f"{label} names no owner pid"
    if ns.host != hostname() and split_key(ns.key) is None:
        return f"{label} runs on host {ns.host or '?'}, not this one"
    if _other_user(ns) and ns.uid is not None and os.geteuid() != 0:
        return f"{label} is the lane of {owner_label(ns.uid)}, not yours"
    return ""


def _other_user(ns: NamespaceView) -> bool:
    # Another host's uids are its own: there, its lanewatch refuses another user's lane.
    return ns.uid is not None and ns.uid != os.getuid() and split_key(ns.key) is None


def on_host(ns: NamespaceView) -> str:
    """What the dialog says first for another host's lane ("" for this host's)."""
    found = split_key(ns.key)
    return f"On host {found[0]}, through its own lanewatch (over ssh): " if found else ""


def whose(ns: NamespaceView) -> str:
    """Whose lane the row is, as the confirmation says it ("" when it is ours)."""
    if not _other_user(ns) or ns.uid is None:
        return ""
    return f"This is the lane of {owner_label(ns.uid)}, not yours."


def can_clear(ns: NamespaceView) -> bool:
    return ns.state in STALE_STATES


def describe_kill(ns: NamespaceView, signal_name: str = "TERM") -> str:
    command = humanize.short_command(ns.command) or "?"
    owner = owner_label(ns.uid) if ns.uid is not None else f"user {ns.user or '?'}"
    other = on_host(ns) + whose(ns)
    if ns.state is NsState.HEADLESS:
        n = len(ns.members)
        pids = ", ".join(str(m.pid) for m in ns.members[:5])
        more = f" and {len(ns.members) - 5} more" if len(ns.members) > 5 else ""
        return (
            (f"{other} " if other else "")
            + f"Send SIG{signal_name} to each of the {n} process{'' if n == 1 else 'es'} of lane "
            f"{target_label(ns)!r} still running (pid {pids}{more}); its runner (pid {ns.pid}, "
            f"{owner}) is gone. Each is re-checked at the moment of its signal (the same process "
            "that was listed, running as the lane's user), then the lane is stale."
        )
    return (
        (f"{other} " if other else "")
        + f"Send SIG{signal_name} to the process group of lane {target_label(ns)!r} "
        f"({command}; owner pid {ns.pid}, {owner}, checkout {ns.checkout_path or '?'}); "
        "`lanewatch run` then records the exit and releases the lane. The owner is re-checked "
        "at the moment of the signal: if it changed since this row was shown, nothing is sent. "
        "Processes of the lane outside that group get the signal too, each re-checked."
    )


def describe_clear(ns: NamespaceView) -> str:
    return on_host(ns) + (
        f"Move namespace {ns.name} ({ns.state.value}: {ns.reason}; "
        f"{humanize.sizes(ns.allocated, ns.bytes)}) "
        f"into the trash of {ns.root}. It is refused if anything holds its lock or has a file "
        "open inside; `t` lists the trash and restores it."
    )


class ActionsAdapter:
    """Thin adapter between the dashboard and `lanewatch.actions` (plus the engine)."""

    def __init__(self, engine: EngineApi) -> None:
        self._engine = engine
        # The one place local and far are told apart: only a dashboard of many hosts has them.
        self._hosts = engine if isinstance(engine, ManyHosts) else None

    # -- kill / clear / restore -------------------------------------------------------------

    def kill(self, ns: NamespaceView, sig: int = signal.SIGTERM) -> ActionOutcome:
        """`sig` (of `kill.SIGNALS`) to the owner's group, as the row showed it (a changed
        owner is refused; the identity is re-checked at the signal).

        Another user's lane (root only): the confirmation named whose it is, which is the
        explicit consent `allow_other_user` stands for; the row's uid goes with it, so the
        kill is refused if the stamp names anyone else by then.

        Success means the lane ended: a command that outlived the wait is a failure, shown
        with kill's reason ("still running after 5s"), as the CLI exits 1 for it.
        """
        other = _other_user(ns)
        return routed.kill(ns, target_label(ns), self._hosts, sig=sig, allow_other_user=other)

    def clear(self, ns: NamespaceView) -> ActionOutcome:
        return routed.clear(ns, target_label(ns), self._hosts)

    def trash(self, roots: Sequence[str]) -> list[TrashItem]:
        return trash_mod.list_all([Path(root) for root in roots])

    def hosts(self) -> list[Host]:
        """The other hosts of this dashboard (`dash --host`), in order; [] when there is none."""
        return [s.host for s in self._hosts.streams] if self._hosts is not None else []

    def far_trash(self) -> tuple[list[TrashItem], list[str]]:
        """Every other host's trash (`lanewatch trash --json` there), its entries' id, root,
        original and path prefixed `NAME:`; and a line per host whose trash could not be read."""
        items: list[TrashItem] = []
        errors: list[str] = []
        for host in self.hosts():
            entries, error = remote.trash(host)
            if error is not None:
                errors.append(f"{error} (there: {elsewhere.trash(host)})")
            items += [_far_entry(host.name, e) for e in entries]
        return items, errors

    def restore(self, item: TrashItem) -> ActionOutcome:
        return routed.restore(item, self._hosts)

    def host_of(self, key: str) -> tuple[Host, str] | None:
        """(host, its own key or id) of another host's namespace, incident or trash entry
        (`NAME:…` with NAME one of this dashboard's hosts); None for this host's."""
        name, sep, far = key.partition(SEP)
        host_stream = self._hosts.stream(name) if self._hosts and sep and far else None
        if host_stream is not None:
            return host_stream.host, far
        found = split_key(key)  # a far namespace's key without its stream: still not ours
        return (Host(found[0], found[0]), found[1]) if found else None

    # -- incidents ----------------------------------------------------------------------------

    def acknowledge(self, incident: Incident) -> ActionOutcome:
        try:
            self._engine.acknowledge(incident.id)
        except (LanewatchError, OSError) as exc:
            return ActionOutcome("acknowledge", incident.id, False, str(exc))
        return ActionOutcome("acknowledge", incident.id, True, f"acknowledged {incident.id}")


def _far_entry(host: str, e: dict[str, Any]) -> TrashItem:
    """Another host's trash entry (its `trash --json` line) as this side's row: id, root,
    original and path prefixed `NAME:`, so it never meets a local entry; its record stays there
    (the far restore reads it)."""

    def text(k: str) -> str | None:
        v = e.get(k)
        return None if v is None else str(v)

    def number(k: str) -> int | None:
        v = e.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    cleared = e.get("cleared_at")
    return TrashItem(
        id=remote_key(host, str(e["id"])),
        root=remote_key(host, str(e.get("root", "?"))),
        name=str(e.get("name", "?")),
        lane=text("lane"),
        original=remote_key(host, str(e.get("original", "?"))),
        cleared_at=float(cleared) if isinstance(cleared, int | float) else None,
        cleared_by=text("cleared_by"),
        bytes=number("bytes"),
        files=number("files"),
        state=text("state"),
        reason=text("reason"),
        checkout_path=text("checkout_path"),
        path=remote_key(host, str(e.get("path", "?"))),
        complete=bool(e.get("complete", True)),
        record=None,
        allocated=number("allocated_bytes"),
    )
