"""The roots registry: the default root, `lanewatch roots`, and concurrent updates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanewatch.lanes.roots import ROOT_META, Registry, default_root, ensure_root, state_dir
from tests.conftest import Spawn, lanewatch, wait_for

WRITERS = 8

ADDER = textwrap.dedent(
    """
    import os, sys, time
    from lanewatch.lanes.roots import Registry
    barrier, ready, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    open(ready, "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(barrier):
        if time.monotonic() > deadline:
            sys.exit(99)
        time.sleep(0.002)
    for path in paths:
        Registry().add(path)
    """
)


def listed(cwd: Path) -> list[dict[str, object]]:
    result = lanewatch("roots", "list", "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == "lanewatch.roots/1"
    rows: list[dict[str, object]] = data["roots"]
    assert all(r["path"] == r["root"] for r in rows)  # `path`: the old name, kept for 0.2
    return rows


def test_default_root_lives_in_the_state_dir(
    isolated_state: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert state_dir() == isolated_state
    assert default_root() == isolated_state / "scratch"
    monkeypatch.setenv("LANEWATCH_ROOT", str(tmp_path / "elsewhere"))
    assert default_root() == tmp_path / "elsewhere"
    assert Registry().paths()[0] == (tmp_path / "elsewhere").resolve()


def test_list_add_remove(tmp_path: Path, isolated_state: Path) -> None:
    first = listed(tmp_path)
    assert [e["path"] for e in first] == [str((isolated_state / "scratch").resolve())]

    extra = tmp_path / "extra root"
    added = lanewatch("roots", "add", str(extra), cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "added" in added.stdout
    assert (extra / ROOT_META).is_dir()  # created, with its meta folder
    again = lanewatch("roots", "add", str(extra), cwd=tmp_path)
    assert "already known" in again.stdout

    paths = [e["path"] for e in listed(tmp_path)]
    assert paths == [str((isolated_state / "scratch").resolve()), str(extra.resolve())]
    text = lanewatch("roots", cwd=tmp_path)
    lines = text.stdout.splitlines()
    assert lines[0].endswith("(default)") and lines[1] == str(extra.resolve())

    removed = lanewatch("roots", "remove", str(extra), cwd=tmp_path)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert extra.is_dir()  # its files are left alone
    assert [e["path"] for e in listed(tmp_path)] == [str((isolated_state / "scratch").resolve())]
    gone = lanewatch("roots", "remove", str(extra), cwd=tmp_path)
    assert "not registered" in gone.stdout


def test_the_default_root_is_marked_through_a_symlinked_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-state"
    real.mkdir()
    link = tmp_path / "state-link"
    link.symlink_to(real)
    env = {**os.environ, "LANEWATCH_STATE_DIR": str(link)}
    result = lanewatch("roots", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{real / 'scratch'}  (default)"]


def test_the_default_root_stays_first_once_registered(tmp_path: Path, isolated_state: Path) -> None:
    registry = Registry()
    registry.add(ensure_root(tmp_path / "first-added"))
    registry.add(ensure_root(default_root()))  # as a run in the default root does
    paths = registry.paths()
    assert paths == [(isolated_state / "scratch").resolve(), (tmp_path / "first-added").resolve()]


def test_symlinked_paths_register_once(tmp_path: Path) -> None:
    real = ensure_root(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    registry = Registry()
    assert registry.add(real) == (real, True)
    assert registry.add(link) == (real, False)
    assert registry.remove(link) is True
    assert registry.remove(real) is False


def test_a_run_registers_its_root(repo: Path, tmp_path: Path) -> None:
    custom = tmp_path / "custom-root"
    result = lanewatch("run", "--root", str(custom), "--", "true", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert str(custom.resolve()) in [e["path"] for e in listed(tmp_path)]
    via_env = tmp_path / "env-root"
    env = {**os.environ, "LANEWATCH_ROOT": str(via_env)}
    assert lanewatch("run", "--", "true", cwd=repo, env=env).returncode == 0
    assert (via_env / ROOT_META).is_dir()
    assert str(via_env.resolve()) in [e["path"] for e in listed(tmp_path)]


def test_concurrent_adds_lose_no_entry(spawn: Spawn, tmp_path: Path) -> None:
    barrier = tmp_path / "go"
    expected: set[str] = set()
    writers = []
    for i in range(WRITERS):
        paths = [str(tmp_path / "roots" / f"w{i}-{j}") for j in range(3)]
        expected.update(paths)
        ready = tmp_path / f"ready-{i}"
        writers.append(
            (spawn([sys.executable, "-c", ADDER, str(barrier), str(ready), *paths]), ready)
        )
    wait_for(lambda: all(ready.exists() for _, ready in writers), 60)
    barrier.touch()
    for proc, _ in writers:
        assert proc.wait(timeout=60) == 0
    registered = {e.path for e in Registry().list()}
    assert expected <= registered
    assert len(registered) == len(expected) + 1  # and the default root
    data = json.loads((state_dir() / "roots.json").read_text())
    assert len(data["roots"]) == len(expected)


@pytest.mark.unprivileged
def test_a_corrupt_registry_is_kept_aside_and_rebuilt_by_a_run(repo: Path, tmp_path: Path) -> None:
    kept = ensure_root(tmp_path / "kept root")
    state_dir().mkdir(parents=True)
    path = state_dir() / "roots.json"
    corrupt = json.dumps({"roots": [{"path": str(kept), "added_at": 7}, {"path": "/gone"}]})
    path.write_text(corrupt[:-9])  # cut short, as by a full disk or a stray editor
    custom = tmp_path / "custom-root"
    result = lanewatch("run", "--root", str(custom), "--", "true", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("lanewatch: ") == 1 and "was corrupt" in result.stderr
    (aside,) = state_dir().glob("roots.json.corrupt-*")
    assert aside.read_text() == corrupt[:-9] and str(aside) in result.stderr
    entries = listed(tmp_path)
    assert [(e["path"], e["added_at"]) for e in entries[1:2]] == [(str(kept), 7.0)]
    assert [e["path"] for e in entries[2:]] == [str(custom.resolve())]  # not "/gone"
    again = lanewatch("run", "--root", str(custom), "--", "true", cwd=repo)
    assert again.returncode == 0 and again.stderr == ""  # said once
    assert len(list(state_dir().glob("roots.json.corrupt-*"))) == 1


@pytest.mark.unprivileged
@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b"[]", b'{"roots": "x"}'])
def test_a_reader_rebuilds_a_corrupt_registry_too(tmp_path: Path, content: bytes) -> None:
    state_dir().mkdir(parents=True)
    (state_dir() / "roots.json").write_bytes(content)
    told: list[str] = []
    assert Registry(tell=told.append).paths() == [default_root().resolve()]
    (aside,) = state_dir().glob("roots.json.corrupt-*")
    assert aside.read_bytes() == content and len(told) == 1
    assert json.loads((state_dir() / "roots.json").read_text())["roots"] == []
    result = lanewatch("roots", "list", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.unprivileged
def test_concurrent_runs_rebuild_a_corrupt_registry_once(spawn: Spawn, tmp_path: Path) -> None:
    state_dir().mkdir(parents=True)
    (state_dir() / "roots.json").write_text("{not json")
    barrier = tmp_path / "go"
    expected: set[str] = set()
    writers = []
    for i in range(4):
        paths = [str(tmp_path / "roots" / f"w{i}-{j}") for j in range(2)]
        expected.update(paths)
        ready = tmp_path / f"ready-{i}"
        proc = spawn(
            [sys.executable, "-c", ADDER, str(barrier), str(ready), *paths],
            stderr=subprocess.PIPE,
        )
        writers.append((proc, ready))
    wait_for(lambda: all(ready.exists() for _, ready in writers), 60)
    barrier.touch()
    said = []
    for proc, _ in writers:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        said.append(err.decode())
    assert sum(s.count("was corrupt") for s in said) == 1
    assert len(list(state_dir().glob("roots.json.corrupt-*"))) == 1
    assert expected <= {e.path for e in Registry().list()}


def test_odd_registry_entries_are_skipped(tmp_path: Path) -> None:
    state_dir().mkdir(parents=True)
    (state_dir() / "roots.json").write_text(
        json.dumps({"roots": [{"path": "/a", "added_at": 5}, {"path": 3}, "x", {"path": "/b"}]})
    )
    assert [e.path for e in Registry().list()][1:] == ["/a", "/b"]
