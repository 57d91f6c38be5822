"""The GitHub Actions recipe in docs/ci.md, run as written: its `run:` steps, in order, in a
real git checkout, as a runner would (bash -e), with this venv standing in for `pip install`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, inner_pytest_env

pytestmark = pytest.mark.unprivileged  # CI runners are normal users

DOC = Path(__file__).resolve().parents[2] / "docs" / "ci.md"
MARK = "tests/processes/test_ci_recipe.py"
STEP_RE = re.compile(r"^\s*- name: (?P<name>.+)\n\s*run: (?P<run>.+)$", re.MULTILINE)
TESTS = "def test_one():\n    assert 1 + 1 == 2\n"


def recipe_steps() -> list[tuple[str, str]]:
    """(name, command) of each `run:` step of the yaml block the doc says this test runs."""
    text = DOC.read_text()
    after = text[text.index(MARK) :]
    block = after[after.index("```yaml") : after.index("```", after.index("```yaml") + 7)]
    return [(m["name"], m["run"]) for m in STEP_RE.finditer(block)]


def run_step(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    venv_bin = os.path.dirname(sys.executable)  # `lanewatch`, `python`, `pytest` of this venv
    path = f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"
    env = inner_pytest_env({**os.environ, "PATH": path})  # the recipe's pytest is an inner one
    return subprocess.run(
        ["bash", "-e", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def project(repo: Path) -> Path:
    """A checkout with a test suite, as actions/checkout leaves it."""
    (repo / "test_sum.py").write_text(TESTS)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "tests", cwd=repo)
    return repo


def test_the_recipe_parses_into_prove_then_gate() -> None:
    commands = [run for _, run in recipe_steps()]
    prove = next(i for i, c in enumerate(commands) if c.startswith("lanewatch prove tests"))
    gate = next(i for i, c in enumerate(commands) if c.startswith("lanewatch gate tests"))
    assert commands[0].startswith("pip install") and 0 < prove < gate


def test_the_recipe_runs_green_step_by_step(project: Path) -> None:
    for name, command in recipe_steps():
        if command.startswith("pip install"):
            continue  # this venv has lanewatch, pytest and pytest-xdist
        done = run_step(command, project)
        assert done.returncode == 0, f"step {name!r}: {done.stdout}{done.stderr}"
        if command.startswith("lanewatch prove"):
            assert "ran in lane default-gw0" in done.stdout  # the plugin, nested in prove
        if command.startswith("lanewatch gate"):
            assert "lanewatch gate: pass" in done.stdout


def test_a_step_that_changes_the_tree_fails_the_recipes_gate(project: Path) -> None:
    for _name, command in recipe_steps():
        if command.startswith("pip install"):
            continue
        if command.startswith("lanewatch gate"):
            (project / "test_sum.py").write_text(TESTS + "# changed after the proof\n")
            refused = run_step(command, project)
            assert refused.returncode == 13, refused.stderr  # tree-changed
            assert "refused (tree-changed)" in refused.stderr
            return
        assert run_step(command, project).returncode == 0
    pytest.fail("the recipe has no gate step")
