"""Checkout identity, `lanewatch id`, and the fail-closed refusal when nothing binds a lane."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lanewatch.errors import Unbound
from lanewatch.lanes.checkout import (
    ENV_CHECKOUT,
    checkout_id_for,
    find_checkout,
    resolve_checkout,
)
from lanewatch.lanes.lane import Lane, locate, scratch_dir_for
from lanewatch.lanes.names import namespace_name
from lanewatch.lanes.scheme import SCHEME_VERSION
from tests.conftest import LANEWATCH, git, lanewatch

HOW_TO_BIND = re.compile(r"--checkout.*LANEWATCH_CHECKOUT", re.S)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder with no git checkout anywhere above it."""
    path = tmp_path / "outside"
    path.mkdir()
    if find_checkout(path) is not None:
        pytest.skip(f"{tmp_path} lies inside a git checkout; cannot test the unbound case")
    return path


def test_two_worktrees_of_one_repo_get_different_ids(worktrees: tuple[Path, Path]) -> None:
    main, side = worktrees
    a, b = find_checkout(main), find_checkout(side)
    assert a is not None and b is not None
    assert a.checkout_id != b.checkout_id
    assert a.common_dir == b.common_dir == os.path.realpath(main / ".git")
    assert a.git_dir != b.git_dir
    assert a.root == os.path.realpath(main) and b.root == os.path.realpath(side)


def test_a_symlinked_path_gets_the_same_id(repo: Path, tmp_path: Path) -> None:
    (repo / "sub" / "deeper").mkdir(parents=True)
    link = tmp_path / "link-to-repo"
    link.symlink_to(repo)
    direct = find_checkout(repo)
    assert direct is not None
    for path in (link, link / "sub", link / "sub" / "deeper", repo / "sub", repo / "README"):
        found = find_checkout(path)
        assert found == direct, path


def test_ids_of_odd_folder_names_make_valid_namespace_names(tmp_path: Path) -> None:
    for name in ["Ünïcödé", "a.b.c", "---", "x" * 200, "my repo (copy)", "日本"]:
        cid = checkout_id_for(str(tmp_path / name))
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*-[0-9a-f]{12}", cid), cid
        assert "." not in cid
        namespace_name(cid, "lane")  # accepted
    assert checkout_id_for("/a/repo") != checkout_id_for("/b/repo")
    assert checkout_id_for("/a/repo") == checkout_id_for("/a/repo")


def test_id_json_names_checkout_and_common_dir(
    worktrees: tuple[Path, Path], tmp_path: Path
) -> None:
    main, side = worktrees
    outs = []
    for cwd in (main, side):
        result = lanewatch("id", "--json", cwd=cwd)
        assert result.returncode == 0, result.stderr
        outs.append(json.loads(result.stdout))
    a, b = outs
    assert a.pop("schema") == b.pop("schema") == "lanewatch.id/1"
    assert set(a) == {"checkout_id", "slug", "root", "git_dir", "common_dir", "scheme"}
    assert a["checkout_id"] != b["checkout_id"]
    assert a["root"] == os.path.realpath(main)
    assert b["root"] == os.path.realpath(side)
    assert a["common_dir"] == b["common_dir"] == os.path.realpath(main / ".git")
    assert a["slug"] == "repo" and b["slug"] == "repo-wt"
    assert a.pop("scheme") == b["scheme"] == SCHEME_VERSION
    assert a == find_checkout(main).to_json()  # type: ignore[union-attr]

    link = tmp_path / "side-link"
    link.symlink_to(side)
    via_link = lanewatch("id", "--json", cwd=link)
    assert json.loads(via_link.stdout) == {"schema": "lanewatch.id/1", **b}

    text = lanewatch("id", cwd=side)
    assert text.returncode == 0
    assert b["checkout_id"] in text.stdout and b["common_dir"] in text.stdout


def test_git_agrees_on_worktree_root_and_common_dir(worktrees: tuple[Path, Path]) -> None:
    for wt in worktrees:
        bound = find_checkout(wt / "README")
        assert bound is not None
        assert bound.root == git("rev-parse", "--show-toplevel", cwd=wt).strip()
        common = git("rev-parse", "--git-common-dir", cwd=wt).strip()
        assert bound.common_dir == os.path.realpath(wt / common)


