"""The demo's files: its own folder (marked, locked, cleaned), checkouts, orphans, a receipt.

The demo folder is `<state dir>/demo/`. It is only ever deleted when it carries the demo's
marker file; anything else at that path is left alone and the demo refuses to start. The shared
temp folder is made with `tempfile.mkdtemp` and carries a marker naming the demo folder too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from filelock import UnixFileLock

from lanewatch.demo.procs import DemoError, DemoProcess, signal_group
from lanewatch.lanes.checkout import Checkout, find_checkout
from lanewatch.lanes.fsutil import write_atomic
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.roots import state_dir
from lanewatch.lanes.stamp import META_DIR, STAMP_FILE
from lanewatch.linux.procid import ProcessIdentity, hostname, user_name

MARKER = ".lanewatch-demo.json"
TMP_MARKER = ".lanewatch-demo"
KIND = "lanewatch-demo"
REMOVE_PASSES = 5  # rmtree passes over a folder something still writes in


def default_base() -> Path:
    return state_dir() / "demo"


def demo_lock(base: Path) -> UnixFileLock:
    """Held for the demo's whole life; lives beside the folder, which gets deleted."""
    return UnixFileLock(
        str(base.with_name(base.name + ".lock")),
        blocking=False,
        thread_local=False,
        fallback_to_soft=False,
        preserve_lock_file=True,
    )


