"""`lanewatch ports` names the lane whose process listens on an abstract unix socket (an X
display's `@/tmp/.X11-unix/X99`): a name in the network namespace, which the fence does not
keep apart. Real lanes of two worktrees, real sockets; each name is drawn at random, since the
abstract table is the whole machine's."""

from __future__ import annotations

import io
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH, Spawn, lanewatch, wait_for
from tests.kits.contractkit import parsed
from tests.kits.netfencekit import why_no_net_fence

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

# Listen on the abstract name argv[1] and say so, or say it is taken and exit 3.
SERVER = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
try:
    s.bind(b"\\0" + sys.argv[1].encode())
except OSError as exc:
    print("taken:", exc.strerror, flush=True)
    sys.exit(3)
s.listen()
print("listening", flush=True)
time.sleep(300)
"""


def _named(cwd: Path, name: str) -> list[dict[str, object]]:
    done = lanewatch("ports", "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [a for a in parsed("ports", done.stdout)["abstract"] if a["name"] == name]


def _listening(spawn: Spawn, cwd: Path, name: str) -> dict[str, object]:
    """Lane `xa` of the checkout `cwd` listening on `name`, once `ports` lists it."""
    spawn(
        [*LANEWATCH, "run", "--lane", "xa", "--", sys.executable, "-c", SERVER, name],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    (held,) = wait_for(lambda: _named(cwd, f"@{name}"), timeout=30, what=f"@{name} in ports")
    return held


@pytest.mark.processes
def test_a_display_held_by_one_lane_is_named_when_another_lane_cannot_have_it(
    worktrees: tuple[Path, Path], spawn: Spawn
) -> None:
    main, side = worktrees
    display = random.SystemRandom().randint(10**6, 10**7)
    name = f"/tmp/.X11-unix/X{display}"
    held = _listening(spawn, main, name)
    assert held["lane"] == "xa" and held["display"] == f":{display}"
    assert held["checkout_path"] == str(main)
    assert str(held["namespace"]).endswith(".xa")
    one_port = lanewatch("ports", "1", "--json", cwd=main)  # no lane listens on :1 (exit 8)
    assert one_port.returncode == 8
    assert held in parsed("ports", one_port.stdout)["abstract"]  # the JSON has them whole

    # The other worktree's lane, fenced as well, cannot have the same name.
    second = subprocess.run(
        [*LANEWATCH, "run", "--lane", "xb", "--", sys.executable, "-c", SERVER, name],
        cwd=side,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert second.returncode == 3 and "taken" in second.stdout, second.stderr
    # A process of no lane listening on a name of its own is no lane's.
    stranger = socket.socket(socket.AF_UNIX)
    stranger.bind(f"\0lanewatch-test-{display}".encode())
    stranger.listen()
    try:
        assert _named(main, f"@lanewatch-test-{display}") == []
        (still,) = _named(side, f"@{name}")  # from the other checkout: the same lane
        assert still["lane"] == "xa" and still["pid"] == held["pid"]
        shown = lanewatch("ports", cwd=side)
        assert shown.returncode == 0, shown.stderr
        assert "abstract unix sockets" in shown.stdout and f":{display}" in shown.stdout
    finally:
        stranger.close()


@pytest.mark.processes
def test_the_detail_pane_says_which_abstract_names_a_lane_listens_on(
    repo: Path, spawn: Spawn
) -> None:
    from rich.console import Console

    from lanewatch.engine.engine import Engine
    from lanewatch.tui.backend.lane_details import load_detail
    from lanewatch.tui.widgets.detail_pane import namespace_renderable

    display = random.SystemRandom().randint(10**6, 10**7)
    name = f"/tmp/.X11-unix/X{display}"
    _listening(spawn, repo, name)
    (view,) = [v for v in Engine(None).snapshot().upserts.values() if v.lane == "xa"]
    detail = load_detail(Path(view.key), view=view)
    assert detail.names == (f"@{name} (display :{display})",)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(namespace_renderable(view, detail, []))
    said = out.getvalue()
    line = next(line for line in said.splitlines() if line.startswith("unix names"))
    assert line.split(None, 2)[2].rstrip() == f"listens on @{name} (display :{display})", said
    assert load_detail(Path(view.key)).names == ()  # without its view: not asked


@pytest.mark.processes
def test_a_net_fenced_lane_has_the_name_to_itself_and_is_not_listed(
    worktrees: tuple[Path, Path], spawn: Spawn
) -> None:
    """`--fence net`: the lane's abstract names are its network namespace's, so the same
    display in a host lane and in a net-fenced lane are two; only the host's is in our table."""
    why = why_no_net_fence()
    if why is not None:
        pytest.skip(f"no network fence here: {why}")
    main, side = worktrees
    name = f"/tmp/.X11-unix/X{random.SystemRandom().randint(10**6, 10**7)}"
    _listening(spawn, main, name)
    own = spawn(
        [*LANEWATCH, "run", "--lane", "xn", "--fence", "net", "--",
         sys.executable, "-c", SERVER, name],
        cwd=side,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert own.stdout is not None
    said = own.stdout.readline().decode()  # either line comes at once; EOF if it failed
    assert said == "listening\n", said
    (only,) = _named(side, f"@{name}")
    assert only["lane"] == "xa"
