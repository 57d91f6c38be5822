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
- the claim comes before pytest's capture starts (`pytest_load_initial_conftests`, first of
  all): the capture's temporary files, like everything else, are in the process's own lane.
  The main process tells each worker its lane in the worker's environment (execnet's `env:`
  of the worker's spec, `pytest_xdist_setupnodes`), which the worker reads and drops;
- the workers' lanes are of the main lane's family (`lanes/familyclaim.py`): a worker writing in
  the main lane (its TMPDIR until it claimed) or in a sibling's is never an intruder;
- TMPDIR/TMP/TEMP, `tempfile.tempdir` and the LANEWATCH_* variables point into the lane, so
  pytest's basetemp (`tmp_path`) and every `tempfile` call land in the lane's `tmp/`; a worker
  keeps the basetemp xdist hands it (`popen-gwN` under the main process's, in the main lane:
  its family's), so that the workers' basetemps share one parent, where xdist's documented
  recipe for a session fixture run once (a file and a `FileLock` in
  `tmp_path_factory.getbasetemp().parent`) meets its twin in the other workers;
- the files on fds 0-2 when pytest loaded this module (`pytest > /tmp/log`) are recorded in the
  stamp as handed to the lane (`lanes/handed.py`): writing them is not the lane's write;
- unbound (no git checkout here), a lane another live process owns, or a --basetemp outside
  the lane: pytest stops with a usage error before any test runs. Never a shared /tmp.
- the lane is released when the process's session ends (exit code: pytest's).

Not asked for, but inside a lane (`lanewatch run -- pytest -n 2`): the run's one lane is
shared by its xdist workers, and the summary says so in one line (`_sharing_workers`).

`<lane>` is --lanewatch-lane, else the ini `lanewatch_lane`, else $LANEWATCH_LANE, else
"pytest". Two runs at once in one checkout need two lanes: `--lanewatch-lane`, or
`lanewatch run --lane-auto -- pytest -p lanewatch -n 4`.

This module imports nothing of lanewatch at import time: a session that did not ask pays for
one small module, not for the lanes.
"""

from __future__ import annotations

import json
import os
import stat
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
# Set by the main process in each xdist worker's environment (before the worker's pytest
# starts), read and dropped by the worker: "you are lane L". Never inherited further.
WORKER_LANE = "LANEWATCH_XDIST_WORKER_LANE"
# Beside it, the main process's argv (JSON): a worker's own is execnet's `-c`, which says
# nothing in the stamp's command, the dashboard's detail or a kill's question.
WORKER_COMMAND = "LANEWATCH_XDIST_WORKER_COMMAND"


def _stdio_now() -> list[list[int]]:
    """`lanes.handed.stdio_now`, without importing lanewatch: [st_dev, st_ino] of the regular
    files on fds 0-2."""
    out: list[list[int]] = []
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and [st.st_dev, st.st_ino] not in out:
            out.append([st.st_dev, st.st_ino])
    return out


# Taken when pytest loads the plugin: before its capture moves fds 1 and 2 onto its own files.
_HANDED = _stdio_now()


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
    return _asked(config.option) or bool(config.getini(NAME))


def _asked(option: Any) -> bool:
    return NAME in (getattr(option, "plugins", None) or [])


def _worker_id(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput["workerid"])
    return None


def _base_lane(config: pytest.Config, option: Any) -> str:
    return (
        getattr(option, "lanewatch_lane", None)
        or str(config.getini("lanewatch_lane") or "")
        or os.environ.get("LANEWATCH_LANE")
        or DEFAULT_BASE
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)  # around pytest's capture, which starts here
def pytest_load_initial_conftests(early_config: pytest.Config) -> Any:
    """Claim before pytest's capture makes its temporary files, so that they are the lane's."""
    worker_lane = os.environ.pop(WORKER_LANE, None)  # set for us alone: never inherited
    main_argv = os.environ.pop(WORKER_COMMAND, None)
    option = early_config.known_args_namespace
    asked = _asked(option) or bool(early_config.getini(NAME))
    if asked and not (getattr(option, "help", False) or getattr(option, "version", False)):
        _claim(early_config, option, worker_lane, _worker_command(main_argv))
    return (yield)


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    if not enabled(config):
        return
    worker = _worker_id(config)
    if config.stash.get(_HELD, None) is None:  # not claimed early (--help; a worker xdist
        name = f"{_base_lane(config, config.option)}-{worker}" if worker else None
        main_argv = getattr(config, "workerinput", {}).get("mainargv")
        _claim(config, config.option, name, _worker_command(main_argv))  # without our word)


def _worker_command(main_argv: object) -> list[str]:
    """The stamp's command: this process's argv, or in an xdist worker the main process's with
    the worker named (`pytest -n 2 (xdist worker gw1)`). `main_argv`: a JSON list (our word in
    the worker's environment) or a list (xdist's `mainargv`); None outside a worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if main_argv is None or not worker:
        return list(sys.argv)
    try:
        argv = json.loads(main_argv) if isinstance(main_argv, str) else main_argv
    except ValueError:
        return list(sys.argv)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return list(sys.argv)
    return [*argv, f"(xdist worker {worker})"]


