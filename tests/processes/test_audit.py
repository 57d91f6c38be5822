"""`lanewatch audit` on a real sample repository (git init under tmp_path) whose tests write a
fixed /tmp file, a file under ~/.cache/<tool>/ and a file inside the checkout: the real CLI runs
the sample's pytest in 2 fenced lanes of 2 temporary worktrees, as root and as a normal user.

HOME is a folder under tmp_path; the sample's "fixed /tmp file" has a unique name anyway, and the
test asserts the real /tmp never sees it (it lands in each fence's private /tmp).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from lanewatch.cli.exits import Exit
from tests.conftest import LANEWATCH, git, inner_pytest_env, wait_for
from tests.kits.contractkit import parsed

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

DEBT = """
import os
import pathlib

def test_fixed_tmp():
    pathlib.Path({fixed!r}).write_text("fixed")

def test_tool_cache():
    cache = pathlib.Path(os.environ["HOME"]) / ".cache" / {tool!r}
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "state.json").write_text("{{}}")

def test_checkout_output():
    pathlib.Path("out").mkdir(exist_ok=True)
    pathlib.Path("out/result.txt").write_text("result")
"""

FIXED = """
def test_fixed_tmp(tmp_path):
    (tmp_path / "fixed").write_text("fixed")

def test_tool_cache(tmp_path):
    (tmp_path / "state.json").write_text("{}")

def test_checkout_output(tmp_path):
    (tmp_path / "result.txt").write_text("result")
"""


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, str, str, Path]:
    """The sample repository, the fixed /tmp path its test writes, its tool's name, its HOME."""
    repo = tmp_path / "sample"
    repo.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    fixed = f"/tmp/lanewatch-audit-sample-{uuid.uuid4().hex}.txt"
    tool = f"sampletool-{uuid.uuid4().hex[:8]}"
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "test_sample.py").write_text(DEBT.format(fixed=fixed, tool=tool))
    git("add", "test_sample.py", cwd=repo)
    git("commit", "-q", "-m", "sample", cwd=repo)
    return repo, fixed, tool, home


def audit(
    *args: str, cwd: Path, home: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LANEWATCH, "audit", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=inner_pytest_env({**os.environ, "HOME": str(home), **(env or {})}),
        stdin=subprocess.DEVNULL,
    )


def by_path(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in report["findings"]}


def test_the_sample_debt_is_reported_classified_and_named_then_gone_once_fixed(
    sample: tuple[Path, str, str, Path],
) -> None:
    repo, fixed, tool, home = sample
    done = audit("--parallel", "2", "--json", "--", *PYTEST, cwd=repo, home=home)
    assert done.returncode == Exit.COLLISION, (done.stdout, done.stderr)
    report = parsed("audit", done.stdout)
    assert [r["exit_code"] for r in report["runs"]] == [0, 0], report["runs"]
    assert [r["home"] for r in report["runs"]] == ["overlay", "overlay"]
    found = by_path(report)
    tmp = found[fixed]
    assert (tmp["scope"], tmp["shared"], tmp["runs"]) == ("unbound", True, [0, 1])
    assert tmp["tests"] == ["test_sample.py::test_fixed_tmp"]
    cache = found[f"~/.cache/{tool}/state.json"]
    assert (cache["scope"], cache["owner"], cache["shared"]) == (
        "product-scoped",
        f"~/.cache/{tool}",
        True,
    )
    assert cache["tests"] == ["test_sample.py::test_tool_cache"]
    out = found["<checkout>/out/result.txt"]
    assert (out["scope"], out["shared"], out["runs"]) == ("checkout-scoped", False, [0, 1])
    assert out["tests"] == ["test_sample.py::test_checkout_output"]
    assert report["shared"] == 2, [
        (f["path"], f["writes"]) for f in report["findings"] if f["shared"]
    ]
    if os.geteuid() != 0:  # a normal user: what kernel attribution would see is said unseen
        assert report["kernel"] != "on"
        assert any("/dev/shm" in u and "needs root" in u for u in report["unseen"])
        assert any(u.startswith("reads:") for u in report["unseen"])
        assert not any(f["reads_seen"] for f in report["findings"])
    else:
        assert report["kernel"] == "on"
    # Nothing reached the real places: the fence's private /tmp, the overlay on HOME.
    assert not os.path.lexists(fixed)
    assert not (home / ".cache").exists()
    # The audit removed its worktrees (and their entries in the repository) and its folder.
    assert git("worktree", "list", "--porcelain", cwd=repo).count("worktree ") == 1
    assert not os.path.exists(report["work_dir"])

    (repo / "test_sample.py").write_text(FIXED)
    git("commit", "-q", "-am", "use tmp_path", cwd=repo)
    done = audit("--parallel", "2", "--json", "--", *PYTEST, cwd=repo, home=home)
    assert done.returncode == Exit.OK, (done.stdout, done.stderr)
    report = parsed("audit", done.stdout)
    assert report["ok"] and report["shared"] == 0
    left = [(f["path"], f["scope"], f["runs"]) for f in report["findings"]]
    assert report["counts"]["unbound"] == report["counts"]["product-scoped"] == 0, left


