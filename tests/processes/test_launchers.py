"""docs/launchers.md's recipes, each run with a stand-in agent that behaves as the real tool does
on disk and in processes (tests/standins/): Claude Code's `/tmp/claude-UID` and background
shells, Codex's bubblewrap, aider's files in the checkout, claude-squad's worktrees and tmux
sessions, a dev server, GNU screen. Real `lanewatch run`, tmux, screen and bwrap; a tmux server
and screen sessions of the test's own, never the user's. As root and, in the unprivileged tier,
as a normal user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lanewatch.lanes import ledger
from lanewatch.linux.procid import start_ticks
from tests.conftest import LANEWATCH, Spawn, git, lanewatch, wait_for
from tests.processes.test_members import DEADLINE, fenced_here, ns_of, status_of

pytestmark = pytest.mark.unprivileged  # user journeys: also run as a normal user

STANDINS = Path(__file__).resolve().parent.parent / "standins"


def standin(name: str) -> list[str]:
    return [sys.executable, str(STANDINS / f"{name}.py")]


def needs_fence() -> None:
    if not fenced_here():
        pytest.skip("the kernel refuses the fence here: these tools would write the real /tmp")


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(wait_for(lambda: path.exists() and path.read_text(), 30))
    return data


def lingering(repo: Path, lane: str) -> None:
    ns = ns_of(lane, repo)
    wait_for(lambda: any(e.event == "lingering" for e in ledger.read(ns)), DEADLINE)


class Alive:
    """A process known by pid and start time: alive means that very process still runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.ticks = pid, start_ticks(pid)
        assert self.ticks is not None

    def __call__(self) -> bool:
        return start_ticks(self.pid) == self.ticks


def status_in(tree: Path, lane: str) -> dict[str, Any]:
    """The lane `lane` of the checkout `tree` in `status --json` (several checkouts, one name)."""
    result = lanewatch("status", "--json", cwd=tree)
    assert result.returncode in (0, 4, 5), result.stderr
    found = [
        n
        for n in json.loads(result.stdout)["namespaces"]
        if n["lane"] == lane and n["checkout_path"] == str(tree.resolve())
    ]
    assert len(found) == 1, result.stdout
    return found[0]


def growing(path: Path) -> bool:
    size = path.stat().st_size
    return bool(wait_for(lambda: path.stat().st_size > size, DEADLINE, what=f"{path} grows"))


def in_lane(repo: Path, lane: str, path: str) -> Path:
    """`path` as the lane's processes name it in /tmp, where it is outside the lane."""
    return ns_of(lane, repo) / "tmp" / Path(path).relative_to("/tmp")


# --- Claude Code ------------------------------------------------------------------------------


