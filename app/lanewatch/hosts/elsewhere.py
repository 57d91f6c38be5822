"""What the dashboard cannot show of another host's lane, said plainly with the command that
shows it there. Files, ledgers, owner stamps and the write history live on that host's disk:
this side never reads its own disk for them (a far `/tmp/x` is not this machine's `/tmp/x`),
and never shows an empty list that would read as "no files"."""

from __future__ import annotations

import shlex

from lanewatch.hosts.config import Host
from lanewatch.hosts.flags import on_host


def _lanewatch(host: Host, *args: str) -> str:
    return on_host(host, " ".join([host.command, *(shlex.quote(a) for a in args)]))


def files(host: Host, far_key: str) -> str:
    """The files screen of a far lane."""
    return (
        f"This lane runs on host {host.name}: its files are there, not on this machine, "
        f"and are not listed here. List them there: "
        f"{on_host(host, 'ls -lAtR ' + shlex.quote(far_key))}"
    )


def detail(host: Host, far_key: str) -> str:
    """The detail pane's recent writes, ledger and stamp of a far lane."""
    return (
        f"Recent writes and ledger: on host {host.name}, not read from here. See them there: "
        f"{on_host(host, 'ls -lAt ' + shlex.quote(far_key))} · "
        f"{_lanewatch(host, 'status', '--json')}"
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
