"""`pytest -p lanewatch -n 2` beside a running recorder invents no incident.

A real recorder (`lanewatch record --json`: kernel attribution as root, the prober's inferred
attribution as a normal user) watches a real inner pytest with two real xdist workers, with
pytest's capture on and off (`-s`), its output on a pipe or redirected to a file in /tmp (what
`pytest … > /tmp/log 2>&1` does). Before the fix each of them raised a false collision: the
workers' capture files in the main lane ("pytest-gw0 and pytest-gw1 write in pytest's lane"),
the redirect ("pytest writes /tmp/log outside its lane").

"Nothing was reported" is only worth something once the recorder has caught up: after the
inner pytest ends, a planted collision (lane B holding and writing a file in lane A's
namespace) must be reported; the recorder reports in order, so by then every sighting of the
pytest run has been judged. Every incident seen must be that one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LANEWATCH, Spawn, inner_pytest_env, wait_for
from tests.kits.attributionkit import json_lines, privileged, shared_temp_file
from tests.kits.enginekit import start_lane

pytestmark = pytest.mark.unprivileged  # the prober's judgement, as a normal user runs it

# Output on stdout and stderr from the tests (captured, or not with -s), a tmp_path file and a
# tempfile (in the worker's lane), for a test long enough for the prober to see it run.
INNER = textwrap.dedent(
    """
    import os, sys, tempfile, time

    import pytest

    @pytest.mark.parametrize("n", range(4))
    def test_work(n, tmp_path):
        print("out", n)
        print("err", n, file=sys.stderr)
        (tmp_path / "f.txt").write_text("x" * (n + 1))
        with tempfile.NamedTemporaryFile("w") as f:
            f.write("scratch")
            f.flush()
        time.sleep(0.4)  # held a while: a probe sees the workers mid-run
    """
)


INNER_PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly"]
INNER_PYTEST += ["-p", "lanewatch"]


def recorder(spawn: Spawn, root: Path, cwd: Path) -> tuple[Any, list[dict[str, Any]]]:
    proc = spawn(
        [*LANEWATCH, "record", "--json", "--root", str(root)], stdout=subprocess.PIPE, cwd=cwd
    )
    lines: list[dict[str, Any]] = []
    json_lines(proc, lines)
    wait_for(lambda: any(x.get("type") == "start" for x in lines), 30, what="the recorder")
    return proc, lines


def incidents(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {x["id"]: x for x in list(lines) if x.get("type") == "incident"}


def run_inner(repo: Path, root: Path, out: Path | None, *args: str) -> tuple[int, str]:
    """The inner pytest to its end: its exit code and output, which went to `out` (a file,
    stdout and stderr: `> out 2>&1`), else to a pipe."""
    (repo / "test_inner.py").write_text(INNER)
    env = inner_pytest_env({**os.environ, "LANEWATCH_ROOT": str(root)})
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(out.open("wb")) if out is not None else subprocess.PIPE
        done = subprocess.run(
            [*INNER_PYTEST, "-n", "2", *args, "test_inner.py"],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=180,
        )
    text = out.read_bytes() if out is not None else done.stdout
    return done.returncode, text.decode(errors="replace")


@pytest.mark.parametrize("capture", ["default", "-s"])
@pytest.mark.parametrize("output", ["a pipe", "a redirect to /tmp"])
def test_xdist_beside_a_recorder_invents_no_incident(
    spawn: Spawn,
    repo: Path,
    root: Path,
    tmp_path: Path,
    procs: list[subprocess.Popen[bytes]],
    capture: str,
    output: str,
) -> None:
    rec, lines = recorder(spawn, root, tmp_path)
    with shared_temp_file(".log") as shared:
        out = shared if output == "a redirect to /tmp" else None
        code, text = run_inner(repo, root, out, *(["-s"] if capture == "-s" else []))
        assert code == 0, text
        assert "lanewatch: gw1 ran in lane pytest-gw1" in text

        # The planted collision: B writes into A's namespace, and keeps the file open.
        a = start_lane(procs, repo, root, "planted-a")
        target = a.namespace / "tmp" / "planted.txt"
        script = 'exec 3>"$1"; printf B >&3; exec sleep 60'
        start_lane(procs, repo, root, "planted-b", ("sh", "-c", script, "sh", str(target)))

        def planted() -> dict[str, Any] | None:
            return next(
                (i for i in incidents(lines).values() if i.get("victim") == str(a.namespace)),
                None,
            )

        found = wait_for(planted, 60, what="the planted collision reported")
        assert found["kind"] == "cross-lane-write" and found["intruder"]["lane"] == "planted-b"
        invented = {k: v["summary"] for k, v in incidents(lines).items() if k != found["id"]}
        assert invented == {}, json.dumps(invented, indent=1)
    states = {(x.get("lane"), x.get("state")) for x in list(lines) if x.get("type") == "state"}
    for lane in ("pytest", "pytest-gw0", "pytest-gw1"):
        assert (lane, "released") in states, sorted(states, key=str)
    rec.terminate()
    assert rec.wait(timeout=30) == 0


ESCAPE = textwrap.dedent(
    """
    import os
    from pathlib import Path

    def test_writes_a_fixed_name_in_tmp():
        Path(os.environ["ESCAPE"]).write_text("from the lane")
    """
)


@privileged
def test_a_test_in_the_owning_process_writing_tmp_is_reported(
    spawn: Spawn, repo: Path, root: Path, tmp_path: Path
) -> None:
    """Without xdist the tests run in the process that owns the lane: that process is no
    `lanewatch run` writing only its own files, and its write to /tmp is the lane's (it used
    to be excused as an owner's)."""
    rec, lines = recorder(spawn, root, tmp_path)
    assert next(x for x in lines if x["type"] == "start")["attribution"]["mode"] == "kernel"
    (repo / "test_escape.py").write_text(ESCAPE)
    with shared_temp_file(".json") as escape:
        env = inner_pytest_env({**os.environ, "LANEWATCH_ROOT": str(root), "ESCAPE": str(escape)})
        done = subprocess.run(
            [*INNER_PYTEST, "test_escape.py"],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout.decode(errors="replace")

        def reported() -> dict[str, Any] | None:
            return next(
                (i for i in incidents(lines).values() if i.get("path") == str(escape)), None
            )

        found = wait_for(reported, 30, what="the write to /tmp reported")
        assert found["kind"] == "shared-file" and found["grade"] == "known"
        assert found["intruder"]["lane"] == "pytest"
    rec.terminate()
    assert rec.wait(timeout=30) == 0
