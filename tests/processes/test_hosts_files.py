"""A far lane's files: `lanewatch files KEY --json` lists one namespace
there, confined to it and following nothing; `hosts/farfiles.listing` fetches it through a real
sshd on loopback (tests/kits/sshkit.py) and says plainly, with the command to run there, when the
host is unreachable, has no lanewatch, or has one too old to answer."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lanewatch.hosts import farfiles as far_files
from lanewatch.hosts.config import Host
from lanewatch.hosts.farviews import remote_key
from tests.conftest import lanewatch
from tests.kits.contractkit import parsed
from tests.kits.hostile import FILE_NAMES, check_text
from tests.kits.sshkit import SshServer, far_command, far_lane
from tests.kits.sshkit import ssh_server as ssh_server  # a fixture

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def namespace(root: Path) -> Path:
    """A namespace holding hostile names, a nested file, a FIFO and symlinks that lead out."""
    ns = root / "ns-a"
    (ns / "deep" / "er").mkdir(parents=True)
    (ns / "deep" / "er" / "bottom.txt").write_text("bottom")
    for raw in FILE_NAMES:
        (ns / os.fsdecode(raw)).write_bytes(b"hostile")
    os.mkfifo(ns / "pipe")  # listed, never opened: no hang
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the lane's")
    (ns / "out").symlink_to(outside)  # a link to a folder outside: listed, not entered
    return ns


def test_files_lists_one_namespace_confined_and_following_nothing(
    tmp_path: Path, isolated_state: Path
) -> None:
    root = tmp_path / "root"
    ns = namespace(root)
    data = parsed(
        "files", lanewatch("files", str(ns), "--root", str(root), "--json", cwd=tmp_path).stdout
    )
    by_name = {f["name"]: f for f in data["files"]}
    names = {os.fsencode(n) for n in by_name}
    assert set(FILE_NAMES) <= names  # the names exactly, undecodable bytes too
    assert {"deep/er/bottom.txt", "pipe", "out"} <= set(by_name)
    assert not any("secret" in n for n in by_name)  # the link out was not entered
    assert by_name["out"]["kind"] == "link" and by_name["out"]["target"] == str(
        tmp_path / "outside"
    )
    assert by_name["pipe"]["kind"] == "fifo"
    assert all(not n.startswith("/") and ".." not in n.split("/") for n in by_name)
    assert data["key"] == str(ns) and data["truncated"] is False and data["error"] is None
    mtimes = [f["mtime"] for f in data["files"]]
    assert mtimes == sorted(mtimes, reverse=True)  # newest first

    # --limit keeps the newest and says more were not listed.
    capped = parsed(
        "files",
        lanewatch(
            "files", str(ns), "--root", str(root), "--json", "--limit", "2", cwd=tmp_path
        ).stdout,
    )
    assert [f["name"] for f in capped["files"]] == [f["name"] for f in data["files"][:2]]
    assert capped["truncated"] is True and capped["seen"] == len(data["files"])

    # The human listing is inert text: every hostile name shown, none raw.
    human = lanewatch("files", str(ns), "--root", str(root), cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    text = check_text(human.stdout.encode("utf-8", "surrogateescape"), "files")
    assert "f\\x1b[2JWIPED.txt" in text and "bottom.txt" in text


def test_files_refuses_what_is_not_a_namespace(tmp_path: Path, isolated_state: Path) -> None:
    root = tmp_path / "root"
    ns = namespace(root)
    (root / "link-ns").symlink_to(ns)  # a namespace's name that leads elsewhere
    r = str(root)
    refused = lanewatch("files", str(root / "link-ns"), "--root", r, "--json", cwd=tmp_path)
    assert refused.returncode == 3 and "is a symlink: not listed" in refused.stderr
    assert refused.stdout == ""
    inner = lanewatch("files", str(ns / "deep"), "--root", r, "--json", cwd=tmp_path)
    assert inner.returncode == 2 and "not directly inside the root" in inner.stderr
    elsewhere = lanewatch("files", str(tmp_path), "--root", r, "--json", cwd=tmp_path)
    assert elsewhere.returncode == 2, elsewhere.stderr
    gone = lanewatch("files", str(root / "no-such"), "--root", r, "--json", cwd=tmp_path)
    assert gone.returncode == 8 and "no namespace" in gone.stderr


def test_a_far_lanes_files_come_through_ssh_and_degrade_when_the_host_cannot_answer(
    ssh_server: SshServer,
    repo: Path,
    tmp_path: Path,
    isolated_state: Path,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    far_home = tmp_path / "farhome"
    _, far_ns = far_lane(procs, repo, far_home, "far-lane")
    for raw in FILE_NAMES:
        (far_ns / os.fsdecode(raw)).write_bytes(b"far")
    (far_ns / "made-there.txt").write_text("far bytes")
    host = Host("far", "far", far_command(far_home))
    key = remote_key("far", str(far_ns))

    listed = far_files.listing(host, str(far_ns), key)
    assert listed.host == "far" and listed.elsewhere is None and listed.error is None
    assert listed.key == key
    names = {f.rel for f in listed.files}
    assert "made-there.txt" in names and ".lanewatch/owner.json" in names
    assert set(FILE_NAMES) <= {os.fsencode(n) for n in names}  # through ssh, byte for byte
    recent = far_files.listing(host, str(far_ns), key, limit=3, no_meta=True)
    assert len(recent.files) == 3 and recent.truncated
    assert not any(f.rel.startswith(".lanewatch/") for f in recent.files)

    # A far lanewatch from before `files`: what an older click says for an unknown command.
    old = far_home / "old-lanewatch"
    old.write_text(
        '#!/bin/sh\nif [ "$1" = files ]; then\n'
        "  echo \"Error: No such command 'files'.\" >&2; exit 2\nfi\n"
        f'exec {far_command(far_home)} "$@"\n'
    )
    old.chmod(0o755)
    too_old = far_files.listing(Host("old", "far", str(old)), str(far_ns), key)
    assert too_old.files == () and too_old.host is None and too_old.elsewhere is not None
    assert too_old.elsewhere.startswith("The lanewatch on host old is too old to list")
    assert too_old.elsewhere.endswith(f"List them there: ssh far 'ls -lAtR {far_ns}'")

    bare = far_files.listing(Host("bare", "far", str(tmp_path / "nowhere")), str(far_ns), key)
    assert bare.elsewhere is not None and "No lanewatch on host bare (" in bare.elsewhere

    ssh_server.stop()  # the host goes away
    lost = far_files.listing(host, str(far_ns), key)
    assert lost.files == () and lost.host is None and lost.elsewhere is not None
    assert lost.elsewhere.startswith("Host far is unreachable (")
    assert lost.elsewhere.endswith(f"List them there: ssh far 'ls -lAtR {far_ns}'")


def test_a_far_answer_is_not_trusted(
    ssh_server: SshServer, tmp_path: Path, isolated_state: Path
) -> None:
    """A far side that lies (a compromised host; no real lanewatch prints this, so a script
    stands in for it): names that climb out, are absolute or hold a NUL are dropped, wrong
    types are dropped or read as unknown, and no more than the limit is kept."""
    entries = [
        {"name": "../../etc/passwd", "kind": "file", "size": 1, "mtime": 1.0},
        {"name": "/etc/shadow", "kind": "file", "size": 1, "mtime": 1.0},
        {"name": "a/./b", "kind": "file", "size": 1, "mtime": 1.0},
        {"name": "nul\u0000x", "kind": "file", "size": 1, "mtime": 1.0},
        {"name": "size-not-int", "kind": "file", "size": "1", "mtime": 1.0},
        {"name": "[red]x[/]\u001b]0;OWNED\u0007", "kind": "weird", "size": 2, "mtime": 2.0},
        *({"name": f"n{i}", "kind": "file", "size": i, "mtime": 0.5} for i in range(5)),
    ]
    payload = json.dumps({"schema": "lanewatch.files/1", "files": entries, "truncated": False})
    script = tmp_path / "liar"
    (tmp_path / "liar.json").write_text(payload)
    script.write_text(f"#!/bin/sh\ncat {tmp_path / 'liar.json'}\n")
    script.chmod(0o755)
    got = far_files.listing(Host("liar", "far", str(script)), "/x", "liar:/x", limit=3)
    assert [f.rel for f in got.files] == ["[red]x[/]\x1b]0;OWNED\x07", "n0", "n1"]
    assert got.files[0].kind == "other"  # an unknown kind: never opened as a file
    assert got.truncated and got.host == "liar"  # more than asked for: kept to the limit
