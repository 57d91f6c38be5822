"""What the dashboard cannot show of another host's lane, said plainly with the command that
shows it there. Files, ledgers, owner stamps and the write history live on that host's disk:
this side never reads its own disk for them (a far `/tmp/x` is not this machine's `/tmp/x`),
and never shows an empty list that would read as "no files". The far lane's files themselves
are listed by its own lanewatch (hosts/farfiles.py); these notes are what that listing leaves out,
or what shows when it cannot be had."""

from __future__ import annotations

import shlex

from lanewatch.hosts.config import Host
from lanewatch.hosts.flags import on_host


def _lanewatch(host: Host, *args: str) -> str:
    return on_host(host, " ".join([host.command, *(shlex.quote(a) for a in args)]))


def ledger(host: Host) -> str:
    """The detail pane of a far lane whose recent writes were listed there: the rest."""
    return (
        f"Ledger and owner stamp: on host {host.name}, not read from here. See them there: "
        f"{_lanewatch(host, 'status', '--json')}"
    )


def content(host: Host, far_path: str) -> str:
    """A far lane's file, which the files view lists but does not open."""
    return (
        f"This file is on host {host.name}: its content is not fetched. See it there: "
        f"{on_host(host, 'less -- ' + shlex.quote(far_path))}"
    )


def report(host: Host, far_id: str) -> str:
    """The incident screen's ledger, owner stamp and recorded contents of a far incident."""
    return (
        f"The ledger, the victim's owner stamp and the recorded contents of this incident are "
        f"on host {host.name}, not read from here. The whole report there: "
        f"{_lanewatch(host, 'incidents', far_id, '--markdown')}"
    )


def trash(host: Host) -> str:
    """A far host's trash that could not be listed: the commands that restore there."""
    return f"{_lanewatch(host, 'trash')} then {_lanewatch(host, 'restore', 'ID')}"
