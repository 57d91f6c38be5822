"""`lanewatch ports [PORT]`: who holds which port: every lease of the machine and what each
lane of the known roots listens on; with PORT, which lane is on it.

The listening side comes from one probe of the roots' live lanes (the one `status` makes): a
process of a root we do not read (another user's, as a normal user) is not named, though its
lease is (the lease folder is the machine's). A `--fence net` lane's port is in its own
network namespace (`private`): it is listed, and collides with no one's. Exit codes: 0; with
PORT, 8 when no lane of the known roots listens on it (the line says whether it is leased, and
whether something else listens there).

Without PORT (and in `--json`) it also lists the abstract unix sockets (no file: an X display's
`@/tmp/.X11-unix/X99`) the lanes' processes listen on (`processes/socketlanes.py`): the
fence does not keep those apart, so a second lane's X server fails on a display the first holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from rich import box
from rich.table import Table

from lanewatch.cli.common import cell, fail, friendly_errors, say
from lanewatch.cli.exits import Exit
from lanewatch.cli.lanes.portsview import outside_lease, port_json
from lanewatch.cli.lanes.status_cmd import console
from lanewatch.cli.reports import report
from lanewatch.cli.rootopts import status_roots
from lanewatch.lanes.leases import Lease, lease_dir, lease_of, read_leases
from lanewatch.linux import netsockets
from lanewatch.model.units import checkout_label
from lanewatch.model.views import LanePort, NamespaceView
from lanewatch.processes.socketlanes import LaneListener, Listened, lane_listeners, why_hidden

# A lease in `ports --json`, key by key (`last` is a property).
LEASE_FIELDS = (
    "first", "last", "count", "lane", "namespace", "checkout_id", "user", "uid", "pid", "host",
    "taken_at",
)  # fmt: skip


def _lease_json(lease: Lease) -> dict[str, Any]:
    return {k: getattr(lease, k) for k in LEASE_FIELDS}


def _abstract_json(one: LaneListener) -> dict[str, Any]:
    v = one.view
    return {
        "name": one.socket.name,
        "display": one.socket.display,
        "lane": v.lane,
        "namespace": v.key,
        "checkout_id": v.checkout_id,
        "checkout_path": v.checkout_path,
        "pid": one.holder.pid,
        "command": one.holder.command,
        "how": one.how,
    }


def _listener_json(v: NamespaceView, p: LanePort, leases: Sequence[Lease]) -> dict[str, Any]:
    holder = lease_of(p.port, leases)
    return {
        **port_json(p),
        "lane": v.lane,
        "namespace": v.key,
        "checkout_id": v.checkout_id,
        "checkout_path": v.checkout_path,
        "in_own_lease": not outside_lease(v, p),
        "leased_to": holder.namespace if holder is not None else None,
    }


@click.command("ports")
@click.argument("port", required=False, type=click.IntRange(1, 65535))
@status_roots
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def ports_command(port: int | None, roots: Sequence[str], as_json: bool) -> None:
    """Port leases and what each lane listens on; with PORT, which lane is on it (exit 8: none)."""
    from lanewatch.engine.engine import Engine

    changes = Engine(list(roots) if roots else None).snapshot()
    leases = read_leases()
    views = sorted(changes.upserts.values(), key=lambda v: (v.root, v.name))
    on = [(v, p) for v in views for p in v.ports if port is None or p.port == port]
    listeners = [_listener_json(v, p, leases) for v, p in on]
    listened = lane_listeners(views) if as_json or port is None else Listened([], [])
    named = listened.found if listened is not None else None
    hidden = sorted({v.key for v in listened.hidden}) if listened is not None else []
    if port is not None:
        leases = [lease for lease in leases if lease.holds(port)]
    if as_json:
        data: dict[str, Any] = {
            "port": port,
            "lease_dir": str(lease_dir()),
            "leases": [_lease_json(lease) for lease in leases],
            "listeners": listeners,
            "abstract": None if named is None else [_abstract_json(one) for one in named],
            "hidden": hidden,
        }
        report("ports", data)
    elif port is None:
        _tables(leases, on)
        _abstract_table(named)
        _hidden_note(listened.hidden if listened is not None else [])
    else:
        _answer(port, leases, on)
    if port is not None and not on:
        sys_exit_none(port, leases, quiet=as_json)


def _answer(port: int, leases: Sequence[Lease], on: Sequence[tuple[NamespaceView, LanePort]]):
    for v, p in on:
        where = checkout_label(v.checkout_id, v.checkout_path, "-")
        whose = "" if not outside_lease(v, p) else _whose(port, leases)
        whose = " (private: the lane's own loopback)" if p.private else whose
        say(f":{p.label} lane {v.lane or v.name} ({where}) pid {p.pid} {p.command[:80]}{whose}")


def _whose(port: int, leases: Sequence[Lease]) -> str:
    holder = lease_of(port, leases)
    if holder is None:
        return " (outside its lease)"
    return f" (leased to lane {holder.lane}, {holder.user})"


def sys_exit_none(port: int, leases: Sequence[Lease], *, quiet: bool) -> None:
    holder = lease_of(port, leases)
    leased = f"leased to lane {holder.lane} ({holder.user})" if holder else "leased to no lane"
    taken = any(s.port == port for s in netsockets.listening())
    other = "; something else listens on it" if taken else ""
    message = f"no lane of the known roots listens on :{port} ({leased}{other})"
    if quiet:
        raise SystemExit(Exit.NOT_FOUND)
    fail(message, Exit.NOT_FOUND)


def _tables(leases: Sequence[Lease], on: Sequence[tuple[NamespaceView, LanePort]]) -> None:
    out = console()
    table = Table(title="leases", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("ports", "lane", "user", "pid", "namespace"):
        table.add_column(col, overflow="fold" if col == "namespace" else "ellipsis")
    for lease in leases:
        block = f"{lease.first}-{lease.last}"
        table.add_row(
            block, cell(lease.lane), cell(lease.user), str(lease.pid), cell(lease.namespace)
        )
    out.print(table)
    listening = Table(title="listening", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("port", "address", "lane", "checkout", "pid", "lease", "command"):
        listening.add_column(col, overflow="fold" if col == "command" else "ellipsis")
    for v, p in on:
        where = checkout_label(v.checkout_id, v.checkout_path, "-")
        mine = "own" if not outside_lease(v, p) else _whose(p.port, leases).strip(" ()")
        mine = "private" if p.private else mine
        listening.add_row(
            p.label,
            p.address,
            cell(v.lane or v.name),
            cell(where),
            str(p.pid),
            cell(mine),
            cell(p.command[:80]),
        )
    out.print(listening)


def _abstract_table(named: Sequence[LaneListener] | None) -> None:
    """The lanes' abstract unix sockets; a line when the kernel's table could not be read, and
    nothing when no lane listens on one."""
    if named is None:
        say("abstract unix sockets: the kernel's table could not be read", err=True)
        return
    if not named:
        return
    table = Table(title="abstract unix sockets", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("name", "display", "lane", "checkout", "pid", "command"):
        table.add_column(col, overflow="fold" if col in ("name", "command") else "ellipsis")
    for one in named:
        v = one.view
        table.add_row(
            cell(one.socket.name),
            one.socket.display or "-",
            cell(v.lane or v.name),
            cell(checkout_label(v.checkout_id, v.checkout_path, "-")),
            str(one.holder.pid) + ("" if one.how == "open file" else f" ({one.how})"),
            cell(one.holder.command[:80]),
        )
    console().print(table)


def _hidden_note(hidden: Sequence[NamespaceView]) -> None:
    """Lanes whose sockets cannot be listed here: say so, never a silent empty table."""
    if not hidden:
        return
    lanes = ", ".join(v.lane or v.name for v in hidden[:5])
    more = f" and {len(hidden) - 5} more" if len(hidden) > 5 else ""
    say(
        f"the open files of lane(s) {lanes}{more} cannot be read here ({why_hidden()}): their "
        "ports, and abstract names but an X display's, may be missing above",
        err=True,
    )
