"""The layers in pyproject's [tool.importlinter] hold, and `lint-imports` really fails when one
is broken: a violation is planted in a copy of the package under tmp_path, never in the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
PACKAGE = PROJECT / "app" / "lanewatch"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, src: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package found under `src`, with the contracts of `cwd`."""
    if not LINT_IMPORTS.exists():
        pytest.skip("lint-imports is not installed: pip install -e . --group dev brings it")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"],
        cwd=cwd,
        # The copy first: an editable install would otherwise hand grimp the real package.
        env={**os.environ, "PYTHONPATH": str(src)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package and its contracts, copied under tmp_path: `copy/src/lanewatch`."""
    shutil.copytree(
        PACKAGE, tmp_path / "src" / "lanewatch", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(PROJECT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def plant(copy: Path, module: str, line: str) -> None:
    path = copy / "src" / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_layers_hold_today() -> None:
    result = lint_imports(PROJECT, PROJECT / "app")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_textual_planted_in_the_core_fails_naming_the_contract(copy: Path) -> None:
    assert lint_imports(copy, copy / "src").returncode == 0  # the untouched copy passes
    plant(copy, "lanewatch.model.views", "import textual  # planted")
    result = lint_imports(copy, copy / "src")
    assert result.returncode != 0
    assert "The core imports no UI, watcher, psutil, rich or click BROKEN" in result.stdout
    assert "Only the dashboard imports Textual BROKEN" in result.stdout
    assert "lanewatch.model.views -> textual" in result.stdout


def test_an_upward_import_breaks_the_layers(copy: Path) -> None:
    plant(copy, "lanewatch.lanes.stamp", "import lanewatch.engine.engine  # planted")
    result = lint_imports(copy, copy / "src")
    assert result.returncode != 0
    assert "Layers: top to bottom BROKEN" in result.stdout
    assert "lanewatch.lanes.stamp -> lanewatch.engine.engine" in result.stdout


def outside_the_stdlib(package: str) -> set[str]:
    """The top-level names `package` imports directly that are neither stdlib nor its own."""
    import grimp  # import-linter's graph builder

    graph = grimp.build_graph("lanewatch", include_external_packages=True)
    found: set[str] = set()
    for module in graph.find_descendants(package) | {package}:
        for imported in graph.find_modules_directly_imported_by(module):
            top = imported.split(".")[0]
            if top != "lanewatch" and top not in sys.stdlib_module_names:
                found.add(top)
    return found


def test_the_linux_layer_imports_only_the_stdlib() -> None:
    """The forbidden contract names the dependencies we have; this catches any new one too."""
    pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")
    assert outside_the_stdlib("lanewatch.linux") == set()
    assert "platformdirs" in outside_the_stdlib("lanewatch.lanes")  # the check would notice
