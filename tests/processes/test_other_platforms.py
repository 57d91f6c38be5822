"""On a system without /proc or inotify (macOS, the BSDs) lanewatch fails politely: `id`,
`gate` and `hook` work, every other command says in one line what it needs and exits 9.

Both absences are simulated, since the test machine has both:
- no /proc for real: the CLI runs in a user and mount namespace (`unshare -Urm`) with an empty
  tmpfs mounted over /proc, so every /proc read fails as it would where there is none;
- no inotify: a `sitecustomize` on PYTHONPATH makes `ctypes.CDLL(None)` lack the inotify_*
  functions, which is what macOS's libc looks like to watchdog's inotify module (it raises
  UnsupportedLibcError at import, the traceback once seen from `status`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from lanewatch.cli.exits import Exit
from tests.conftest import LANEWATCH

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

NO_INOTIFY = textwrap.dedent(
    """
    import ctypes

    class _LibcWithoutInotify(ctypes.CDLL):
        def __getattr__(self, name):
            if name.startswith("inotify_"):
                raise AttributeError(name)
            return super().__getattr__(name)

    ctypes.CDLL = _LibcWithoutInotify
    """
)


def _can_hide_proc() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs none /proc && test ! -e /proc/self"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


def run(
    args: tuple[str, ...], cwd: Path, *, no_proc: bool = False, env: dict[str, str]
) -> tuple[int, str, str]:
    argv = [*LANEWATCH, *args]
    if no_proc:
        script = 'mount -t tmpfs none /proc && exec "$@"'
        argv = ["unshare", "-Urm", "sh", "-c", script, "sh", *argv]
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout, done.stderr


def check(cwd: Path, env: dict[str, str], lacking: str, *, no_proc: bool = False) -> None:
    def lw(*args: str) -> tuple[int, str, str]:
        return run(args, cwd, no_proc=no_proc, env=env)

    code, out, err = lw("id", "--json")
    assert code == 0 and '"checkout_id"' in out, err
    code, out, err = lw("gate", "tests")
    assert code == 10 and "no receipt" in err  # the gate's own refusal, not a crash
    code, out, err = lw("hook", "install", "--gate", "tests")
    assert code == 0 and "installed pre-push hook" in out, err
    assert lw("hook", "uninstall")[0] == 0
    for args in (("status",), ("record",), ("incidents",), ("dash",), ()):
        code, out, err = lw(*args)
        assert code == Exit.UNSUPPORTED, (args, out, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert lacking in err and "`lanewatch id`, `gate` and `hook` work anywhere" in err
    if no_proc:
        for args in (("run", "--", "true"), ("kill", "x"), ("clear", "--stale", "--yes")):
            code, out, err = lw(*args)
            assert code == Exit.UNSUPPORTED and "Traceback" not in err, (args, err)
            assert "/proc" in err and len(err.strip().splitlines()) == 1, err
    else:  # `run` needs /proc, not inotify: it still works
        assert lw("run", "--", "true")[0] == 0


def test_without_inotify(repo: Path, tmp_path: Path) -> None:
    site = tmp_path / "no-inotify"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_INOTIFY)
    env = {**os.environ, "PYTHONPATH": str(site)}
    check(repo, env, "needs inotify")


def test_without_proc(repo: Path) -> None:
    if not _can_hide_proc():
        pytest.skip("needs unprivileged user namespaces (unshare -Urm)")
    check(repo, dict(os.environ), "needs Linux's /proc", no_proc=True)