def test_id_refuses_outside_a_checkout(outside: Path) -> None:
    result = lanewatch("id", "--json", cwd=outside)
    assert result.returncode == 6
    assert result.stdout == ""
    assert "not inside a git checkout" in result.stderr
    assert HOW_TO_BIND.search(result.stderr)
    assert "Traceback" not in result.stderr


def test_run_refuses_outside_a_checkout_and_runs_nothing(
    outside: Path, isolated_state: Path
) -> None:
    marker = outside / "ran"
    result = lanewatch(
        "run", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", cwd=outside
    )
    assert result.returncode == 6
    assert HOW_TO_BIND.search(result.stderr)
    assert not marker.exists()
    assert not (isolated_state / "scratch").exists()  # nothing claimed, no fallback folder


def test_library_refuses_outside_a_checkout(
    outside: Path, isolated_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(outside)
    for attempt in (
        lambda: scratch_dir_for("worker-1"),
        lambda: Lane("worker-1"),
        lambda: locate("worker-1"),
        lambda: resolve_checkout(),
    ):
        with pytest.raises(Unbound) as info:
            attempt()
        assert HOW_TO_BIND.search(str(info.value))
    assert not (isolated_state / "scratch").exists()
    assert list(outside.iterdir()) == []


def test_an_explicit_path_that_is_not_a_checkout_is_refused(outside: Path, repo: Path) -> None:
    with pytest.raises(Unbound) as info:
        resolve_checkout(outside)
    assert HOW_TO_BIND.search(str(info.value))
    with pytest.raises(Unbound) as info:
        resolve_checkout(outside / "missing")
    assert HOW_TO_BIND.search(str(info.value))
    result = lanewatch("id", "--checkout", str(outside / "missing"), cwd=repo)
    assert result.returncode == 6 and "Traceback" not in result.stderr


def test_env_binding_from_outside(
    worktrees: tuple[Path, Path], outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main, side = worktrees
    env = {**os.environ, ENV_CHECKOUT: str(side)}
    result = lanewatch("id", "--json", cwd=outside, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["root"] == os.path.realpath(side)

    ran = lanewatch(
        "run",
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['LANEWATCH_CHECKOUT'])",
        cwd=outside,
        env=env,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == os.path.realpath(side)

    monkeypatch.chdir(outside)
    monkeypatch.setenv(ENV_CHECKOUT, str(side))
    assert resolve_checkout() == find_checkout(side)
    assert resolve_checkout(main) == find_checkout(main)  # an explicit path wins over the env


def test_a_bad_env_binding_never_falls_back_to_the_cwd(
    repo: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    monkeypatch.setenv(ENV_CHECKOUT, str(outside))
    with pytest.raises(Unbound, match=ENV_CHECKOUT):
        resolve_checkout()
    result = lanewatch("id", cwd=repo, env={**os.environ, ENV_CHECKOUT: str(outside)})
    assert result.returncode == 6


def test_checkout_flag_binds_run_from_outside(repo: Path, outside: Path, root: Path) -> None:
    result = lanewatch(
        "run",
        "--checkout",
        str(repo),
        "--root",
        str(root),
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['LANEWATCH_NAMESPACE'])",
        cwd=outside,
    )
    assert result.returncode == 0, result.stderr
    expected = locate("default", root=root, checkout=repo).namespace
    assert result.stdout.strip() == str(expected)


def test_nested_run_inherits_the_binding(repo: Path, outside: Path, root: Path) -> None:
    """A child of `lanewatch run` that calls the library is bound to the same checkout."""
    code = (
        "from lanewatch.lanes.checkout import resolve_checkout; "
        "print(resolve_checkout().checkout_id)"
    )
    run = [*LANEWATCH, "run", "--checkout", str(repo), "--root", str(root)]
    result = subprocess.run(
        [*run, "--", sys.executable, "-c", code],
        cwd=outside,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == find_checkout(repo).checkout_id  # type: ignore[union-attr]


def test_a_removed_current_directory_is_unbound(tmp_path: Path, repo: Path) -> None:
    gone = repo / "gone"
    gone.mkdir()
    code = (
        "import os, sys\n"
        "os.chdir(sys.argv[1]); os.rmdir(sys.argv[1])\n"
        "sys.argv = ['lanewatch', 'id']\n"
        "from lanewatch.cli.group import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(gone)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 6
    assert HOW_TO_BIND.search(result.stderr) and "Traceback" not in result.stderr
