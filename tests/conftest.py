"""Fixtures shared by every test. No test writes to a fixed shared path: the state dir, the
default root and TMPDIR all point under pytest's tmp_path."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.kits import terminal_signals
from tests.kits.groups import Groups
from tests.kits.portkit import lease_window

# The suite's own knobs (.ci/unprivileged, tests/tui/test_churn.py, the flake hunt's seed and
# log: tests/flakes_plugin.py reads them after this file ran): kept from the environment.
KNOBS = {
    "LANEWATCH_TIER",
    "LANEWATCH_TIER_NEIGHBOUR",
    "LANEWATCH_CHURN_SECONDS",
    "LANEWATCH_FLAKES_SEED",
    "LANEWATCH_FLAKES_LOG",
}


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("LANEWATCH_TIER") == "unprivileged":
        check_unprivileged_tier()
    # What the shell that runs the suite says to lanewatch (a lane's variables when the suite
    # runs in one, the user's hosts, a forced way to fence) is not a test's: with
    # LANEWATCH_FENCE_WITH=bwrap the fence tests judged bwrap, with LANEWATCH_SSH the hosts
    # tests the user's hosts. A test sets what it needs (isolated_state, sshkit).
    for name in [n for n in os.environ if n.lstrip("_").startswith("LANEWATCH_")]:
        if name not in KNOBS:
            del os.environ[name]
    # A suite started by `nohup`, or with `&` in a script, would start its lanes with SIGHUP,
    # SIGINT and SIGQUIT ignored: tests/kits/terminal_signals.py.
    terminal_signals.restore()


# Which tests are fast: they start no process, drive no TUI and run no benchmark. The folder
# says it (pyproject.toml registers the markers): every test in tests/fast/ is marked `fast`
# (`pytest -m fast`), in tests/tui/ `tui`, the benchmark's smoke run `bench`, and every other
# `processes`, so a new test is never wrongly fast. A few files of tests/processes/ hold fast
# tests beside the ones that start a process: MIXED names each file with the tests in it that
# do start one, and the rest of it is fast. `_fast_tests_start_no_process` holds both to the
# truth: a fast test that starts one fails.
MIXED = {
    "test_attribution_parts.py": {"test_a_real_process_that_exited_is_proven_by_its_start"},
    "test_classify.py": {
        "test_permission_error_reading_proc_is_never_stale",
        "test_sigstopped_owner_is_hung_not_stale",
        "test_stamp_from_another_host_ignores_local_pids",
        "test_stamp_of_a_dead_pid_is_stale",
    },
    "test_incidents.py": {
        "test_foreign_receipt",
        "test_foreign_writer_and_unbound_writer",
        "test_normal_lanes_raise_no_incident",
        "test_refused_claim_from_the_ledger",
        "test_takeover_seen_by_the_live_engine",
    },
    "test_mounts.py": {"test_real_bind_mount_on_the_same_filesystem"},
    "test_names.py": {"test_sanitise_alike_lanes_claim_distinct_folders"},
}
BENCH = {"test_bench_smoke.py"}
# The files that put each runtime dependency to work for real, marked `floors`: .ci/lowest runs
# them beside the fast tests (`-m "fast or floors"`) with every dependency at its floor. The fast
# tests claim no lane, so alone they would not see a bad filelock: filelock in test_lane,
# watchdog in test_tail, psutil/rich/click in test_status_cli and test_run_cli,
# prometheus_client in test_metrics, Textual in tui/test_core.
FLOORS = {
    "processes/test_lane.py",
    "processes/test_tail.py",
    "processes/test_status_cli.py",
    "processes/test_run_cli.py",
    "processes/test_metrics.py",
    "tui/test_core.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path
        name = getattr(item, "originalname", item.name)
        folder = path.parent.name
        if f"{folder}/{path.name}" in FLOORS:
            item.add_marker(pytest.mark.floors)
        if folder == "tui":
            item.add_marker(pytest.mark.tui)
        elif path.name in BENCH:
            item.add_marker(pytest.mark.bench)
        elif folder == "fast" or (path.name in MIXED and name not in MIXED[path.name]):
            item.add_marker(pytest.mark.fast)
        else:
            item.add_marker(pytest.mark.processes)


@pytest.fixture(autouse=True)
def _no_terminal_size_in_the_environment() -> Iterator[None]:
    """The CLI honours $COLUMNS when piped; a size left in the environment (by a shell, or by
    a library during another test of this worker) would squeeze the tables tests read. Both
    layers: GNU readline (imported by pdb, among others) sets them with C `setenv`, which
    `os.environ` never sees but a child process inherits."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        os.unsetenv(name)
    yield
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
        os.unsetenv(name)


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if request.node.get_closest_marker("fast") is None:
        return

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError(
            f"{request.node.nodeid} is marked fast but starts a process: move it to "
            "tests/processes/, or name it in MIXED (tests/conftest.py) among the tests of its "
            "module that do"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)


