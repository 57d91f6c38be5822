"""The pinned source distributions the corpus runs, cached outside the repository.

Each is downloaded once with `pip download --no-binary NAME --no-deps` (pip's own index
settings, proxy and certificates) into the cache folder, `$LANEWATCH_CORPUS_CACHE`, else
`$XDG_CACHE_HOME/lanewatch-corpus`, else `~/.cache/lanewatch-corpus`, and its sha256 checked
against the pin every time it is used. Offline with an empty cache, `fetch` raises
`Unavailable` with the reason (the corpus test skips with it); a file whose hash differs is
never used.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path


class Unavailable(RuntimeError):
    """A pinned sdist is neither cached nor downloadable here (offline, index down)."""


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"

    @property
    def folder(self) -> str:
        """The top folder of the archive."""
        return f"{self.name}-{self.version}"


CLICK = Sdist("click", "8.1.8", "ed53c9d8990d83c2a27deae68e4ee337473f6330c040a31d4225c9574d16096a")
PYTEST = Sdist(
    "pytest", "8.4.2", "86c0d0b93306b961d58d62a4db4879f27fe25513d4b969df351abdddb3c30e01"
)
PINS = (CLICK, PYTEST)


def cache_dir() -> Path:
    if explicit := os.environ.get("LANEWATCH_CORPUS_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lanewatch-corpus"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(pin: Sdist, cache: Path | None = None) -> Path:
    """The cached archive of `pin`, downloaded first if missing; its hash checked."""
    cache = cache or cache_dir()
    path = cache / pin.filename
    if path.is_file() and _sha256(path) == pin.sha256:
        return path
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as into:
        args = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", pin.name]
        args += ["--disable-pip-version-check", "-q", "--retries", "1", "--timeout", "30"]
        args += ["-d", into, f"{pin.name}=={pin.version}"]
        try:
            done = subprocess.run(
                args, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise Unavailable(f"pip download {pin.name}=={pin.version} took over 300 s") from None
        got = Path(into) / pin.filename
        if done.returncode != 0 or not got.is_file():
            last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["?"]
            raise Unavailable(
                f"{pin.filename} is not cached in {cache} and pip could not download it "
                f"(offline?): {last[0].strip()}"
            )
        actual = _sha256(got)
        if actual != pin.sha256:
            raise Unavailable(f"{pin.filename}: sha256 {actual}, pinned {pin.sha256}: not used")
        os.replace(got, path)
    return path


def unpack(pin: Sdist, into: Path, cache: Path | None = None) -> Path:
    """`pin`'s tree under `into` (`into/<name>-<version>`), from the checked archive."""
    archive = fetch(pin, cache)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+
            tar.extractall(into, filter="data")
        else:  # the archive's hash is pinned: its members are the ones we checked
            tar.extractall(into)
    return into / pin.folder
