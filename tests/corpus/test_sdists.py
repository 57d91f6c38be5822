"""The corpus's sdist cache (tests/corpus/sdists.py): a cached archive is used only when its
sha256 is the pin's; offline with nothing good cached, the reason is said, nothing is used."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from tests.corpus.sdists import Sdist, Unavailable, fetch, unpack

pytestmark = pytest.mark.corpus  # tests/corpus: run apart as a CI job


def archive(path: Path) -> bytes:
    """A small sdist-shaped .tar.gz (one top folder, one file) written at `path`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"print('hi')\n"
        info = tarfile.TarInfo("tiny-1.0/setup.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip pointed at an index nothing listens on: a download fails at once."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_INDEX", "")


def test_a_cached_archive_with_the_pinned_hash_is_used_without_the_index(
    tmp_path: Path, offline: None
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    body = archive(cache / "tiny-1.0.tar.gz")
    pin = Sdist("tiny", "1.0", hashlib.sha256(body).hexdigest())
    assert fetch(pin, cache) == cache / "tiny-1.0.tar.gz"
    tree = unpack(pin, tmp_path / "into", cache)
    assert (tree / "setup.py").read_text() == "print('hi')\n"


def test_offline_with_a_wrong_archive_cached_says_why_and_uses_nothing(
    tmp_path: Path, offline: None
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    archive(cache / "tiny-1.0.tar.gz")
    pin = Sdist("tiny", "1.0", "0" * 64)
    with pytest.raises(Unavailable, match=r"tiny-1\.0\.tar\.gz is not cached in .*offline"):
        fetch(pin, cache)
    with pytest.raises(Unavailable):
        unpack(pin, tmp_path / "into", cache)
    assert not (tmp_path / "into").exists()
