"""The pytest plugin: every process that runs tests in a lane of its own (`pytest -p lanewatch`).

Opt-in. Installing lanewatch registers this module as the `lanewatch` pytest11 entry point, so
pytest loads it wherever lanewatch is installed (as pytest-xdist and pytest-cov are loaded), but
it claims nothing and changes nothing unless asked: `-p lanewatch` on the command line (or in
`addopts`), or `lanewatch = true` in the ini file. `-p no:lanewatch` turns it off whatever the
ini says. (With PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, `-p lanewatch` still loads it by that name.)

Asked for, in each process that runs tests:
- a pytest-xdist worker claims lane `<lane>-gw0`, `<lane>-gw1`, …; the main process claims
  `<lane>` itself, unless it runs inside the `lanewatch run` that owns `<lane>` (that run is
  then the owner, as for `lanewatch prove`);
- TMPDIR/TMP/TEMP, `tempfile.tempdir` and the LANEWATCH_* variables point into the lane, so
  pytest's basetemp (`tmp_path`) and every `tempfile` call land in the lane's `tmp/`; a worker
  drops the basetemp xdist handed it (under the main process's) for one in its own lane;
- unbound (no git checkout here), a lane another live process owns, or a --basetemp outside
  the lane: pytest stops with a usage error before any test runs. Never a shared /tmp.
- the lane is released when the process's session ends (exit code: pytest's).

`<lane>` is --lanewatch-lane, else the ini `lanewatch_lane`, else $LANEWATCH_LANE, else
"pytest". Two runs at once in one checkout need two lanes: `--lanewatch-lane`, or
`lanewatch run --lane-auto -- pytest -p lanewatch -n 4`.

This module imports nothing of lanewatch at import time: a session that did not ask pays for
one small module, not for the lanes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from lanewatch.lanes.lane import Lane

NAME = "lanewatch"
DEFAULT_BASE = "pytest"


@dataclass
class _Held:
    """What this process did to itself, so the end of the session can undo it."""

    lane: str
    namespace: Path
    owner: str  # "this process" or who owns it for us
    claimed: Lane | None
    saved_env: dict[str, str | None] = field(default_factory=dict)
    saved_tempdir: str | None = None
    exit_code: int | None = None


_HELD = pytest.StashKey[_Held]()
_WORKERS = pytest.StashKey[dict[str, dict[str, str]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(NAME, "lanewatch: a lane per test process (enable: -p lanewatch)")
    group.addoption(
        "--lanewatch-lane",
        dest="lanewatch_lane",
        metavar="LANE",
        help="Base lane name (default: ini lanewatch_lane, else $LANEWATCH_LANE, else 'pytest'); "
        "xdist workers take LANE-gw0, LANE-gw1, ….",
    )
    parser.addini(NAME, type="bool", default=False, help="Claim a lane per test process.")
    parser.addini("lanewatch_lane", default="", help="Base lane name for -p lanewatch.")


def enabled(config: pytest.Config) -> bool:
    """`-p lanewatch` given (on the command line, addopts or by xdist to its workers), or the
    ini option; `-p no:lanewatch` wins, since then this module is not loaded at all."""
    asked = getattr(config.option, "plugins", None) or []
    return NAME in asked or bool(config.getini(NAME))


def _worker_id(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput["workerid"])
    return None


def _base_lane(config: pytest.Config) -> str:
    return (
        config.getoption("lanewatch_lane")
        or str(config.getini("lanewatch_lane") or "")
        or os.environ.get("LANEWATCH_LANE")
        or DEFAULT_BASE
    )


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return
    from lanewatch.errors import LanewatchError
    from lanewatch.lanes.lane import Lane, locate
    from lanewatch.lanes.nested import outer_owner
    from lanewatch.linux.paths import is_under

    worker = _worker_id(config)
    base = _base_lane(config)
    name = f"{base}-{worker}" if worker else base
    try:
        target = locate(name)
        given = None if worker else config.option.basetemp  # a worker's is xdist's: dropped
        if given and not is_under(os.path.realpath(given), os.path.realpath(target.namespace)):
            raise LanewatchError(
                f"--basetemp {given} is outside lane {name!r} ({target.namespace}); "
                "drop it or point it inside"
            )
        outer = None if worker else outer_owner(target)
        claimed = None
        if outer is None:
            where = {"root": target.root, "checkout": target.checkout.root}
            claimed = Lane(name, command=list(sys.argv), **where).claim()
    except LanewatchError as exc:
        raise pytest.UsageError(
            f"lanewatch: {exc} (pytest -p lanewatch runs tests in lanes)"
        ) from None
    owner = (
        "claimed by this pytest"
        if outer is None
        else f"owned by the lanewatch run around this pytest, pid {outer.pid}"
    )
    held = _Held(name, target.namespace, owner, claimed)
    config.stash[_HELD] = held
    # Nested: the same variables the run around us exported, from a Lane we never claim.
    env = (claimed or Lane(name, root=target.root, checkout=target.checkout.root)).env()
    for key, value in env.items():
        held.saved_env[key] = os.environ.get(key)
        os.environ[key] = value
    held.saved_tempdir = tempfile.tempdir
    tempfile.tempdir = env["TMPDIR"]
    if worker:
        config.option.basetemp = None  # xdist's popen-gwN, under the main process's lane


def _basetemp(config: pytest.Config) -> str:
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's own, made by its tmpdir
    if factory is None:
        return "(none)"
    return str(factory.getbasetemp())


def pytest_report_header(config: pytest.Config) -> list[str]:
    held = config.stash.get(_HELD, None)
    if held is None:
        return []
    lines = [
        f"lanewatch: lane {held.lane}, {held.owner}, in {held.namespace}; "
        f"basetemp {_basetemp(config)}"
    ]
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 0:
        names = ", ".join(f"{held.lane}-gw{n}" for n in range(min(workers, 4)))
        more = ", …" if workers > 4 else ""
        lines.append(
            f"lanewatch: each of {workers} xdist workers claims its own lane ({names}{more}), "
            "its basetemp inside it"
        )
    return lines


@pytest.hookimpl(tryfirst=True)  # before xdist's worker tells the main process it is done
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every test and fixture has finished: release the lane now. A worker must not wait for
    its unconfigure: once it reports home, xdist tears it down, and a worker still busy 5
    seconds later is interrupted, which would leave its stamp saying live."""
    config = session.config
    held = config.stash.get(_HELD, None)
    if held is None:
        return
    held.exit_code = int(exitstatus)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["lanewatch"] = {
            "lane": held.lane,
            "namespace": str(held.namespace),
            "basetemp": _basetemp(config),
        }
    _release(held)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist: a worker finished; keep what it said about its lane for the summary."""
    config = node.config
    said = getattr(node, "workeroutput", {}).get("lanewatch")
    if said and config.stash.get(_HELD, None) is not None:
        config.stash.setdefault(_WORKERS, {})[node.gateway.id] = said


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    workers = config.stash.get(_WORKERS, {})
    for wid in sorted(workers, key=lambda w: (len(w), w)):
        said = workers[wid]
        terminalreporter.write_line(
            f"lanewatch: {wid} ran in lane {said['lane']}, basetemp {said['basetemp']}"
        )


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    held = config.stash.get(_HELD, None)
    if held is not None:
        _undo(held)


def _undo(held: _Held) -> None:
    """Release the lane (if we claimed it) and put the environment back as it was."""
    for key, value in held.saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    held.saved_env.clear()
    tempfile.tempdir = held.saved_tempdir
    _release(held)


def _release(held: _Held) -> None:
    if held.claimed is not None:
        held.claimed.release(exit_code=held.exit_code)
        held.claimed = None
