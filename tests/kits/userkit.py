"""Code run as another user (root drops to `nobody` with setpriv): that user runs a copy of
lanewatch and what it imports, made where every user may read it.

The checkout may lie where only its owner can reach (a clone in root's 0700 home, a umask 077
clone): `nobody` could then open neither the venv's interpreter, nor `import lanewatch` from the
editable install, nor a helper script of tests/. So each test process copies, once, the
`lanewatch` package and the distributions it depends on (their installed files, read from the
venv's metadata) into a fresh folder under the system's temp folder, readable by all, and runs
the venv's base interpreter on it (or the system's Python of the same version, where that user
cannot reach the base one: a pyenv in root's home) with `-S`: only the copy and the standard
library are importable, so a module missing from the copy fails loudly instead of coming from
the system's site-packages. The copy is removed when the process exits.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import lanewatch

NOBODY = 65534


def as_user(uid: int, caps: Sequence[str] = ()) -> list[str]:
    """A command prefix that runs as `uid` (no groups), keeping only `caps`; skip if impossible."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv(1) to run a check as another user")
    prefix = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    if caps:
        wanted = ",".join(f"+{c}" for c in caps)
        prefix += [f"--inh-caps={wanted}", f"--ambient-caps={wanted}"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, cwd="/")
    if probe.returncode != 0:
        pytest.skip(f"setpriv cannot drop to uid {uid} here: {probe.stderr.strip()}")
    return prefix


@dataclass(frozen=True, slots=True)
class Readable:
    """A copy of lanewatch and its dependencies in `folder`, readable by every user."""

    folder: Path
    python: str  # a base interpreter that user can start, not the venv's (in the checkout)

    def argv(self, *args: str) -> list[str]:
        """`python -S ARGS` on the copy (the env of `env()` gives it the copy's path)."""
        return [self.python, "-S", *args]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (else this process's environment) with the copy as the only PYTHONPATH."""
        return {**(os.environ if base is None else base), "PYTHONPATH": str(self.folder)}

    def script(self, path: Path) -> Path:
        """A readable copy of a helper script of tests/ (e.g. engine_driver.py)."""
        copy = self.folder / "scripts" / path.name
        if not copy.exists():
            copy.parent.mkdir(exist_ok=True)
            _copy_file(path, copy)
            copy.parent.chmod(0o755)
        return copy


def readable_by(prefix: Sequence[str]) -> Readable:
    """The copy (made once per process), with an interpreter the user of `prefix` can start;
    skips, saying why, where that user can start none (a Python in a private home, and no
    system Python of the same version)."""
    python, refused = _python_for(tuple(prefix))
    if python is None:
        pytest.skip(f"that user can start no Python {_VERSION} to run lanewatch with: {refused}")
    return Readable(_copy(), python)


_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


@functools.cache
def _python_for(prefix: tuple[str, ...]) -> tuple[str | None, str]:
    """The first interpreter of this Python version (this one's base, then the system's: the
    copied .pyc and C extensions need the same version) that the user of `prefix` starts."""
    said = []
    system = [f"{d}/python{_VERSION}" for d in _SYSTEM_BINS]
    bases = [os.path.realpath(sys.executable), *filter(os.path.exists, system)]
    for python in dict.fromkeys(bases):
        probe = subprocess.run(
            [*prefix, python, "-S", "-c", "pass"], capture_output=True, text=True, cwd="/"
        )
        if probe.returncode == 0:
            return python, ""
        said.append(f"{python}: {probe.stderr.strip()[-200:]}")
    return None, "; ".join(said)


_SYSTEM_BINS = ("/usr/bin", "/usr/local/bin")


def python_as(
    prefix: Sequence[str], code: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `code` with the readable copy of lanewatch, as the user of `prefix`, from `/`."""
    return _run_as(prefix, ["-c", textwrap.dedent(code)], env)


def script_as(
    prefix: Sequence[str], script: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a helper script of tests/ (copied where that user can read it) the same way."""
    return _run_as(prefix, [str(readable_by(prefix).script(script)), *args], env)


def _run_as(
    prefix: Sequence[str], args: list[str], env: dict[str, str] | None
) -> subprocess.CompletedProcess[str]:
    copy = readable_by(prefix)
    return subprocess.run(
        [*prefix, *copy.argv(*args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=copy.env({**os.environ, **(env or {})}),
        stdin=subprocess.DEVNULL,
        cwd="/",
    )


@functools.cache
def _copy() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="lanewatch-readable-", dir=shared_temp()))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    package = Path(lanewatch.__file__).parent
    _copy_tree(package, folder / "lanewatch")
    for dist in _dependencies("lanewatch"):
        for name in dist.files or ():
            source = Path(str(dist.locate_file(name)))
            if name.parts[0] != ".." and source.is_file():  # scripts land outside: not needed
                _copy_file(source, folder / name)
    for path in _folders(folder):
        path.chmod(0o755)  # mkdtemp made it 0700; every folder below it too, at any umask
    return folder


def shared_temp() -> str:
    """The system's temp folder (every user may pass through it); TMPDIR here is the test's own
    (under pytest's 0700 basetemp)."""
    for candidate in ("/tmp", "/var/tmp", "/dev/shm"):
        mode = os.stat(candidate).st_mode if os.path.isdir(candidate) else 0
        if mode & stat.S_IXOTH:
            return candidate
    raise AssertionError("no temp folder that every user can pass through")


def _dependencies(name: str) -> Iterator[importlib.metadata.Distribution]:
    """The installed distributions `name` requires, recursively (not `name` itself: an
    editable install's files are a .pth, the package is copied from its source)."""
    seen = {_key(name)}
    todo = [name]
    while todo:
        for line in importlib.metadata.distribution(todo.pop()).requires or ():
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue  # an extra, or not for this Python: not installed for lanewatch
            dep = requirement.name
            if _key(dep) not in seen:
                seen.add(_key(dep))
                todo.append(dep)
                yield importlib.metadata.distribution(dep)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _copy_tree(source: Path, target: Path) -> None:
    for folder, _dirs, files in os.walk(source):
        for file in files:
            path = Path(folder) / file
            _copy_file(path, target / path.relative_to(source))


def _copy_file(source: Path, target: Path) -> None:
    """Contents and times (a copied .pyc stays valid for its copied .py), readable by all."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    target.chmod(0o755 if os.access(source, os.X_OK) else 0o644)


def _folders(top: Path) -> Iterator[Path]:
    yield top
    for folder, dirs, _files in os.walk(top):
        for name in dirs:
            yield Path(folder) / name
