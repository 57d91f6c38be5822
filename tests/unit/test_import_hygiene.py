"""The core imports no UI and no watcher: checked in a fresh interpreter, as harlequin does."""

from __future__ import annotations

import importlib.util
import json
import pkgutil
import subprocess
import sys
import textwrap

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


CORE = ("lanewatch.lanes", "lanewatch.proof", "lanewatch.model", "lanewatch.linux")


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
    the dashboard, the watcher or psutil (cli/main.py loads each command lazily)."""
    probe = (
        "import json, sys\n"
        "from lanewatch.cli.main import load_command\n"
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
