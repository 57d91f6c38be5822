"""The MCP tool `who_listens`: an agent whose server finds its port or X display taken asks
which lane holds it. Real lanes of two worktrees, a real server on loopback and on an abstract
name drawn at random (the abstract table is the whole machine's)."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.agents.answers import AgentError
from lanewatch.agents.listens import Found, Target, _fix, target, who_listens
from lanewatch.agents.me import Me
from tests.conftest import LANEWATCH, wait_for
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# Listen on 127.0.0.1:$PORT (the lane's lease) and on each abstract name of argv; for an X
# display's name, write its lock file with this pid, as an X server does (in the lane's own
# temp folder: /tmp when fenced); say so.
SERVER = """
import os, socket, sys, time
tcp = socket.socket()
tcp.bind(("127.0.0.1", int(os.environ["PORT"])))
tcp.listen()
held = []
for name in sys.argv[1:]:
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(b"\\0" + name.encode())
    unix.listen()
    held.append(unix)
    if name.startswith("/tmp/.X11-unix/X"):
        lock = os.path.join(os.environ["TMPDIR"], f".X{name.rsplit('X', 1)[1]}-lock")
        with open(lock, "w") as f:
            f.write(f"{os.getpid():>10}\\n")
print("listening", flush=True)
time.sleep(300)
"""


def test_what_may_be_asked() -> None:
    assert target("3000") == target(" 3000 ")
    assert (target("3000").port, target("3000").proto) == (3000, None)
    assert (target("5353/udp").port, target("5353/udp").proto) == (5353, "udp")
    assert target(":99").name == "@/tmp/.X11-unix/X99" and target(":99").said == target(":99").name
    assert target("@dbus x").name == "@dbus x"
    for bad in ("", "0", "65536", "3000/sctp", "x", "@", ":", "http://x:1", "@a\0b"):
        with pytest.raises(AgentError, match="give a port"):
            target(bad)


def test_the_fix_fits_who_holds_it() -> None:
    me = Me()  # outside every lane: no lease to offer
    web = {"lane": "web", "pid": 7, "mine": False, "private": False}
    own = {"lane": "agent", "pid": 8, "mine": True, "private": False}
    boxed = {"lane": "boxed", "pid": 9, "mine": False, "private": True}
    port, display = target("3000"), target(":99")

    def fix(want: Target, lanes: list[dict[str, object]], listened: bool = True) -> str:
        return _fix(want, lanes, Found(lanes, listened, []), me)

    assert fix(port, [web]).startswith("lane web holds it: listen on $PORT instead")
    assert fix(display, [web]).startswith("lane web holds it: for an X server, `xvfb-run -a`")
    assert fix(port, [own]).startswith("your own lane holds it (pid 8)")
    # A --fence net lane's own port is not what holds the asker's.
    assert fix(port, [boxed], listened=False) == (
        "nothing listens on :3000 here now (lane boxed listens on it in its own network "
        "namespace, where it collides with no one's)"
    )
    assert fix(port, [boxed, web]).startswith("lane web holds it")
    assert fix(port, [], listened=True).startswith("a process of no lane known here holds it")
    assert _fix(port, [], Found([], False, [], table=False), me).startswith("cannot tell")


@pytest.mark.processes
def test_an_agent_learns_which_lane_holds_its_port_and_its_display(
    worktrees: tuple[Path, Path], root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    main, side = worktrees
    display = random.SystemRandom().randint(10**6, 10**7)
    name = f"/tmp/.X11-unix/X{display}"

    web = start_lane(procs, main, root, "web", (sys.executable, "-c", SERVER, name))
    port = web.stamp.ports[0] if web.stamp.ports else None
    assert port is not None, "the lane took no lease"
    agent = start_lane(procs, side, root, "agent")  # the asking lane, in the other worktree
    me = Me("agent", str(agent.namespace), str(side), str(root.resolve()), "kernel")
    mine = Me("web", str(web.namespace), str(main), str(root.resolve()), "kernel")

    held = wait_for(lambda: who_listens(f":{display}", me)["lanes"], timeout=30, what="display")
    (lane,) = held
    assert lane["lane"] == "web" and not lane["mine"] and lane["namespace"] == str(web.namespace)
    answer = who_listens(f":{display}", me)
    assert answer["on"] == f"@{name}" and not answer["elsewhere"]
    assert answer["fix"].startswith("lane web holds it:") and "xvfb-run -a" in answer["fix"]

    on_port = wait_for(lambda: (a := who_listens(str(port), me))["lanes"] and a, timeout=30)
    (lane,) = on_port["lanes"]
    assert (lane["lane"], lane["pid"] > 0, lane["private"]) == ("web", True, False)
    assert on_port["leased_to"] == "web"
    lease = agent.stamp.ports
    assert lease is not None and f"{lease[0]}-{lease[0] + lease[1] - 1}" in on_port["fix"]
    assert "$PORT" in on_port["fix"]

    # The lane that holds it asks: its own.
    own = who_listens(str(port), mine)
    assert own["lanes"][0]["mine"] and own["fix"].startswith("your own lane holds it")

    # A listener of no lane: there, unnamed; and a name nothing holds.
    stranger = socket.socket(socket.AF_UNIX)
    stranger.bind(f"\0lanewatch-test-{display}".encode())
    stranger.listen()
    try:
        theirs = who_listens(f"@lanewatch-test-{display}", me)
        assert theirs["lanes"] == [] and theirs["elsewhere"]
        assert theirs["fix"].startswith("a process of no lane known here holds it")
    finally:
        stranger.close()
    free = who_listens(f"@lanewatch-test-free-{display}", me)
    assert (free["lanes"], free["elsewhere"]) == ([], False)
    assert free["fix"] == f"nothing listens on @lanewatch-test-free-{display} here now"


# Inside a lane: who_listens(argv[1]) as the agent's server would answer it, and whether this
# process can read the open files of pid argv[2] (another lane's server).
INSIDE = """
import json, os, sys
from lanewatch.agents.listens import who_listens
try:
    os.readlink(f"/proc/{sys.argv[2]}/fd/0")
    readable = True
