"""A shared-file incident's contents without the kernel: while lanes' processes hold
a file in shared temp open for writing, the engine reads it (a small regular text file, the very
file a holder has open) and keeps each new content in the holder's root, graded inferred; with
two lanes holding it, both are named and neither is taken as the writer. A FIFO is never opened
and a symlink never followed. Real lanes (`lanewatch run --fence none`), a real engine with
kernel attribution off (what a normal user gets), the real evidence store and write log."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lanewatch.engine.heldversions import HeldVersions, Holder, read_held
from lanewatch.model.holdings import Holding
from lanewatch.model.views import Incident
from lanewatch.records import writes
from lanewatch.records.report import Shown, Version, build_report, says, to_json, to_markdown
from tests.conftest import wait_for
from tests.kits.attributionkit import shared_temp_file
from tests.kits.enginekit import running, start_lane

FIRST, SECOND = '{"receipt": "from A"}\n', '{"receipt": "from B"}\n'


def hold_and_write(content: str, target: Path) -> tuple[str, ...]:
    """A lane command: hold `target` open for appending (fd 3, kept by `sleep`), then rewrite
    it whole with `content` through another descriptor, as most tools write a file."""
    script = 'exec 3>>"$2"; printf %s "$1" > "$2"; exec sleep 60'
    return ("sh", "-c", script, "sh", content, str(target))


def shared_incident(incidents: dict[str, Incident], path: Path, lanes: set[str]) -> Incident | None:
    for inc in incidents.values():
        named = {w.get("lane") for w in inc.writers}
        paths = {str(getattr(e, "path", "")) for e in inc.evidence}
        if inc.kind == "shared-file" and str(path) in paths and lanes <= named:
            return inc
    return None


@pytest.mark.unprivileged
def test_two_lanes_holding_a_shared_file_give_both_contents_and_the_diff_inferred(
    repo: Path, root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    roots = [str(root)]
    with (
        shared_temp_file() as shared,
        running([root], probe_interval=0.3, attribution=False) as (engine, rec),
    ):
        assert engine.attribution == "inferred"
        start_lane(procs, repo, root, "A", hold_and_write(FIRST, shared), fence="none")
        wait_for(lambda: writes.history(roots, str(shared)), 30, what="A's version kept")
        start_lane(procs, repo, root, "B", hold_and_write(SECOND, shared), fence="none")

        def kept() -> list[writes.WriteEntry]:
            return writes.history(roots, str(shared))

        wait_for(lambda: len(kept()) >= 2, 30, what="B's version kept")

        def both() -> Incident | None:
            with rec.lock:
                return shared_incident(dict(rec.picture.incidents), shared, {"A", "B"})

        wait_for(lambda: both() is not None, 30, what="the shared-file incident of A and B")
        inc = both()
        assert inc is not None
        report = build_report(roots, inc)

    first, second = kept()[:2]
    assert all(e.how == writes.HELD_READ and not e.identified for e in (first, second))
    # A alone held it when its content was read: A, inferred.
    assert first.lane == "A" and len(first.held_by) == 1
    # Both held it when B's content was read: both named, neither taken as the writer.
    assert second.lane is None and len(second.held_by) == 2
    assert {h.split(",")[0] for h in second.held_by} == {"lane A", "lane B"}

    text = to_markdown(report)
    assert f"\n{FIRST.strip()}\n" in text  # A's content whole
    assert f"-{FIRST.strip()}" in text and f"+{SECOND.strip()}" in text  # then the diff
    assert "Written by lane A, pid" in text and "read while it held the file" in text
    assert " or lane " in text and "read while each held the file" in text
    assert "No write of these paths was recorded" not in text
    (story,) = to_json(report)["files"]
    assert [v["grade"] for v in story["versions"]] == ["inferred", "inferred"]
    assert [v["shown"] for v in story["versions"]] == ["content", "diff"]


@pytest.fixture
def holder(procs: list[subprocess.Popen[bytes]]):  # type: ignore[no-untyped-def]
    """A real process that opens a path (O_RDWR: a FIFO opens without waiting) and holds it
    as fd 3; returns the `Holding` the prober would report for it."""

    def hold(path: Path) -> Holding:
        code = "import os,sys,time; os.dup2(os.open(sys.argv[1], os.O_RDWR), 3); time.sleep(60)"
        p = subprocess.Popen([sys.executable, "-c", code, str(path)], pass_fds=())
        procs.append(p)

        def holds() -> bool:  # fd 3 may be another file while the interpreter starts
            try:
                return os.readlink(f"/proc/{p.pid}/fd/3") == str(path)
            except OSError:
                return False

        wait_for(holds, 20, what="held")
        return Holding(
            pid=p.pid, start_ticks=0, path=str(path), kind="fd", access="readwrite",
            deleted=False, directory=False, lane_env="A", namespace_env=None,
            lineage=(p.pid,), pgid=p.pid, command=("holder",), fd=3,
        )  # fmt: skip

    return hold


@pytest.mark.unprivileged
def test_a_held_fifo_is_never_opened_and_a_symlink_never_followed(
    tmp_path: Path, holder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    fifo = tmp_path / "shared.fifo"
    os.mkfifo(fifo)
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    link = tmp_path / "link.txt"
    link.symlink_to(secret)
    held_fifo = holder(fifo)
    held_secret = holder(secret)
    # The holder has the secret open; its name in shared temp is now a symlink to it.
    held_link = replace(held_secret, path=str(link))
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.fsdecode(path))  # a spy: every open still happens, for real
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    assert read_held(str(fifo), [held_fifo], settle=0.0) is None
    assert read_held(str(link), [held_link], settle=0.0) is None
    versions = HeldVersions(every=0.0)
    ns = str(root / "ns")
    versions.seen(
        {str(fifo): [Holder("A", ns, held_fifo)], str(link): [Holder("A", ns, held_link)]},
        {ns: str(root)},
    )
    monkeypatch.undo()
    assert not [p for p in opened if p.endswith(("shared.fifo", "link.txt", "secret.txt"))]
    assert versions.kept == 0 and writes.entries([str(root)]) == []
    # The same holder's regular file is read: the check above is not vacuous.
    plain = tmp_path / "plain.txt"
    plain.write_text("hello\n")
    held_plain = holder(plain)
    assert read_held(str(plain), [held_plain], settle=0.0) == b"hello\n"
    # Modified within the settle time: maybe mid-rewrite (truncated), read at a later probe.
    assert read_held(str(plain), [held_plain], settle=60.0) is None


def test_a_version_whose_content_was_not_kept_names_both_ways_contents_are_kept() -> None:
    """Without root, held versions keep text contents too: the sentence for a version with no
    content must not say only kernel attribution keeps them."""
    shown = Shown(Version(time=0.0, sha256="ab" * 32, size=12, writer="lane a"), "not-kept")
    said = says(shown)
    assert said.startswith("lane a wrote 12 bytes: content not kept"), said
    assert "kernel attribution" in said and "text read while one lane held it" in said, said


def test_a_content_written_after_the_holders_were_sampled_waits_for_a_later_probe(
    tmp_path: Path, holder
) -> None:
    """A probe samples who holds the file, then the engine reads it. A process that opened the
    file and wrote it between the two is not among the holders: naming those would give its
    content to another lane (seen under load: B's content kept as held by lane A alone)."""
    plain = tmp_path / "plain.txt"
    plain.write_text("hello\n")
    held = holder(plain)
    mtime = plain.stat().st_mtime - 10.0  # written a while ago: past the settle time
    os.utime(plain, (mtime, mtime))
    # Holders sampled before the write: the content is left for a later probe.
    assert read_held(str(plain), [held], settle=0.0, sampled_at=mtime - 1.0) is None
    assert read_held(str(plain), [held], settle=0.0, sampled_at=mtime) is None
    # Sampled after it: read, as before.
    assert read_held(str(plain), [held], settle=0.0, sampled_at=mtime + 1.0) == b"hello\n"
    root = tmp_path / "root"
    root.mkdir()
    ns = str(root / "ns")
    versions = HeldVersions(every=0.0)
    versions.seen({str(plain): [Holder("A", ns, held)]}, {ns: str(root)}, at=mtime - 1.0)
    assert versions.kept == 0 and writes.entries([str(root)]) == []
    versions.seen({str(plain): [Holder("A", ns, held)]}, {ns: str(root)}, at=mtime + 1.0)
    assert versions.kept == 1
