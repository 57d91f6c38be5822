"""The fence: every lane's /tmp is its own (runner/fence.py), as root and as a normal user.

Real `lanewatch run` processes in real git worktrees. The script writes a *fixed* name in /tmp,
as careless tools do: inside the fence that is the lane's own folder, so the test writes
nothing in the real /tmp; with `--fence none` it is pointed at a folder of this test instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.lanes.lane import locate
from lanewatch.lanes.stamp import OwnerState, parse_stamp, read_stamp
from lanewatch.linux.mountinfo import parse_mountinfo
from lanewatch.linux.mountview import translate
from lanewatch.runner import fence as fences
from tests.conftest import LANEWATCH, Spawn, git, lanewatch, wait_for

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# Writes its token to a fixed name, reads it back again and again, and counts every read that
# was not its own; both lanes run until each has seen the other start (a shared barrier).
SAME_NAME = textwrap.dedent(
    """
    import json, os, sys, time
    path, me, barrier, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seen_other = 0
    def once():
        global seen_other
        with open(path, "w") as f:
            f.write(me)
        for _ in range(3):
            with open(path) as f:
                if f.read() != me:
                    seen_other += 1
    once()
    open(os.path.join(barrier, me), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        once()
    for _ in range(rounds):
        once()
    print(json.dumps({"me": me, "seen_other": seen_other}))
    """
)

FENCED = [m for m in ("kernel", "bwrap") if m == "kernel" or shutil.which("bwrap")]


def both_lanes(
    spawn: Spawn,
    worktrees: tuple[Path, Path],
    tmp_path: Path,
    path: str,
    *options: str,
    env: dict[str, str] | None = None,
) -> list[dict[str, object]]:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    runs = []
    for i, wt in enumerate(worktrees):
        cmd = [sys.executable, "-c", SAME_NAME, path, f"lane-{i}", str(barrier), "200"]
        args = [*LANEWATCH, "run", "--lane", "agent", *options, "--", *cmd]
        runs.append(spawn(args, cwd=wt, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    out = []
    for proc in runs:
        stdout, stderr = proc.communicate(timeout=90)
        assert proc.returncode == 0, stderr.decode()
        out.append(json.loads(stdout))
    return out


def fenced_env(how: str) -> dict[str, str]:
    return {**os.environ, fences.ENV_FENCE_WITH: how}


@pytest.mark.parametrize("how", FENCED)
def test_two_lanes_writing_one_fixed_name_in_tmp_never_read_each_other(
    spawn: Spawn, worktrees: tuple[Path, Path], tmp_path: Path, how: str
) -> None:
    if fences.kernel_refusal() is not None and how == "kernel":
        pytest.skip(f"the kernel refuses here: {fences.kernel_refusal()}")
    seen = both_lanes(spawn, worktrees, tmp_path, "/tmp/fixed.json", env=fenced_env(how))
    assert [s["seen_other"] for s in seen] == [0, 0]
    for i, wt in enumerate(worktrees):
        ns = locate("agent", checkout=wt).namespace
        assert (ns / "tmp" / "fixed.json").read_text() == f"lane-{i}"  # where it really went
        stamp = read_stamp(ns).stamp
        assert stamp is not None and stamp.state is OwnerState.RELEASED
        assert stamp.fence == how and stamp.fence_private == ["/tmp", "/var/tmp"]


def test_unfenced_lanes_writing_one_fixed_name_clobber_each_other(
    spawn: Spawn, worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    shared = tmp_path / "shared-tmp"  # stands for /tmp: never the real one
    shared.mkdir()
    path = str(shared / "fixed.json")
    seen = both_lanes(spawn, worktrees, tmp_path, path, "--fence", "none")
    assert sum(int(s["seen_other"]) for s in seen) > 0  # the drill can see a clobber
    stamp = read_stamp(locate("agent", checkout=worktrees[0]).namespace).stamp
    assert stamp is not None and stamp.fence == "none" and stamp.fence_note == "--fence none"


def can_fence() -> bool:
    return fences.kernel_refusal() is None or shutil.which("bwrap") is not None


def test_the_fence_keeps_the_users_files_and_var_tmp_private(repo: Path, tmp_path: Path) -> None:
    if not can_fence():
        pytest.skip("this kernel lets no lane have a private /tmp")  # it would write /var/tmp
    script = textwrap.dedent(
        """
        import json, os
        open("/var/tmp/fixed.txt", "w").write("mine")
        print(json.dumps({"uid": os.getuid(), "cwd": os.getcwd(),
                          "home": os.listdir(os.environ["HOME"]),
                          "tmp": sorted(os.listdir("/tmp")),
                          "fence": os.environ["LANEWATCH_FENCE"]}))
        """
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dotfile").write_text("x")
    env = {**os.environ, "HOME": str(home)}
    result = lanewatch("run", "--lane", "v", "--", sys.executable, "-c", script, cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["uid"] == os.getuid() and seen["cwd"] == os.path.realpath(repo)
    assert seen["home"] == ["dotfile"]  # a home under /tmp is bound back in, where it was
    # The lane's /tmp holds only what the lane needs from the real one: this test's folder,
    # and the checkout's own (its venv runs the lane) where it was cloned under /tmp.
    tmp = os.path.realpath("/tmp") + "/"
    needs = map(os.path.realpath, [tmp_path, sys.prefix, *os.environ["PATH"].split(os.pathsep)])
    assert seen["tmp"] == sorted({p[len(tmp) :].split("/")[0] for p in needs if p.startswith(tmp)})
    ns = locate("v", checkout=repo).namespace
    assert (ns / "var-tmp" / "fixed.txt").read_text() == "mine"
    assert seen["fence"] in ("kernel", "bwrap")


@pytest.fixture
def short_base() -> Iterator[Path]:
    """A folder with a short path (/tmp/lw-XXXXXXXX), unique to this test; removed after.
    The test's own tmp_path is already longer than the 45-character root wanted here."""
    base = Path(tempfile.mkdtemp(prefix="lw-", dir=os.path.realpath("/tmp")))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


MANAGER = "import multiprocessing as m\nwith m.Manager() as mg:\n    print(mg.dict(a=1)['a'])"


@pytest.mark.parametrize("fence", ["auto", "none"])
def test_multiprocessing_manager_works_in_a_lane_with_a_45_character_root(
    tmp_path: Path, short_base: Path, fence: str
) -> None:
    repo = tmp_path / "feature-add-oauth-login-flow-v2"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    root = short_base / ("r" * (45 - len(str(short_base)) - 1))
    assert len(str(root)) == 45
    env = {**os.environ, "LANEWATCH_STATE_DIR": str(short_base / "s")}
    args = ["run", "--root", str(root), "--fence", fence, "--", sys.executable, "-c", MANAGER]
    result = lanewatch(*args, cwd=repo, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"
    assert "AF_UNIX" not in result.stderr
    ns = locate("default", root=root, checkout=repo).namespace
    assert len(str(ns / "tmp")) > fences.SHORT_TMPDIR  # long enough to have failed before


def test_an_unfenced_tmpdir_too_long_for_a_socket_is_warned_of(tmp_path: Path) -> None:
    repo = tmp_path / "feature-add-oauth-login-flow-v2"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    root = tmp_path / ("r" * 60)
    args = ["run", "--root", str(root), "--fence", "none", "--", "sh", "-c", 'echo "$TMPDIR"']
    result = lanewatch(*args, cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "will not fit in an AF_UNIX path" in result.stderr
    assert os.path.realpath(result.stdout.strip()) == str(
        locate("default", root=root, checkout=repo).namespace / "tmp"
    )


# -- fail closed -------------------------------------------------------------------------------


def no_user_namespaces(tmp_path: Path) -> list[str] | None:
    """A prefix that runs a command as this uid where the kernel refuses new user namespaces:
    a user namespace whose limit (user.max_user_namespaces) is spent by the one inside it.
    The kernel's own answer, not a simulated one; None where even that cannot be built."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    # Not uid 0 inside (root would need only a mount namespace, which that user namespace
    # cannot give either, for another reason): a normal uid, mapped back to ours.
    uid, gid = os.getuid() or 1000, os.getgid() or 1000
    inner = f'exec {unshare} --user --map-user={uid} --map-group={gid} -- "$@"'
    script = f"echo 1 > /proc/sys/user/max_user_namespaces && {inner}"
    prefix = [unshare, "--user", "--map-root-user", "--", "sh", "-c", script, "sh"]
    probe = subprocess.run([*prefix, unshare, "--user", "true"], capture_output=True, text=True)
    if probe.returncode == 0 or "No space left" not in probe.stderr:
        return None
    return prefix


def test_fence_tmp_fails_closed_when_the_kernel_refuses(repo: Path, tmp_path: Path) -> None:
    prefix = no_user_namespaces(tmp_path)
    if prefix is None:
        pytest.skip("cannot make a place where the kernel refuses user namespaces")
    marker = tmp_path / "ran"
    bare = tmp_path / "bin"  # a PATH without bwrap: the fallback would be bwrap
    bare.mkdir()
    for tool in ("sh", "git"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    env = {**os.environ, "PATH": str(bare)}
    cmd = ["/bin/sh", "-c", f'echo "$LANEWATCH_FENCE" > {marker}']
    refused = subprocess.run(
        [*prefix, *LANEWATCH, "run", "--lane", "closed", "--fence", "tmp", "--", *cmd],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 3, refused.stderr
    assert "cannot fence the lane (--fence tmp)" in refused.stderr
    assert "user.max_user_namespaces" in refused.stderr and "nothing was run" in refused.stderr
    assert not marker.exists()
    # `auto` in the same place runs as before, and says why it did not fence.
    ran = subprocess.run(
        [*prefix, *LANEWATCH, "run", "--lane", "open", "--", *cmd],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert marker.read_text().strip() == "none"
    stamp = read_stamp(locate("open", checkout=repo).namespace).stamp
    assert stamp is not None and stamp.fence == "none"
    assert "user.max_user_namespaces" in (stamp.fence_note or "")


def no_bwrap_path(tmp_path: Path) -> dict[str, str]:
    """The environment with a PATH of sh and git only: no bwrap to fall back to."""
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    for tool in ("sh", "git"):
        found = shutil.which(tool)
        if found and not (bare / tool).exists():
            (bare / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k != fences.ENV_FENCE_REQUIRE}
    return {**env, "PATH": str(bare)}


def test_an_unfenced_run_says_so_and_require_fails_closed(repo: Path, tmp_path: Path) -> None:
    """Where the kernel refuses user namespaces and bwrap is absent, `auto` prints
    one line saying the lane runs unfenced and why; `--fence require` and
    `$LANEWATCH_FENCE_REQUIRE=1` exit 3 without running CMD; `--fence none` stays silent."""
    prefix = no_user_namespaces(tmp_path)
    if prefix is None:
        pytest.skip("cannot make a place where the kernel refuses user namespaces")
    marker = tmp_path / "ran"
    env = no_bwrap_path(tmp_path)
    cmd = ["/bin/sh", "-c", f'echo "$LANEWATCH_FENCE" > {marker}']

    def run(lane: str, *options: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, *LANEWATCH, "run", "--lane", lane, *options, "--", *cmd],
            cwd=repo,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )

    ran = run("open")
    assert ran.returncode == 0, ran.stderr
    assert marker.read_text().strip() == "none"
    said = [line for line in ran.stderr.splitlines() if "runs unfenced" in line]
    assert len(said) == 1, ran.stderr
    assert "lane 'open' runs unfenced" in said[0] and "user.max_user_namespaces" in said[0]
    assert "--fence require" in said[0]
    marker.unlink()

    for options, extra in (
        (("--fence", "require"), {}),
        ((), {fences.ENV_FENCE_REQUIRE: "1"}),
    ):
        refused = run("closed", *options, **extra)
        assert refused.returncode == 3, (options, extra, refused.stderr)
        assert "cannot fence the lane (--fence require)" in refused.stderr
        assert "nothing was run" in refused.stderr and not marker.exists()

    quiet = run("none", "--fence", "none", **{fences.ENV_FENCE_REQUIRE: "1"})
    assert quiet.returncode == 0, quiet.stderr
    assert marker.read_text().strip() == "none" and "runs unfenced" not in quiet.stderr


def test_the_environment_sharpens_auto_only() -> None:
    env = {fences.ENV_FENCE_REQUIRE: "1"}
    assert fences.chosen(fences.Mode.AUTO, env) is fences.Mode.REQUIRE
    assert fences.chosen(fences.Mode.AUTO, {fences.ENV_FENCE_REQUIRE: "yes"}).refuses_unfenced
    assert fences.chosen(fences.Mode.AUTO, {fences.ENV_FENCE_REQUIRE: "0"}) is fences.Mode.AUTO
    assert fences.chosen(fences.Mode.AUTO, {}) is fences.Mode.AUTO
    assert fences.chosen(fences.Mode.NONE, env) is fences.Mode.NONE  # said on the command line
    assert fences.Mode.TMP.refuses_unfenced and not fences.Mode.AUTO.refuses_unfenced


def test_status_says_a_lane_runs_unfenced_and_why(spawn: Spawn, repo: Path, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    wait = f"while [ ! -e {stop} ]; do sleep 0.05; done"
    spawn([*LANEWATCH, "run", "--lane", "u", "--fence", "none", "--", "sh", "-c", wait], cwd=repo)
    spawn([*LANEWATCH, "run", "--lane", "f", "--", "sh", "-c", wait], cwd=repo)
    for lane in ("u", "f"):
        ns = locate(lane, checkout=repo).namespace
        wait_for(lambda ns=ns: (s := read_stamp(ns).stamp) and s.child_pid, 30, what=lane)
    try:
        out = lanewatch("status", "--json", cwd=repo)
        lanes = {n["lane"]: n for n in json.loads(out.stdout)["namespaces"]}
        assert lanes["u"]["fence"] == "none" and lanes["u"]["fence_note"] == "--fence none"
        assert lanes["f"]["fence"] in ("kernel", "bwrap", "none")
        human = lanewatch("status", cwd=repo, env={**os.environ, "COLUMNS": "200"}).stdout
        assert "lane u: unfenced: --fence none" in human
        header = next(line for line in human.splitlines() if "state" in line and "lane" in line)
        assert "fence" in header.split()  # a FENCE column (wide tables)
        at = [h.strip() for h in header.split("┃")].index("fence")
        cells = {
            ln.split("│")[2].strip(): ln.split("│")[at].strip()
            for ln in human.splitlines()
            if ln.count("│") > at
        }
        assert cells["u"] == "none" and cells["f"] == lanes["f"]["fence"], human
    finally:
        stop.touch()


# -- the parts ---------------------------------------------------------------------------------


def test_kept_entries_are_the_first_level_under_a_private_mount(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    top = "/" + os.path.realpath(tmp_path).split("/")[1]
    first = "/".join(os.path.realpath(tmp_path).split("/")[:3])
    assert fences.kept([str(deep), top, "/usr/bin"], [top]) == (first,)
    assert fences.kept([top], [top]) == ()  # the mount point itself: the lane's own


def test_decide_none_and_the_words_for_people(tmp_path: Path) -> None:
    fence = fences.decide(fences.Mode.NONE, tmp_path, fences.Need([]))
    assert not fence.fenced and fence.wrap(["true"], os.environ) == ["true"]
    assert fences.describe("none", "--fence none", []) == "unfenced: --fence none"
    assert fences.describe("kernel", "", ["/tmp", "/var/tmp"]) == "private /tmp, /var/tmp (kernel)"
    assert fences.describe(None, None, None) is None  # a stamp from before the fence


def test_a_command_that_cannot_be_found_is_not_wrapped(tmp_path: Path) -> None:
    fence = fences.Fence("kernel", binds=((str(tmp_path), "/tmp"),))
    assert fence.wrap(["no-such-command-here"], os.environ) == ["no-such-command-here"]
    assert fence.wrap(["sh", "-c", "true"], os.environ)[-3:] == ["sh", "-c", "true"]


def test_short_tmp_is_a_link_to_the_folder_when_the_folder_is_long(short_base: Path) -> None:
    tmp = short_base / ("x" * 70) / "tmp"
    tmp.mkdir(parents=True)
    short = fences.short_tmp(tmp, short_base / "s")
    assert len(short) <= fences.SHORT_TMPDIR and os.path.realpath(short) == str(tmp)
    assert fences.short_tmp(tmp, short_base / "s") == short  # the same link again
    assert fences.short_tmp(short_base, short_base / "s") == str(short_base)  # short already
    assert fences.socket_warning("/t") is None
    assert "AF_UNIX" in (fences.socket_warning("/" + "y" * 90) or "")


def test_the_stamp_carries_the_fence_and_refuses_a_bad_one() -> None:
    base = {
        "schema": 1,
        "lane": "a",
        "namespace": "n",
        "checkout_id": "c",
        "checkout_path": "/c",
        "host": "h",
        "boot_id": "b",
        "pid": 5,
        "start_ticks": 1,
        "user": "u",
        "uid": 1,
        "command": ["x"],
        "started_at": 1.0,
        "heartbeat_at": 1.0,
        "heartbeat_interval": 5.0,
        "state": "live",
    }
    fenced = {**base, "fence": "kernel", "fence_note": "", "fence_private": ["/tmp"]}
    read = parse_stamp(json.dumps(fenced).encode())
    assert read.ok and read.stamp is not None and read.stamp.fence_private == ["/tmp"]
    assert parse_stamp(json.dumps(base).encode()).stamp.fence is None  # type: ignore[union-attr]
    bad = {**fenced, "fence_private": ["/tmp", 3]}
    assert parse_stamp(json.dumps(bad).encode()).status.value == "garbage"


def _line(mount_id: int, root: str, point: str, dev: str = "8:1") -> str:
    return f"{mount_id} 1 {dev} {root} {point} rw - ext4 /dev/sda1 rw"


def test_translate_names_a_fenced_path_by_ours() -> None:
    ours = parse_mountinfo("\n".join([_line(1, "/", "/"), _line(2, "/", "/tmp", "0:30")]).encode())
    theirs = parse_mountinfo(
        "\n".join(
            [
                _line(10, "/", "/"),
                _line(11, "/home/u/.state/ns/tmp", "/tmp"),  # the lane's folder at /tmp
                _line(12, "/pytest-of-u", "/tmp/pytest-of-u", "0:30"),  # kept where it was
            ]
        ).encode()
    )
    assert translate(theirs, ours, "/tmp/fixed.json") == "/home/u/.state/ns/tmp/fixed.json"
    assert translate(theirs, ours, "/tmp/pytest-of-u/x") == "/tmp/pytest-of-u/x"
    assert translate(theirs, ours, "/etc/passwd") == "/etc/passwd"
    assert translate(theirs, [], "/tmp/x") is None
