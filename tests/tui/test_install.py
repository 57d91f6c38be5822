"""The shipped package: the wheel carries the stylesheet and starts headless from a fresh venv,
and the lane runner never loads Textual. Slow-ish (builds a wheel, makes a venv): kept in the
suite on purpose, because a missing stylesheet only shows up in an installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from lanewatch import __version__
from lanewatch.cli.reports import NAMES
from tests.conftest import LANEWATCH

from .conftest import Lanes

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240, **kwargs
    )  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args}\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_wheel_installs_in_a_fresh_venv_and_the_app_starts(
    tmp_path: Path, lanes: Lanes, scratch: Path
) -> None:
    dist = tmp_path / "dist"
    run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(dist),
            str(REPO),
        ]
    )
    (wheel,) = dist.glob("lanewatch-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "lanewatch/styles/lanewatch.tcss" in names
        assert "lanewatch/py.typed" in names  # typed package (PEP 561)
        shipped = {n.rsplit("/", 1)[1][: -len(".json")] for n in names if "/schemas/" in n}
        assert shipped == set(NAMES)  # every --json report's JSON Schema
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        assert f"Version: {__version__}\n" in zf.read(metadata).decode()  # one source

    venv = tmp_path / "venv"
    # No pip of its own (ensurepip costs ~6 s of CPU): this environment's pip installs the
    # wheel into it (`--python`), its scripts and all, as the venv's own pip would.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    run([*pip, "install", "--no-deps", "--no-index", "--quiet", str(wheel)])
    # The dependencies come from the test environment (no network in tests): its
    # site-packages goes on the path through a .pth file. Its own .pth files (among them the
    # editable install of this checkout) are not processed from there, so `lanewatch` can only
    # be the wheel's.
    site = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    Path(site.stdout.strip(), "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = run([str(py), "-c", "import lanewatch; print(lanewatch.__file__)"], cwd=tmp_path)
    assert where.stdout.strip().startswith(str(venv)), where.stdout

    lanes.start("wheel-lane")
    env = {**os.environ, "TERM": "xterm-256color"}
    smoke = run(
        [str(venv / "bin" / "lanewatch"), "dash", "--self-check", "--root", str(scratch)],
        cwd=tmp_path,
        env=env,
    )
    assert "lanewatch self-check: ok lanes=1" in smoke.stdout, smoke.stdout + smoke.stderr
    css = smoke.stdout.strip().rsplit("css=", 1)[1]
    assert css.startswith(str(venv)) and css.endswith("lanewatch/styles/lanewatch.tcss"), css


def test_the_lane_runner_never_imports_textual(repo: Path, scratch: Path) -> None:
    code = (
        "import sys\n"
        "from lanewatch.cli.group import cli\n"
        "try:\n"
        f"    cli(['run', '--root', {str(scratch)!r}, '--lane', 'x', '--', 'true'],\n"
        "        prog_name='lanewatch')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'textual')\n"
        "assert not loaded, loaded\n"
        "print('clean')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "clean", result.stderr


def test_bare_lanewatch_opens_the_dashboard_on_every_known_root(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lanewatch` with no command builds the dashboard with `make_app` on the registered roots
    and runs it (here `run` only records the app instead of taking the terminal)."""
    from lanewatch.cli.group import cli
    from lanewatch.lanes.roots import Registry
    from lanewatch.tui.app import LanewatchApp

    Registry().add(scratch)
    ran: list[LanewatchApp] = []
    monkeypatch.setattr(LanewatchApp, "run", lambda self, *a, **k: ran.append(self))
    # pytest's stdin is no terminal, which the dashboard refuses (test_needs_terminal.py)
    monkeypatch.setattr("lanewatch.cli.lanes.dash_cmd.needs_terminal", lambda instead: None)
    cli([], prog_name="lanewatch", standalone_mode=False)
    (app,) = ran
    assert str(scratch.resolve()) in app.root_paths()
    assert str(scratch.resolve()) in app.engine.roots
    assert app.long_lived  # its process's one job: the heap is frozen once the picture is in


def test_dash_smoke_on_a_root(scratch: Path, lanes: Lanes) -> None:
    lanes.start("smoked")
    result = subprocess.run(
        [*LANEWATCH, "dash", "--self-check", "--root", str(scratch)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert "lanewatch self-check: ok lanes=1" in result.stdout, result.stderr