def check_unprivileged_tier() -> None:
    """The non-root tier (.ci/unprivileged) tests what it claims only as a normal user with root's
    and another user's processes alive beside it; refuse to run it otherwise."""
    me = os.geteuid()
    if me == 0:
        raise pytest.UsageError("LANEWATCH_TIER=unprivileged, but the tests run as root")
    uids: set[int] = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                uids.add(entry.stat().st_uid)
    neighbour = os.environ.get("LANEWATCH_TIER_NEIGHBOUR", "")
    wanted = {0: "root", pwd.getpwnam(neighbour).pw_uid if neighbour else -1: neighbour}
    missing = [name or "another user" for uid, name in wanted.items() if uid not in uids]
    if missing:
        raise pytest.UsageError(f"the unprivileged tier needs processes of {missing} running")


# One lock for this run's mount table, shared by its xdist workers (a file in the run's
# folder): held by a test that bind-mounts in our mount namespace and by one that needs every
# filesystem mounted once (kernel ignore marks are placed only then: kernel/fanignore.py), so
# neither sees the other's mounts. A second pytest on the machine is not covered.
_MOUNT_LOCK: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _mount_lock_path(tmp_path_factory: pytest.TempPathFactory) -> None:
    _MOUNT_LOCK[:] = [tmp_path_factory.getbasetemp().parent / "mount-table.lock"]


@contextlib.contextmanager
def mount_table() -> Iterator[None]:
    """This run's mount table to ourselves for the block (see `_MOUNT_LOCK`)."""
    from filelock import FileLock

    with FileLock(_MOUNT_LOCK[0]):
        yield


@pytest.fixture
def one_mount_table() -> Iterator[None]:
    with mount_table():
        yield


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("LANEWATCH_STATE_DIR", str(state))
    # The system service's folder too: a service of the machine must not show in a test.
    monkeypatch.setenv("LANEWATCH_SYSTEM_STATE_DIR", str(tmp_path / "system-state"))
    # Port leases (lanes/leases.py) too: the machine-wide folder is not a test's to write.
    monkeypatch.setenv("LANEWATCH_PORTS_DIR", str(tmp_path / "ports"))
    # And a window of the lease range of its own (`portkit.lease_window`).
    monkeypatch.setenv("LANEWATCH_PORT_RANGE", lease_window())
    monkeypatch.delenv("LANEWATCH_ROOT", raising=False)
    for var in (
        "LANEWATCH_LANE",
        "LANEWATCH_NAMESPACE",
        "LANEWATCH_CHECKOUT",
        "LANEWATCH_HEARTBEAT",
    ):
        monkeypatch.delenv(var, raising=False)
    # Child processes (git, `lanewatch run`, helpers) get a private TMPDIR too.
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    for var in ("TMPDIR", "TMP", "TEMP"):
        monkeypatch.setenv(var, str(tmp))
    return state


def git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "init", cwd=path)
    return path


