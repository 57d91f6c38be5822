"""tox inside a lane (docs/launchers.md, tox and nox): real tox 4 with a tiny tox.ini whose envs
install nothing (`package = skip`) and run `pytest -p lanewatch` with this interpreter.

tox hands its commands a cleaned environment: `pass_env = LANEWATCH_*` lets the lane through,
so the pytest inside finds the `lanewatch run` that owns the lane; `--basetemp={envtmpdir}/…`
is accepted when tox's work dir (`--workdir`) lies inside the lane, and refused, with what to
change, when it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import LANEWATCH, git, inner_pytest_env

pytestmark = pytest.mark.unprivileged  # a user journey

TOX_INI = textwrap.dedent(
    """
    [tox]
    env_list = lw

    [testenv]
    package = skip
    # tox lists the env's packages with pip when $CI is set (as in .ci/run); the envs have none
    list_dependencies_command = python -c ""
    allowlist_externals = {env:OUTER_PYTHON}
    commands = "{env:OUTER_PYTHON}" -m pytest -p lanewatch -p no:cacheprovider -p no:randomly \\
        -s --basetemp={envtmpdir}/basetemp test_where.py

    [testenv:lw]
    pass_env = LANEWATCH_*

    [testenv:nopass]
    """
)
WHERE = textwrap.dedent(
    """
    import json, os

    def test_where(tmp_path):
        seen = {k: os.environ[k] for k in ("LANEWATCH_LANE", "LANEWATCH_NAMESPACE", "TMPDIR")}
        print("WHERE " + json.dumps({"tmp_path": str(tmp_path), **seen}))
    """
)


def tox_in_lane(repo: Path, root: Path, envs: str, *, workdir_in_lane: bool) -> tuple[int, str]:
    """`lanewatch run --lane toxl -- tox -e ENVS [--workdir <lane>/tox]`: exit code and output."""
    (repo / "tox.ini").write_text(TOX_INI)
    (repo / "test_where.py").write_text(WHERE)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "tox", cwd=repo)
    workdir = ' --workdir "$LANEWATCH_NAMESPACE/tox"' if workdir_in_lane else ""
    script = f'exec "$0" -m tox -e {envs}{workdir}'
    env = inner_pytest_env({**os.environ, "OUTER_PYTHON": sys.executable})
    env |= {"VIRTUALENV_NO_PIP": "1", "VIRTUALENV_NO_SETUPTOOLS": "1"}  # installs nothing
    run = [*LANEWATCH, "run", "--root", str(root), "--lane", "toxl", "--fence", "none", "--"]
    done = subprocess.run(
        [*run, "sh", "-c", script, sys.executable],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def test_pass_env_lets_the_lane_in_and_a_basetemp_in_the_lanes_tox_dir_is_accepted(
    repo: Path, root: Path
) -> None:
    code, out = tox_in_lane(repo, root, "lw", workdir_in_lane=True)
    assert code == 0, out
    (line,) = [x for x in out.splitlines() if "WHERE {" in x]  # after pytest's "test_where.py "
    where = json.loads(line.split("WHERE ", 1)[1].removesuffix("."))
    ns = os.path.realpath(where["LANEWATCH_NAMESPACE"])
    assert where["LANEWATCH_LANE"] == "toxl" and os.path.dirname(ns) == os.path.realpath(root)
    envtmpdir = os.path.join(ns, "tox", "lw", "tmp")
    assert os.path.realpath(where["tmp_path"]).startswith(envtmpdir + os.sep), where
    assert "lanewatch: lane toxl, owned by the lanewatch run around this pytest" in out


def test_without_pass_env_or_with_tox_outside_the_lane_it_says_what_to_change(
    repo: Path, root: Path
) -> None:
    code, out = tox_in_lane(repo, root, "nopass,lw", workdir_in_lane=False)
    assert code != 0, out
    assert "under tox, pass the lane in: `pass_env = LANEWATCH_*`" in out  # nopass
    assert 'tox --workdir "$LANEWATCH_NAMESPACE/tox"` puts it inside the lane' in out  # lw
    assert "WHERE " not in out  # no test ran in either
