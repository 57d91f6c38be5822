"""What the Linux layer says of pid 1 (root's init) to whoever runs it: a process another user
may not read. Imports lanewatch and the standard library only, so a test can run it as
`nobody` from a readable copy (tests/kits/userkit.py). Usage: denied_probe.py (prints JSON)."""

from __future__ import annotations

import json

from lanewatch.linux import proc, procid
from lanewatch.processes import holders


def denied_facts() -> dict[str, object]:
    """What the layer says of pid 1 to whoever runs this."""
    facts: dict[str, object] = {}
    try:
        proc.read_file(1, "environ")
        facts["environ"] = "read"
    except OSError as exc:
        facts["environ"] = "denied" if proc.is_denied(exc) else "gone" if proc.is_gone(exc) else ""
    with proc.Pinned.open(1) as pinned:
        facts["stat"] = pinned.stat() is not None  # world-readable
        try:
            pinned.readlink("cwd")
            facts["cwd"] = "read"
        except OSError as exc:
            facts["cwd"] = "denied" if proc.is_denied(exc) else "other"
    facts["liveness"] = procid.liveness(procid.ProcessIdentity.of(1))[0].value
    facts["ids"] = procid.uid_and_tgid(1)
    scan = holders.scan(["/"], with_env=False)
    facts["unreadable_1"] = sorted({u.what for u in scan.unreadable if u.pid == 1})
    facts["complete"] = scan.complete
    return facts


if __name__ == "__main__":
    print(json.dumps(denied_facts()))