@pytest.mark.parametrize("way", ["kernel", "bwrap"])
def test_the_markdown_queue_names_the_test_and_the_fix(
    sample: tuple[Path, str, str, Path], way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if way == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    monkeypatch.setenv("LANEWATCH_FENCE_WITH", way)  # both ways of fencing (docs/fence.md)
    repo, fixed, tool, home = sample
    argv = [*PYTEST, "-k", "tmp or cache"]
    done = audit("--markdown", "--", *argv, cwd=repo, home=home)
    assert done.returncode == Exit.COLLISION, (done.stdout, done.stderr)
    text = done.stdout
    assert f"## `{fixed}`" in text and f"## `~/.cache/{tool}/state.json`" in text
    assert "`test_sample.py::test_fixed_tmp`" in text
    assert "`test_sample.py::test_tool_cache`" in text
    assert "use `tmp_path`" in text and "**COLLISION**" in text
    assert "## Not seen" in text
    done = audit("--json", "--", *argv, cwd=repo, home=home)
    report = parsed("audit", done.stdout)
    assert [r["fence"] for r in report["runs"]] == [way, way]  # the way asked for was used
    assert report["shared"] == 2, report["findings"]


def test_two_lanes_of_one_checkout_share_its_files(
    sample: tuple[Path, str, str, Path], tmp_path: Path
) -> None:
    repo, _fixed, _tool, home = sample
    argv = ["--checkout", str(repo), "--parallel", "2", "--json", "--"]
    done = audit(*argv, *PYTEST, "-k", "checkout", cwd=tmp_path, home=home)
    assert done.returncode == Exit.COLLISION, (done.stdout, done.stderr)
    report = parsed("audit", done.stdout)
    assert any("sharing one checkout" in u for u in report["unseen"])
    out = by_path(report)["<checkout>/out/result.txt"]
    assert (out["scope"], out["shared"]) == ("checkout-scoped", True)
    assert (repo / "out" / "result.txt").exists()  # the given checkout is real, not a copy


def test_outside_a_checkout_is_unbound(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = audit("--", "true", cwd=plain, home=tmp_path)
    assert done.returncode == Exit.UNBOUND, done.stderr
    assert "Traceback" not in done.stderr
    json.dumps(done.stdout)  # nothing half-printed to choke on


SLEEPER = """
import os, pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL ends it
(pathlib.Path(sys.argv[1]) / str(os.getpid())).write_text("")
time.sleep(600)
"""


def test_a_timeout_ends_every_run_and_the_audit_is_incomplete(
    sample: tuple[Path, str, str, Path], tmp_path: Path
) -> None:
    repo, _fixed, _tool, home = sample
    (repo / "hang.py").write_text(SLEEPER)
    git("add", "hang.py", cwd=repo)
    git("commit", "-q", "-m", "a step that hangs and ignores SIGTERM", cwd=repo)
    pids = tmp_path / "pids"
    pids.mkdir()
    # 10 s: time enough for both runs to start on a loaded machine (asserted below).
    argv = ["--parallel", "2", "--timeout", "10", "--json", "--", sys.executable, "hang.py"]
    done = audit(*argv, str(pids), cwd=repo, home=home)
    assert done.returncode == Exit.INCOMPLETE, (done.stdout, done.stderr)
    report = parsed("audit", done.stdout)
    assert report["timed_out"] == [0, 1] and report["timeout"] == 10
    hung = [int(p.name) for p in pids.iterdir()]
    assert len(hung) == 2, "both runs' commands had started"
    assert all("SIGTERM, then SIGKILL" in r["error"] for r in report["runs"]), report["runs"]
    for pid in hung:  # SIGKILL reached CMD's group, not only the runner
        wait_for(lambda pid=pid: not _alive(pid), 10, what=f"pid {pid} ended")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


PLUGIN = """
def pytest_configure(config):
    assert config is not None  # rewritten by pytest: `-p` plugins are
"""


def test_a_venv_in_home_fills_with_bytecode_and_that_is_no_finding(
    sample: tuple[Path, str, str, Path],
) -> None:
    """As a normal user with a venv in $HOME, pytest's assertion-rewritten `.pyc` of
    the plugins in its site-packages (and Python's own) were SHARED product-scoped findings
    and the audit exited 4. They are derived from their source and written atomically: left
    out, and counted. The checkout's `.pytest_cache` fix says what to type."""
    repo, _fixed, _tool, home = sample
    site = home / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "homeplugin.py").write_text(PLUGIN)
    (site / "homehelper.py").write_text("VALUE = 1\n")
    (repo / "test_clean.py").write_text(
        "import homehelper\n\ndef test_clean(tmp_path):\n    assert homehelper.VALUE == 1\n"
    )
    git("add", "test_clean.py", cwd=repo)
    git("commit", "-q", "-m", "clean", cwd=repo)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "homeplugin", "test_clean.py"]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    bytecode = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [*LANEWATCH, "audit", "--parallel", "2", "--json", "--", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=repo,
        env=inner_pytest_env({**bytecode, "HOME": str(home), **env}),
        stdin=subprocess.DEVNULL,
    )
    report = parsed("audit", done.stdout)
    assert [r["exit_code"] for r in report["runs"]] == [0, 0], report["runs"]
    assert done.returncode == Exit.OK, [f["path"] for f in report["findings"] if f["shared"]]
    paths = [f["path"] for f in report["findings"]]
    assert not [p for p in paths if "__pycache__" in p], paths
    # pytest's rewritten plugin, Python's helper module, the checkout's test module
    assert report["bytecode_caches"] >= 3, report
    cache = by_path(report)["<checkout>/.pytest_cache/v/cache/nodeids"]
    assert "-p no:cacheprovider" in cache["fix"] and "cache_dir=" in cache["fix"]
    assert "lanewatch.lanes" not in " ".join(f["fix"] for f in report["findings"])
    text = subprocess.run(
        [*LANEWATCH, "audit", "--parallel", "2", "--", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=repo,
        env=inner_pytest_env({**bytecode, "HOME": str(home), **env}),
        stdin=subprocess.DEVNULL,
    )
    assert text.returncode == Exit.OK and "left out:" in text.stdout and "bytecode" in text.stdout
