"""The two checkouts the corpus runs in: a git repository and a linked worktree of it, with
the third-party trees unpacked in them (as a project's own files would be) and the small
inputs of the tool lanes (a tox.ini, a wheel to install)."""

from __future__ import annotations

import os
import subprocess
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.corpus.sdists import CLICK, PYTEST, unpack

TINY = "lanewatch_corpus_tiny"
TINY_WHEEL = f"{TINY}-1.0-py3-none-any.whl"
TOX_INI = """\
[tox]
env_list = corpus

[testenv:corpus]
skip_install = true
commands =
    python -c "import pathlib, tempfile; d = tempfile.mkdtemp(); \
pathlib.Path(d, 'out.json').write_text('{}'); print(d)"
"""
IDENTITY = {
    "GIT_AUTHOR_NAME": "corpus",
    "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
    "GIT_COMMITTER_NAME": "corpus",
    "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass(frozen=True)
class Checkouts:
    main: Path  # the repository's own worktree: click's tree, a tox.ini
    linked: Path  # a linked worktree (`git worktree add`): pytest's tree, a wheel

    def of(self, which: str) -> Path:
        return {"main": self.main, "linked": self.linked}[which]


# Python's multiprocessing at work, as test suites and data tools use it: a pool and a process
# pool executor (named semaphores: glibc writes each as /dev/shm/sem.XXXXXX, then links it to
# its name), a lock, a manager, and shared memory (/dev/shm/psm_…) written by a pool worker.
# Every name is the program's own: both lanes of the pair run it at once. A file of the
# checkouts, not `python -c`: the forkserver and spawn start methods import the main module.
MP_SCRIPT = "mpwork.py"
MP_PROGRAM = """
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory


def square(x):
    return x * x


def fill(name, n):
    shm = shared_memory.SharedMemory(name=name)
    shm.buf[:n] = bytes(range(n))
    shm.close()


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        assert sum(pool.map(square, range(200))) == 2646700
    with ProcessPoolExecutor(2) as ex:
        assert sum(ex.map(square, range(200))) == 2646700
    with mp.Manager() as manager:
        shared = manager.dict(done=0)
        lock = mp.Lock()
        with lock:
            shared["done"] += 1
    shm = shared_memory.SharedMemory(create=True, size=1 << 20)
    try:
        worker = mp.Process(target=fill, args=(shm.name, 200))
        worker.start()
        worker.join()
        assert bytes(shm.buf[:200]) == bytes(range(200)), "the worker's bytes"
    finally:
        shm.close()
        shm.unlink()
"""


def git(*args: str, cwd: Path, env: Mapping[str, str]) -> None:
    subprocess.run(
        ["git", *args], cwd=cwd, env={**env, **IDENTITY}, check=True, capture_output=True
    )


def make(base: Path, env: Mapping[str, str]) -> Checkouts:
    """Both checkouts under `base` (which must not be inside another git work tree)."""
    main, linked = base / "main", base / "linked"
    main.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=main, env=env)
    # The unpacked trees stay untracked and out of git's sight (as a venv or a build would).
    exclude = main / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text(f"/{CLICK.folder}/\n/{PYTEST.folder}/\n.tox/\n.venvs/\n/{TINY_WHEEL}\n")
    (main / "README").write_text("corpus\n")
    (main / "tox.ini").write_text(TOX_INI)
    (main / MP_SCRIPT).write_text(MP_PROGRAM)
    git("add", "README", "tox.ini", MP_SCRIPT, cwd=main, env=env)
    git("commit", "-q", "-m", "init", cwd=main, env=env)
    git("worktree", "add", "-q", "-b", "side", str(linked), cwd=main, env=env)
    unpack(CLICK, main)
    unpack(PYTEST, linked)
    write_wheel(linked / TINY_WHEEL)
    return Checkouts(main, linked)


def write_wheel(path: Path) -> None:
    """A minimal pure-Python wheel (one module), written as `pip wheel` would lay it out."""
    info = f"{TINY}-1.0.dist-info"
    files = {
        f"{TINY}/__init__.py": "VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {TINY}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            whl.writestr(name, text)
    os.chmod(path, 0o644)