def read_marker(base: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((base / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("kind") == KIND else None


def save_marker(
    base: Path, owner: ProcessIdentity, shared_tmp: Path | None, procs: list[DemoProcess]
) -> None:
    payload = {
        "kind": KIND,
        "schema": 1,
        "created_at": time.time(),
        "owner": {"pid": owner.pid, "start_ticks": owner.start_ticks, "boot_id": owner.boot_id},
        "shared_tmp": str(shared_tmp) if shared_tmp else None,
        "processes": [p.to_json() for p in procs],
    }
    write_atomic(base / MARKER, (json.dumps(payload, indent=2) + "\n").encode())


def _leftovers(marker: dict[str, Any]) -> list[DemoProcess]:
    found: list[DemoProcess] = []
    for item in marker.get("processes") or []:
        try:
            ident = ProcessIdentity(int(item["pid"]), int(item["start_ticks"]), item["boot_id"])
        except (KeyError, TypeError, ValueError):
            continue
        found.append(DemoProcess(str(item.get("role", "?")), ident))
    return found


def prepare(base: Path) -> int:
    """Make `base` a fresh, empty demo folder; a descriptor of it, by which it is removed again
    (held open, its inode cannot be reused by another folder). Only a folder with our marker
    is ever removed here.

    Processes a crashed earlier demo left behind (it records them in its marker) are killed
    first, each only if its pid still has the recorded start time.
    """
    base.parent.mkdir(parents=True, exist_ok=True)
    if base.is_symlink() or (base.exists() and not base.is_dir()):
        raise DemoError(f"{base} is not a folder the demo made; not touching it")
    if base.exists():
        marker = read_marker(base)
        if marker is None:
            raise DemoError(
                f"{base} exists but is not a lanewatch demo folder (no {MARKER}); "
                "not touching it. Move it away to run the demo."
            )
        for proc in _leftovers(marker):
            signal_group(proc, signal.SIGCONT)
            signal_group(proc, signal.SIGKILL)
        remove_shared_tmp(marker.get("shared_tmp"), base)
        shutil.rmtree(base)
    base.mkdir(mode=0o755)
    return os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)


def remove_demo_folder(base: Path, made: int | None = None) -> bool:
    """Remove the demo folder: the one `prepare` made (`made`, its descriptor), else one with
    our marker; never a symlink. True once it is gone.

    A process still writing in it (the dashboard's engine logs the incidents of the demo's
    ending processes in the root until it stops itself) can add a file while `rmtree` goes,
    which leaves the folder, maybe without its marker: so it is tried again, a few times, by
    the identity read once."""
    try:
        st = os.lstat(base)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if made is not None:
        mine = os.fstat(made)
        ours = (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
    else:
        ours = read_marker(base) is not None
    if not stat.S_ISDIR(st.st_mode) or not ours:
        return False
    for _ in range(REMOVE_PASSES):
        shutil.rmtree(base, ignore_errors=True)
        if not os.path.lexists(base):
            return True
    return False


def make_shared_tmp(parent: Path | None, base: Path) -> Path:
    """A demo-owned folder in shared temp, for the unbound writer."""
    if parent is None:
        # Inside a lane, tempfile would answer the lane's own TMPDIR: use the system's.
        parent = Path("/tmp") if os.environ.get("LANEWATCH_NAMESPACE") else None
    path = Path(tempfile.mkdtemp(prefix="lanewatch-demo-", dir=parent))
    (path / TMP_MARKER).write_text(f"{base}\n", encoding="utf-8")
    return path


def remove_shared_tmp(path: str | os.PathLike[str] | None, base: Path) -> None:
    if not path:
        return
    p = Path(path)
    try:
        owner = (p / TMP_MARKER).read_text(encoding="utf-8").strip()
    except OSError:
        return
    if owner == str(base) and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)


def make_checkout(path: Path) -> tuple[Checkout, bool]:
    """A private checkout at `path`: `git init` when git is there, else a minimal `.git` folder.

    Returns the checkout and whether it is a real git repository.
    """
    path.mkdir(parents=True)
    (path / "README.md").write_text(f"# {path.name}\n\nA demo checkout of lanewatch.\n")
    real = _git_init(path)
    if not real:
        git = path / ".git"
        for sub in ("objects", "refs/heads"):
            (git / sub).mkdir(parents=True, exist_ok=True)
        (git / "HEAD").write_text("ref: refs/heads/main\n")
    checkout = find_checkout(path)
    if checkout is None or checkout.root != os.path.realpath(path):
        raise DemoError(f"the demo checkout {path} is not recognised as a checkout")
    return checkout, real


def _git_init(path: Path) -> bool:
    git = shutil.which("git")
    if git is None:
        return False
    try:
        subprocess.run(
            [git, "init", "-q", str(path)],
            check=True,
            capture_output=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return (path / ".git").is_dir()


def plant_orphan(namespace: Path, *, stamp: bytes | None, age: float, files: int = 4) -> None:
    """A namespace folder with files and no valid stamp (`stamp` None: none at all)."""
    (namespace / "tmp").mkdir(parents=True)
    (namespace / META_DIR).mkdir()
    then = time.time() - age
    paths = [namespace / "tmp" / f"leftover-{i}.bin" for i in range(files)]
    for i, p in enumerate(paths):
        p.write_bytes(os.urandom(512 * (i + 1)))
    if stamp is not None:
        paths.append(namespace / META_DIR / STAMP_FILE)
        paths[-1].write_bytes(stamp)
    for p in paths:
        os.utime(p, (then, then))


def plant_foreign_receipt(namespace: Path, step: str, other: Checkout, lane: str) -> Path:
    """A well-formed passing receipt in `namespace/receipts/` that names another checkout.

    The fields follow `proof/receipts.py` (schema 1); the demo's checkouts have no commits, so
    it carries no HEAD and says why, as a real receipt would.
    """
    now = time.time()
    receipt = {
        "schema": 1,
        "step": step,
        "outcome": "pass",
        "exit_code": 0,
        "checkout_id": other.checkout_id,
        "checkout_path": other.root,
        "lane": lane,
        "namespace": namespace_name(other.checkout_id, lane),
        "git_head": None,
        "git_error": "the demo's checkouts have no commits",
        "dirty": None,
        "dirty_digest": None,
        "changed_during_run": None,
        "pid": os.getpid(),
        "host": hostname(),
        "user": user_name(),
        "started_at": now - 42.0,
        "finished_at": now,
        "command": ["pytest", "-q"],
        "note": "planted by `lanewatch demo`: a receipt from another checkout",
    }
    path = namespace / "receipts" / f"{step}.json"
    with contextlib.suppress(FileExistsError):
        path.parent.mkdir()
    write_atomic(path, (json.dumps(receipt, indent=2, sort_keys=True) + "\n").encode())
    return path