@pytest.fixture
def worktrees(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two worktrees of one repository: the main one and a linked one."""
    other = tmp_path / "repo-wt"
    git("worktree", "add", "-q", str(other), "-b", "side", cwd=repo)
    return repo, other


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def own_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of this test's own at tmp_path/fs, unmounted after; skips where none can be
    mounted (root only). A fanotify filesystem mark sees every write to its filesystem, by
    anyone: on the machine's one filesystem another test's flood (the other xdist worker's,
    another user's suite) overflows this test's queue, and this test's flood theirs. A test
    that floods the queue, or needs every one of its events, does it on a filesystem of its own.
    """
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        pytest.skip("mounting a tmpfs of the test's own needs root and mount(8)")
    point = tmp_path / "fs"
    point.mkdir()
    options = "size=256m,mode=0755"
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", options, "lanewatch-test", str(point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "--lazy", str(point)], check=True)


def _give_up(timeout: float, what: object) -> NoReturn:
    raise AssertionError(f"condition not met within {timeout}s: {what}")


def wait_for(
    condition: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Poll `condition` until truthy (returned) or fail after `timeout` seconds, naming `what`
    (else the condition). The one waiting helper: never a fixed sleep in a test."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            _give_up(timeout, what or condition)
        time.sleep(interval)
    return value


async def until(
    pilot: Any,
    condition: Callable[[], object],
    timeout: float = 15.0,
    what: str = "",
    interval: float | None = 0.02,
) -> None:
    """`wait_for` for a Textual Pilot: the app runs (`pilot.pause(interval)`; None waits for
    pending messages only) until `condition()` is truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            _give_up(timeout, what or condition)
        await pilot.pause(interval)


# Seconds a `lanewatch run` may take to start its lane: a Python start and a stamp, which on a
# machine at load 30 to 70 took over 20 s (the unprivileged tier beside three CI runs).
LANE_START = 60.0
LANEWATCH = [sys.executable, "-m", "lanewatch"]

# Installed pytest plugins that no inner session (a test's own pytest: the plugin's, the audit's
# and the CI recipe's sample suites) uses. Each inner pytest process, and each of its xdist
# workers, would import them (hypothesis above all): about 2 s of CPU a process, dozens of
# processes in the suite. The sessions keep every other plugin, lanewatch's and xdist's among them.
UNUSED_INNER_PLUGINS = ("hypothesispytest", "textual-snapshot", "syrupy")


def inner_pytest_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (else this process's) for an inner pytest session: PYTEST_ADDOPTS (which its xdist
    workers and the lanes it runs in inherit) blocks UNUSED_INNER_PLUGINS."""
    out = dict(os.environ if env is None else env)
    blocked = " ".join(f"-p no:{name}" for name in UNUSED_INNER_PLUGINS)
    out["PYTEST_ADDOPTS"] = f"{out.get('PYTEST_ADDOPTS', '')} {blocked}".strip()
    return out


def plant_special(path: Path, kind: str) -> None:
    """A FIFO, a folder, a socket or (root only, else skip) a character device at `path`,
    replacing a file there: what a neighbour can leave where lanewatch expects a file."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        # Bound through the folder's descriptor: tmp_path can be longer than a socket path
        # may be (108 bytes); the socket file stays after the close.
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.bind(f"/proc/self/fd/{folder}/{path.name}")
        finally:
            os.close(folder)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("only root can make a device node")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    else:
        raise AssertionError(f"unknown kind {kind!r}")


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; all are killed and reaped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    # SIGTERM first: a `lanewatch run` forwards it to CMD, which runs in a process group of its
    # own that a SIGKILL of the runner's group would leave running (for as long as it sleeps).
    running = [p for p in started if p.poll() is None]
    for p in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 1  # a runner forwarding to a plain CMD ends in ~50 ms
    for p in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
    for p in started:
        if p.poll() is None:
            try:
                os.killpg(p.pid, 9)
            except (ProcessLookupError, PermissionError):
                p.kill()
        p.wait(timeout=10)


Spawn = Callable[..., "subprocess.Popen[bytes]"]


@pytest.fixture
def spawn(procs: list[subprocess.Popen[bytes]]) -> Spawn:
    """Start a process in its own process group, killed (group and all) and reaped at the end."""

    def start(args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("process_group", 0)
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        p: subprocess.Popen[bytes] = subprocess.Popen(list(args), **kwargs)
        procs.append(p)
        return p

    return start


@pytest.fixture
def groups() -> Iterator[Groups]:
    """Process groups a test learns of (the CMD group of `lanewatch run`): SIGKILLed at the
    end while still theirs (tests/kits/groups.py: a group not our child's can lose its number)."""
    pgids = Groups()
    yield pgids
    pgids.kill()


_PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2 :].split()[1])


class Subreaper:
    """This test process adopts orphaned descendants, so a test can kill and reap them."""

    def __init__(self) -> None:
        self.adopted: list[int] = []

    def adopt(self, pid: int) -> None:
        """Remember an orphan to kill and reap at the end (if the test did not)."""
        self.adopted.append(pid)

    def kill_and_reap(self, pid: int, timeout: float = 10.0) -> None:
        """SIGKILL `pid` (a descendant that was reparented to us) and reap it."""
        deadline = time.monotonic() + timeout
        if _parent_of(pid) != os.getpid():
            return  # not (or no longer) our child: never signal a pid we cannot vouch for
        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return  # not ours (already reaped, or adopted elsewhere)
            if done:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"pid {pid} was not reaped within {timeout}s")
            time.sleep(0.01)


@pytest.fixture
def subreaper() -> Iterator[Subreaper]:
    if not _set_subreaper(True):
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) is not available")
    reaper = Subreaper()
    try:
        yield reaper
    finally:
        for pid in reaper.adopted:
            reaper.kill_and_reap(pid)
        _set_subreaper(False)


def lanewatch(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    """Run the real `lanewatch` CLI to completion (for commands that start no CMD group)."""
    return subprocess.run(
        [*LANEWATCH, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