def start_claude(spawn: Spawn, cwd: Path, lane: str, out: Path) -> subprocess.Popen[bytes]:
    return spawn(
        [*LANEWATCH, "run", "--lane", lane, "--", *standin("claude_code"), str(out)],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_two_claude_code_sessions_in_two_lanes_of_one_project_never_meet(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """The collision users report (anthropics/claude-code#42536): two sessions in one project
    share `/tmp/claude-UID/<project>/`, and the second one's startup cleanup deletes the
    first one's background output. In two lanes each session has its own, and killing one
    lane ends its background shell and nothing of the other's."""
    needs_fence()
    start_claude(spawn, repo, "s1", tmp_path / "s1.json")
    one = report(tmp_path / "s1.json")
    lingering(repo, "s1")  # the session exited; its background shell keeps the lane live
    start_claude(spawn, repo, "s2", tmp_path / "s2.json")
    two = report(tmp_path / "s2.json")
    lingering(repo, "s2")

    assert one["project"] == two["project"]  # one project, one folder name in /tmp
    assert two["removed"] == [] and two["others"] == []  # s1's files are out of s2's sight
    for me, lane in ((one, "s1"), (two, "s2")):
        project = in_lane(repo, lane, me["project"])
        assert sorted(p.name for p in project.iterdir()) == sorted([me["session"], "tasks"])
        assert growing(in_lane(repo, lane, me["output"]))
        assert not Path(me["output"]).exists() or me["output"] != two["output"]
    shell1, shell2 = Alive(one["shell"]), Alive(two["shell"])
    members = {m["pid"] for m in status_of(repo, "s1")["members"]}
    assert one["shell"] in members

    killed = lanewatch("kill", "s1", "--yes", cwd=repo)

    assert killed.returncode == 0, killed.stderr + killed.stdout
    wait_for(lambda: not shell1(), DEADLINE, what="s1's background shell ends")
    assert shell2() and status_of(repo, "s2")["state"] == "live"
    assert growing(in_lane(repo, "s2", two["output"]))
    assert lanewatch("kill", "s2", "--yes", cwd=repo).returncode == 0
    wait_for(lambda: not shell2(), DEADLINE, what="s2's background shell ends")


# --- claude-squad -----------------------------------------------------------------------------

TMUX = shutil.which("tmux")


@pytest.fixture
def tmux_socket(tmp_path: Path) -> Iterator[Path]:
    """A tmux server of the test's own (never the user's), killed at the end."""
    sock = tmp_path / "cs.sock"
    try:
        yield sock
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=30)


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed (.ci/run installs it)")
def test_claude_squad_runs_each_instance_in_a_lane_of_its_worktree(
    spawn: Spawn, repo: Path, tmp_path: Path, tmux_socket: Path
) -> None:
    """`cs -p "lanewatch run -- claude"`: each instance's tmux session (in a server outside
    any lane) runs `lanewatch run` in its own worktree, so each is a lane of its own checkout;
    `lanewatch kill` of one ends its agent, its background shells and its tmux session."""
    needs_fence()
    home = tmp_path / "home"
    home.mkdir()
    program = " ".join(
        f"'{a}'" for a in [*LANEWATCH, "run", "--", *standin("claude_code"), "../REPORT"]
    )
    reports = {}
    for name in ("alpha", "beta"):
        made = subprocess.run(
            [*standin("claude_squad"), str(tmux_socket),
             program.replace("../REPORT", str(tmp_path / f"{name}.json")), name],
            cwd=repo, env={**os.environ, "HOME": str(home)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        reports[name] = (Path(made.stdout.strip()), report(tmp_path / f"{name}.json"))

    alpha_tree, alpha = reports["alpha"]
    beta_tree, beta = reports["beta"]
    assert alpha_tree.parent == beta_tree.parent == home / ".claude-squad" / "worktrees"
    assert alpha["project"] != beta["project"]  # two worktrees: two checkouts, two lanes
    for tree in (alpha_tree, beta_tree):
        lingering(tree, "default")
        assert status_in(tree, "default")["state"] == "live"
    assert growing(in_lane(alpha_tree, "default", alpha["output"]))
    shell_a, shell_b = Alive(alpha["shell"]), Alive(beta["shell"])

    # One lane name in two checkouts: `kill` takes the namespace's path (or its name).
    killed = lanewatch("kill", str(ns_of("default", alpha_tree)), "--yes", cwd=alpha_tree)

    assert killed.returncode == 0, killed.stderr + killed.stdout
    wait_for(lambda: not shell_a(), DEADLINE, what="alpha's background shell ends")

    def sessions() -> list[str]:
        ls = subprocess.run(
            ["tmux", "-S", str(tmux_socket), "ls", "-F", "#S"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return ls.stdout.split()

    wait_for(lambda: sessions() == ["claudesquad_beta"], DEADLINE, what="alpha's session ends")
    assert shell_b() and status_in(beta_tree, "default")["state"] == "live"
    assert (
        lanewatch("kill", str(ns_of("default", beta_tree)), "--yes", cwd=beta_tree).returncode == 0
    )
    wait_for(lambda: not shell_b(), DEADLINE, what="beta's background shell ends")


# --- Codex ------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")
def test_codex_commands_in_bubblewrap_write_the_lanes_tmp_and_end_with_it(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """Codex's sandbox binds /tmp read-write into bubblewrap: inside a lane that is the lane's
    /tmp. Two lanes of one checkout write one fixed name, each its own; the sandboxed command
    is a member, and `kill` ends it."""
    needs_fence()
    probe = subprocess.run(["unshare", "-Ur", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are off here: {probe.stderr.decode().strip()}")
    name = f"/tmp/codex-{uuid.uuid4().hex}.txt"
    runners = {}
    for lane in ("c1", "c2"):
        go = tmp_path / f"{lane}.go"
        command = f'echo {lane} > {name}; while [ ! -e "{go}" ]; do sleep 0.05; done'
        runners[lane] = spawn(
            [*LANEWATCH, "run", "--lane", lane, "--", *standin("codex"), command],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    for lane in ("c1", "c2"):
        written = in_lane(repo, lane, name)
        assert wait_for(lambda w=written: w.exists() and w.read_text(), 30) == f"{lane}\n"
    assert not Path(name).exists()  # the real /tmp never saw it

    def sandboxed(lane: str) -> list[dict[str, Any]]:
        members = status_of(repo, lane)["members"]
        return [m for m in members if m["command"].startswith("sh -c echo")]

    wait_for(lambda: sandboxed("c1"), DEADLINE, what="the sandboxed command is a member")
    killed = lanewatch("kill", "c1", "--yes", cwd=repo)
    assert killed.returncode == 0, killed.stderr + killed.stdout
    assert runners["c1"].wait(timeout=DEADLINE) != 0
    assert runners["c2"].poll() is None and status_of(repo, "c2")["state"] == "live"
    (tmp_path / "c2.go").touch()
    assert runners["c2"].wait(timeout=DEADLINE) == 0


# --- aider ------------------------------------------------------------------------------------


def test_aider_keeps_its_files_in_the_checkout_so_give_it_a_worktree_or_the_namespace(
    repo: Path, tmp_path: Path
) -> None:
    """aider writes `.aider*` at the root of its checkout, which no fence covers: two lanes of
    one checkout share one transcript (what the docs warn of). One worktree per agent, or
    the history files in the lane's namespace, keeps each its own."""
    shared = [
        lanewatch("run", "--lane", lane, "--", *standin("aider"), f"from {lane}", cwd=repo)
        for lane in ("a1", "a2")
    ]
    assert all(r.returncode == 0 for r in shared), [r.stderr for r in shared]
    transcript = (repo / ".aider.chat.history.md").read_text()
    assert "#### from a1" in transcript and "#### from a2" in transcript  # one file, both lanes
    assert (repo / ".aider.tags.cache.v3").is_dir()

    worktrees = [tmp_path / f"agent-{n}" for n in (1, 2)]
    for n, tree in enumerate(worktrees):
        git("worktree", "add", "-q", str(tree), "-b", f"agent-{n}", cwd=repo)
    for tree in worktrees:
        ran = lanewatch("run", "--lane", "a", "--", *standin("aider"), f"in {tree.name}", cwd=tree)
        assert ran.returncode == 0, ran.stderr
    for tree in worktrees:
        lines = (tree / ".aider.chat.history.md").read_text()
        assert lines.count("# aider chat started") == 1 and f"#### in {tree.name}" in lines

    recipe = (
        'exec "$0" "$1" --chat-history-file "$LANEWATCH_NAMESPACE/aider.chat.history.md" '
        '--input-history-file "$LANEWATCH_NAMESPACE/aider.input.history" "$2"'
    )
    for lane in ("n1", "n2"):
        ran = lanewatch(
            "run", "--lane", lane, "--", "sh", "-c", recipe, *standin("aider"), f"only {lane}",
            cwd=repo,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        own = (ns_of(lane, repo) / "aider.chat.history.md").read_text()
        assert f"#### only {lane}" in own and own.count("# aider chat started") == 1
    assert "only n" not in (repo / ".aider.chat.history.md").read_text()


# --- a dev server -----------------------------------------------------------------------------


def test_dev_servers_started_in_the_background_are_their_lanes(
    spawn: Spawn, repo: Path, tmp_path: Path
) -> None:
    """`npm run dev &` as a stand-in: the server outlives the command that started it, keeps
    its lane live, writes its fixed-name pid file in its lane's /tmp, and only its own lane's
    `kill` ends it."""
    needs_fence()
    servers = {}
    for lane in ("w1", "w2"):
        out = tmp_path / f"{lane}.json"
        start = 'nohup "$0" "$1" "$2" </dev/null >/dev/null 2>&1 &'
        spawn(
            [*LANEWATCH, "run", "--lane", lane, "--", "sh", "-c", start,
             *standin("dev_server"), str(out)],
            cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        servers[lane] = report(out)
        lingering(repo, lane)
    for lane, facts in servers.items():
        url = f"http://127.0.0.1:{facts['port']}/"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.read().decode() == lane
        pid_file = in_lane(repo, lane, "/tmp/dev-server.pid")
        assert pid_file.read_text() == f"{facts['pid']}\n"
    w1, w2 = Alive(servers["w1"]["pid"]), Alive(servers["w2"]["pid"])

    assert lanewatch("kill", "w1", "--yes", cwd=repo).returncode == 0

    wait_for(lambda: not w1(), DEADLINE, what="w1's server ends")
    assert w2() and status_of(repo, "w2")["state"] == "live"
    assert lanewatch("kill", "w2", "--yes", cwd=repo).returncode == 0
    wait_for(lambda: not w2(), DEADLINE, what="w2's server ends")


# --- GNU screen -------------------------------------------------------------------------------

SCREEN = shutil.which("screen")
needs_screen = pytest.mark.skipif(SCREEN is None, reason="screen is not installed (.ci/run)")


@pytest.fixture
def screens() -> Iterator[list[str]]:
    """Names of screen sessions a test starts (unique to it), each told to quit at the end."""
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run(["screen", "-S", name, "-X", "quit"], capture_output=True, timeout=30)


@needs_screen
def test_screen_dm_in_a_lane_is_the_lanes_and_kill_ends_it(
    spawn: Spawn, repo: Path, tmp_path: Path, screens: list[str]
) -> None:
    needs_fence()
    name = f"lw-{uuid.uuid4().hex[:12]}"
    screens.append(name)
    go = tmp_path / "go"
    session = (
        f'echo "$LANEWATCH_LANE" > /tmp/screen.txt; while [ ! -e "{go}" ]; do sleep 0.05; done'
    )
    runner = spawn(
        [*LANEWATCH, "run", "--lane", "scr", "--", "screen", "-dmS", name, "sh", "-c", session],
        cwd=repo,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lingering(repo, "scr")
    written = in_lane(repo, "scr", "/tmp/screen.txt")
    assert wait_for(lambda: written.exists() and written.read_text(), 30) == "scr\n"
    commands = " | ".join(m["command"] for m in status_of(repo, "scr")["members"])
    assert name in commands, commands

    assert lanewatch("kill", "scr", "--yes", cwd=repo).returncode == 0

    assert runner.wait(timeout=DEADLINE) == 0  # screen's own exit code, once its session ended
    assert status_of(repo, "scr")["state"] == "released"


@needs_screen
def test_screen_from_inside_a_screen_window_starts_a_session_of_the_lanes_own(
    repo: Path, tmp_path: Path, screens: list[str]
) -> None:
    """With `$STY` set (a screen window), `screen CMD` hands CMD to that session as a new
    window, outside the lane (screen's sockets are in /run/screen: the fence does not hide
    them). `run` drops `$STY`, says so, and CMD runs in the lane (here in a terminal of its
    own, `script`: a new screen session needs one)."""
    if shutil.which("script") is None:
        pytest.skip("script(1) (util-linux) is not installed")
    outer = f"lw-outer-{uuid.uuid4().hex[:12]}"
    screens.append(outer)
    subprocess.run(["screen", "-dmS", outer, "sleep", "300"], check=True, timeout=30)
    sty = wait_for(lambda: _screen_id(outer), 30, what="the outer session")
    where = tmp_path / "where.txt"
    inner = f'echo "${{LANEWATCH_LANE:-none}}" > "{where}"'
    line = [*LANEWATCH, "run", "--lane", "in", "--", "screen", "sh", "-c", inner]

    said = tmp_path / "said.txt"
    # script(1)'s stdin stays open and empty: at EOF on its stdin it may end the session
    # before CMD has run (seen once in the unprivileged tier: no output, exit 0).
    with said.open("wb") as out:
        ran = subprocess.Popen(
            ["script", "-qec", " ".join(f"'{a}'" for a in line), "/dev/null"],
            cwd=repo, env={**os.environ, "STY": sty}, stdin=subprocess.PIPE, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            code = ran.wait(timeout=60)
        finally:
            assert ran.stdin is not None
            ran.stdin.close()
            if ran.poll() is None:
                ran.kill()
                ran.wait()
    text = said.read_text(errors="replace")

    assert code == 0, text
    assert f"$STY names a screen session outside lane in ({sty})" in text, text
    assert where.read_text() == "in\n"  # ran in the lane, not as a window of the outer session


def _screen_id(name: str) -> str | None:
    ls = subprocess.run(["screen", "-ls"], capture_output=True, text=True, timeout=30)
    return next((w for w in ls.stdout.split() if w.endswith(f".{name}")), None)