def _claim(config: pytest.Config, option: Any, worker_lane: str | None, command: list[str]) -> None:
    """Claim the lane (or find the `lanewatch run` around us that owns it) and move TMPDIR and
    the LANEWATCH_* variables into it. A usage error when it cannot be."""
    from lanewatch.errors import LanewatchError
    from lanewatch.lanes.familyclaim import family_of_parent
    from lanewatch.lanes.lane import Lane, locate
    from lanewatch.lanes.nested import outer_owner
    from lanewatch.linux.paths import is_under

    name = worker_lane or _base_lane(config, option)
    try:
        target = locate(name)
        given = None if worker_lane else getattr(option, "basetemp", None)  # a worker's: xdist's
        if given and not is_under(os.path.realpath(given), os.path.realpath(target.namespace)):
            raise LanewatchError(
                f"--basetemp {given} is outside lane {name!r} ({target.namespace}); "
                f"drop it or point it inside{_under_tox()}"
            )
        outer = None if worker_lane else outer_owner(target)
        claimed = None
        if outer is None:
            family = family_of_parent(target.root, target.namespace) if worker_lane else None
            claimed = Lane(
                name,
                command=command,
                root=target.root,
                checkout=target.checkout.root,
                family=family,
                stdio=_HANDED,
            ).claim()
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
    config.add_cleanup(lambda: _undo(held))  # also when pytest stops before its configure
    # Nested: the same variables the run around us exported, from a Lane we never claim.
    env = (claimed or Lane(name, root=target.root, checkout=target.checkout.root)).env()
    for key, value in env.items():
        held.saved_env[key] = os.environ.get(key)
        os.environ[key] = value
    held.saved_tempdir = tempfile.tempdir
    tempfile.tempdir = env["TMPDIR"]


def _under_tox() -> str:
    """What to change when tox runs us (docs/launchers.md, tox and nox), else ""."""
    if not os.environ.get("TOX_ENV_NAME"):
        return ""
    if not os.environ.get("LANEWATCH_NAMESPACE"):
        return "; under tox, pass the lane in: `pass_env = LANEWATCH_*` in the tox env"
    return (
        "; tox's {envtmpdir} lies in its work dir: "
        '`tox --workdir "$LANEWATCH_NAMESPACE/tox"` puts it inside the lane'
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """xdist is about to start its workers: tell each one its lane (execnet sets `env:` in the
    worker before the worker's pytest starts, hence before its capture)."""
    held = config.stash.get(_HELD, None)
    if held is None:
        return
    for spec in specs:
        wid = getattr(spec, "id", None)
        env = getattr(spec, "env", None)
        if isinstance(wid, str) and isinstance(env, dict):
            env[WORKER_LANE] = f"{held.lane}-{wid}"
            env[WORKER_COMMAND] = json.dumps(sys.argv)


def _basetemp(config: pytest.Config) -> str:
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's own, made by its tmpdir
    if factory is None:
        return "(none)"
    return str(factory.getbasetemp())


def pytest_report_header(config: pytest.Config) -> list[str]:
    held = config.stash.get(_HELD, None)
    if held is None:
        return []
    from lanewatch.inert import inert

    lines = [
        f"lanewatch: lane {inert(held.lane)}, {held.owner}, in {inert(held.namespace)}; "
        f"basetemp {inert(_basetemp(config))}"
    ]
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 0:
        names = ", ".join(f"{inert(held.lane)}-gw{n}" for n in range(min(workers, 4)))
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
    if workers:
        from lanewatch.inert import inert

        for wid in sorted(workers, key=lambda w: (len(w), w)):
            said = workers[wid]
            terminalreporter.write_line(
                f"lanewatch: {inert(wid)} ran in lane {inert(said['lane'])}, "
                f"basetemp {inert(said['basetemp'])}"
            )
    hint = _sharing_workers(config)
    if hint:
        terminalreporter.write_line(hint)


def _local_workers(config: pytest.Config) -> int:
    """How many xdist workers this main process starts on this machine (`-n N` is N `popen`
    specs by then; `--tx 3*popen` counts 3; an ssh or socket worker has a /tmp of its own)."""
    if getattr(config.option, "dist", "no") == "no":
        return 0
    count = 0
    for spec in getattr(config.option, "tx", None) or []:
        times, star, rest = str(spec).partition("*")
        if not star:
            times, rest = "1", str(spec)
        if rest.startswith("popen") and times.isdigit():
            count += int(times)
    return count


def _sharing_workers(config: pytest.Config) -> str:
    """Inside a lane (`lanewatch run`, `prove`) without `-p lanewatch`, xdist's workers share
    the lane's TMPDIR and /tmp: a test writing a fixed temp name races its twin in the other
    worker, and no lanewatch incident can show it (one lane, one writer). Say so once, at the
    end, where a failure is read (`-q` hides the header, not the summary)."""
    if config.stash.get(_HELD, None) is not None or _worker_id(config) is not None:
        return ""
    lane = os.environ.get("LANEWATCH_LANE")
    workers = _local_workers(config)
    if not lane or not os.environ.get("LANEWATCH_NAMESPACE") or workers < 2:
        return ""
    from lanewatch.inert import inert

    return (
        f"lanewatch: these {workers} xdist workers shared lane {inert(lane)}'s TMPDIR and /tmp; "
        "`-p lanewatch` gives each worker a lane and a TMPDIR of its own"
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
