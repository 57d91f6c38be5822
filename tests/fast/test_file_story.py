"""What each writer wrote, version by version (`records/report.file_story`), from a real
evidence store under `tmp_path`."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lanewatch.records.evidence import EvidenceStore
from lanewatch.records.report import Version, file_story, says


def version(data: bytes, t: float, writer: str) -> Version:
    return Version(t, hashlib.sha256(data).hexdigest(), len(data), writer, grade="inferred")


def test_an_emptied_file_is_an_empty_version_not_one_whose_content_was_lost(
    tmp_path: Path,
) -> None:
    """A writer that truncates the file before it writes (the demo's fuzz lanes, `open(p, "w")`)
    leaves an empty version, which the store keeps as b"". The report took b"" for "not kept"
    and then looked at the file on disk, which holds something else: "content not kept"."""
    root = tmp_path / "root"
    root.mkdir()
    texts = [b"", b"written by lane fuzz\ntick 1\n", b"written by lane fuzz-2\ntick 2\n"]
    store = EvidenceStore(str(root))
    assert len(store.put_many([(t, None) for t in texts])) == 3
    shared = tmp_path / "shared.txt"
    shared.write_bytes(texts[-1])
    vs = [version(t, n, f"lane {w}") for n, (t, w) in enumerate(zip(texts, "abc", strict=True))]
    story = file_story([str(root)], str(shared), vs)
    assert [s.kind for s in story.shown] == ["content", "diff", "diff"], story.shown
    assert says(story.shown[0]) == "Written by lane a: empty."
    assert "+written by lane fuzz" in story.shown[1].lines
    assert says(story.shown[1]) == "Then lane b, changing it:"
