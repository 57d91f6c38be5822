"""The core imports no UI and no watcher: checked in a fresh interpreter, as harlequin does."""

from __future__ import annotations

import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

UI_AND_WATCHERS = ("textual", "watchdog")

PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    modules = sys.argv[1:]
    for name in modules:
        importlib.import_module(name)
    roots = sorted({m.split(".")[0] for m in sys.modules})
    print(json.dumps({"loaded": roots, "imported": modules}))
    """
)


CORE = (
    "lanewatch.lanes",
    "lanewatch.runner",
    "lanewatch.proof",
    "lanewatch.model",
    "lanewatch.linux",
)


def core_modules() -> list[str]:
    names = ["lanewatch.errors", "lanewatch.inert"]
    for package in CORE:
        names.append(package)
        path = importlib.import_module(package).__path__
        names += [m.name for m in pkgutil.iter_modules(path, package + ".")]
    return names


def loaded_after_importing(modules: list[str]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *modules],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout)["loaded"])


def test_the_core_loads_neither_textual_nor_watchdog() -> None:
    modules = core_modules()
    assert "lanewatch.lanes.lane" in modules and "lanewatch.lanes.stamp" in modules
    loaded = loaded_after_importing(modules)
    assert not loaded & set(UI_AND_WATCHERS), sorted(loaded & set(UI_AND_WATCHERS))


@pytest.mark.parametrize(
    "module",
    ["lanewatch.lanes.lane", "lanewatch.lanes.stamp", "lanewatch.lanes.checkout"],
)
def test_the_scheme_stays_small(module: str) -> None:
    """The scheme runs in hooks and test workers: only stdlib, filelock and platformdirs."""
    loaded = loaded_after_importing([module])
    assert not loaded & {*UI_AND_WATCHERS, "psutil", "rich", "click"}


def test_the_probe_would_notice() -> None:
    """Guard against a probe that can never fail."""
    assert "json" in loaded_after_importing(["json"])


def test_hook_and_lane_commands_load_only_what_they_use() -> None:
    """`run`, `gate` and `id` sit in git hooks and agent loops: loading them must not pull in
    the dashboard, the watcher or psutil (cli/group.py loads each command lazily)."""
    probe = (
        "import json, sys\n"
        "from lanewatch.cli.group import load_command\n"
        "for name in ('run', 'gate', 'id', 'prove'):\n"
        "    load_command(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert not loaded & {"textual", "watchdog", "psutil"}, sorted(loaded)
    assert "click" in loaded  # the probe really loaded the commands


# Runs `lanewatch run ARGS` in this interpreter and writes every module it loaded, on exit.
RUN_PROBE = textwrap.dedent(
    """
    import atexit, json, runpy, sys
    out = sys.argv[1]
    atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
    sys.argv = ["lanewatch", "run", *sys.argv[2:]]
    runpy.run_module("lanewatch", run_name="__main__", alter_sys=True)
    """
)
# What `lanewatch run` may load of lanewatch: the entry point and its path without click
# (cli/lanes/run_fast.py), the core it runs.
RUN_CLI = {"entry", "lanes", "lanes.run_fast", "common", "exits"}
RUN_PACKAGES = ("lanewatch.lanes.", "lanewatch.runner.", "lanewatch.linux.")
RUN_MODULES = {"lanewatch", "lanewatch.__main__", "lanewatch.cli", "lanewatch.errors"}
RUN_MODULES |= {"lanewatch.inert", "lanewatch.lanes", "lanewatch.runner", "lanewatch.linux"}
# The standard library's parts that `run` does without: shlex only for the tmux advice
# (runner/launchers.py), logging only for a warning (lanes/logs.py); no tempfile, no asyncio.
RUN_NEVER_STDLIB = {"shlex", "logging", "tempfile", "asyncio"}


@pytest.mark.unprivileged
@pytest.mark.parametrize("fence", ["none", "auto"])
def test_run_loads_no_other_command_no_ui_and_no_watcher(
    fence: str, repo: Path, tmp_path: Path
) -> None:
    """`lanewatch run` sits in hooks and agent loops and must start fast (`run_start` in
    docs/performance.md): it loads neither the dashboard, the watcher, psutil, nor another
    command's module, nor what its own start does without (filelock, platformdirs, the roots
    registry's completion), nor click. A real run, in a fresh interpreter; its sys.modules at
    exit."""
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "LANEWATCH_STATE_DIR"}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    args = ["--lane", "hygiene", "--fence", fence, "--", "true"]
    done = subprocess.run(
        [sys.executable, "-c", RUN_PROBE, str(out), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(out.read_text()))
    assert "lanewatch.runner.run" in loaded  # it really ran
    tops = {m.split(".")[0] for m in loaded}
    assert not tops & {*UI_AND_WATCHERS, "psutil", "filelock", "platformdirs"}, sorted(tops)
    assert "click" not in tops  # its usual forms start without click (cli/lanes/run_fast.py)
    assert not tops & RUN_NEVER_STDLIB, sorted(tops & RUN_NEVER_STDLIB)
    ours = {m for m in loaded if m == "lanewatch" or m.startswith("lanewatch.")}
    allowed = RUN_MODULES | {f"lanewatch.cli.{m}" for m in RUN_CLI}
    extra = {m for m in ours - allowed if not m.startswith(RUN_PACKAGES)}
    assert not extra, sorted(extra)  # e.g. lanewatch.cli.lanes.status_cmd, lanewatch.tui...
    assert "lanewatch.lanes.roots" in loaded  # the guard above sees lanewatch's own modules


@pytest.mark.parametrize(
    ("xdg", "home"),
    [
        ("/xdg/state", "/home/ann"),
        ("", "/home/ann"),
        ("", "/home/ann/"),
        ("", "/"),
        ("relative/state", "/home/ann"),
    ],
)
def test_the_state_dir_without_platformdirs_is_platformdirs_answer(
    xdg: str, home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` finds the state folder without importing platformdirs (lanes/roots.py) in the
    common Linux case; it must be the very folder platformdirs names."""
    import platformdirs

    from lanewatch.lanes import roots

    if sys.platform != "linux":
        pytest.skip("the fast path is Linux's")
    monkeypatch.setenv("XDG_STATE_HOME", xdg)
    monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("ANDROID_DATA", raising=False)
    fast = roots._xdg_state_dir()
    assert fast is not None  # every case above is a common one: the fast path answers
    assert fast == platformdirs.user_state_dir("lanewatch")
    monkeypatch.setenv("HOME", "relative")  # and where it cannot say, it leaves it to them
    assert roots._xdg_state_dir() is None or xdg.startswith("/")