except PermissionError:
    readable = False
print(json.dumps({"answer": who_listens(sys.argv[1]), "readable": readable}))
"""


@pytest.mark.processes
def test_from_inside_a_fence_a_lane_it_cannot_read_is_said_not_guessed(
    worktrees: tuple[Path, Path], root: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """A normal user's fenced lane is a user namespace of its own: from inside, no other
    process's open files can be read, so which lane listens cannot be told. The answer says
    so; it never says "a process of no lane" (as root, or unfenced, it names the lane)."""
    main, side = worktrees
    number = random.SystemRandom().randint(10**6, 10**7)
    name, plain = f"/tmp/.X11-unix/X{number}", f"lanewatch-test-{number}"
    web = start_lane(procs, main, root, "web", (sys.executable, "-c", SERVER, name, plain))
    port = web.stamp.ports[0] if web.stamp.ports else None
    assert port is not None, "the lane took no lease"
    server = web.stamp.child_pid
    outside = Me("agent", None, None, str(root.resolve()), None, "")
    wait_for(lambda: who_listens(str(port), outside)["lanes"], timeout=30, what=f":{port}")

    def in_agent_lane(*cmd: str, **env: str) -> subprocess.CompletedProcess[str]:
        """CMD run to its end in lane `agent` of the other worktree, fenced as lanes are."""
        return subprocess.run(
            [*LANEWATCH, "run", "--root", str(root), "--lane", "agent", "--", *cmd],
            cwd=side, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
        )  # fmt: skip

    def ask(on: str) -> dict[str, object]:
        done = in_agent_lane(sys.executable, "-c", INSIDE, on, str(server))
        assert done.returncode == 0, done.stderr
        said: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
        return said

    for on in (str(port), f"@{plain}", f":{number}"):
        said = ask(on)
        answer = said["answer"]
        assert isinstance(answer, dict)
        assert answer["elsewhere"] is False, answer  # never "no lane's" when unsure
        if said["readable"]:
            assert [h["lane"] for h in answer["lanes"]] == ["web"], answer
            assert answer["lanes"][0]["how"] == "open file"
            assert answer["hidden"] == [] and answer["fix"].startswith("lane web holds it")
        elif on.startswith(":"):  # an X display: its lock file names the server's pid
            (lane,) = answer["lanes"]
            assert (lane["lane"], lane["how"], lane["pid"]) == ("web", "X lock file", server)
            assert answer["fix"].startswith("lane web holds it: for an X server")
        else:
            assert answer["lanes"] == [] and answer["hidden"] == ["web"], answer
            assert "inside a lane's fence, a user namespace" in answer["fix"], answer

    listed = in_agent_lane(*LANEWATCH, "ports", "--root", str(root))
    assert listed.returncode == 0, listed.stderr
    if said["readable"]:
        assert "abstract unix sockets" in listed.stdout and "cannot be read" not in listed.stderr
    else:
        assert "the open files of lane(s) web cannot be read here" in listed.stderr
        assert f"{server} (X lock file)" in listed.stdout  # the display, by its lock
        assert f"@{plain}" not in listed.stdout  # the plain name: no lane can be told
    status = in_agent_lane(*LANEWATCH, "status", "--root", str(root), COLUMNS="300")
    assert status.returncode in (0, 4), status.stderr
    said_so = "seen from inside a lane's fence" in status.stdout
    assert said_so is not said["readable"], status.stdout
