"""A far lane's files, listed there by its own lanewatch: `ssh HOST lanewatch files KEY --json`
(cli/lanes/files_cmd.py), read back into the files view's `NsListing`.

Nothing of this host's disk is read for it (a far `/tmp/x` is not this machine's). The answer
is not trusted: an entry whose name is absolute, climbs out (`..`) or holds a NUL is dropped,
fields of the wrong type are dropped or read as unknown, and at most `limit` entries are kept.
When the host cannot answer (unreachable, no lanewatch, one too old to have `files`) the
listing says so in `elsewhere`, with the command that lists the files there instead.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from lanewatch.hosts import link
from lanewatch.hosts.config import Host
from lanewatch.hosts.flags import on_host
from lanewatch.model.nsfiles import KINDS, NsFile, NsListing

FILES_TIMEOUT = 20.0  # ssh's setup and a walk of a large namespace there
DEFAULT_LIMIT = 2000  # the local files view's (tui/backend/lane_files.MAX_FILES)


def by_hand(host: Host, far_key: str) -> str:
    """The command that lists them there, whatever its lanewatch is."""
    return on_host(host, "ls -lAtR " + shlex.quote(far_key))


def _confined(name: Any) -> str | None:
    if not isinstance(name, str) or not name or "\0" in name or name.startswith("/"):
        return None
    return None if any(p in ("", ".", "..") for p in name.split("/")) else name


def _entry(d: Any) -> NsFile | None:
    if not isinstance(d, Mapping):
        return None
    name = _confined(d.get("name"))
    size, mtime = d.get("size"), d.get("mtime")
    if name is None or not isinstance(size, int) or isinstance(size, bool):
        return None
    if not isinstance(mtime, int | float) or isinstance(mtime, bool):
        return None
    kind = d.get("kind") if d.get("kind") in KINDS else "other"
    writer, target = d.get("writer"), d.get("target")
    return NsFile(
        name,
        str(kind),
        size,
        float(mtime),
        writer if isinstance(writer, str) else None,
        target if isinstance(target, str) else None,
    )


def _degraded(key: str, host: Host, far_key: str, why: str) -> NsListing:
    note = f"{why}. List them there: {by_hand(host, far_key)}"
    return NsListing(key, (), False, None, note)


def listing(
    host: Host, far_key: str, key: str, *, limit: int = DEFAULT_LIMIT, no_meta: bool = False
) -> NsListing:
    """The far namespace `far_key`'s files (newest first), under this side's `key`. Blocking
    (ssh): call from a thread."""
    args = ["files", far_key, "--json", "--limit", str(limit)]
    answer = link.call(host, *args, *(["--no-meta"] if no_meta else []), timeout=FILES_TIMEOUT)
    data = answer.json()
    name = host.name
    if answer.unreachable:
        return _degraded(key, host, far_key, f"Host {name} is unreachable ({answer.why()})")
    if answer.no_lanewatch:
        why = f"No lanewatch on host {name} ({host.command}: {answer.why()})"
        return _degraded(key, host, far_key, why)
    if data is None and "No such command" in answer.err:
        why = (
            f"The lanewatch on host {name} is too old to list a lane's files (it has no "
            f"`files` command; upgrade it there: "
            f"{on_host(host, 'python3 -m pip install -U lanewatch')})"
        )
        return _degraded(key, host, far_key, why)
    if data is None or not isinstance(data.get("files"), list):
        return _degraded(key, host, far_key, f"Host {name} did not list them ({answer.why()})")
    files: list[NsFile] = []
    truncated = bool(data.get("truncated"))
    for f in map(_entry, data["files"]):
        if f is not None and len(files) >= limit:
            truncated = True  # it sent more than was asked for: kept to the limit
            break
        if f is not None:
            files.append(f)
    error = data.get("error")
    return NsListing(
        key,
        tuple(files),
        truncated,
        f"on host {name}: {error}" if isinstance(error, str) and error else None,
        None,
        name,
    )
