"""One run of the corpus: the checkouts, a recorder watching the whole time, the workloads'
lanes two at a time, the planted collisions last, then the incidents the recorder kept."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.corpus import checkouts, plants
from tests.corpus.lanes import LANEWATCH, Lane, Processes, Recorder, wait_until
from tests.corpus.score import Plant, Score, matches, score
from tests.corpus.sdists import CLICK, PYTEST, fetch
from tests.corpus.workloads import NEIGHBOUR, Workload, pairs
from tests.kits.portkit import CORPUS_PORTS, free_fixed_port

WORKLOAD_TIMEOUT = 180.0
# Past the prober's full scan (60 s), which finds a held file no write pointed it to.
PLANTS_TIMEOUT = 75.0
# Variables of whoever started the corpus that would change what its lanes run.
DROPPED = ("PYTEST_", "LANEWATCH_", "TOX_", "VIRTUALENV_", "PYTHONPATH", "COV_CORE_")


@dataclass
class Outcome:
    """What one run did and what the recorder made of it."""

    attribution: str
    seconds: float
    cpu: float  # CPU seconds of every process the run started (recorder, lanes, their children)
    workloads: dict[str, dict[str, Any]]  # lane: what, checkout, fence, exit code, seconds
    phases: dict[str, float]  # seconds of each step, in order
    plants: list[Plant]
    incidents: list[dict[str, Any]]
    score: Score
    versions: dict[str, str]
    failures: list[str] = field(default_factory=list)  # workloads that did not succeed

    def summary(self) -> str:
        lanes = ", ".join(f"{k} {v['seconds']:.1f}s" for k, v in self.workloads.items())
        fences = sorted({str(v["fence"]) for v in self.workloads.values()})
        return (
            f"corpus: {len(self.workloads)} lanes in 2 checkouts ({lanes}; fence "
            f"{'/'.join(fences)}); "
            f"recorder: {self.attribution}; {self.seconds:.1f}s, {self.cpu:.1f}s of CPU ("
            + ", ".join(f"{k} {v:.1f}s" for k, v in self.phases.items())
            + "); "
            + " ".join(f"{k} {v}" for k, v in self.versions.items())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attribution": self.attribution,
            "seconds": round(self.seconds, 1),
            "cpu_seconds": round(self.cpu, 1),
            "workloads": self.workloads,
            "phases": self.phases,
            "plants": [p.__dict__ for p in self.plants],
            "incidents": self.incidents,
            "versions": self.versions,
            "failures": self.failures,
        }


def child_env(base: Path, state: Path | None = None) -> dict[str, str]:
    """This process's environment without what would steer the lanes, with a state folder
    of the run's own (so nothing of the user's lanewatch shows): `state`, else in `base`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    env["LANEWATCH_STATE_DIR"] = str(state or base / "state")
    env["LANEWATCH_SYSTEM_STATE_DIR"] = str(base / "system-state")
    # Only the plugins a workload names (-p xdist -p lanewatch): none of this venv's others.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def versions() -> dict[str, str]:
    found = {"click": CLICK.version, "pytest-src": PYTEST.version}
    for name in ("tox", "pytest-xdist", "pytest", "virtualenv", "pip"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False)
    found["git"] = git.stdout.split()[-1] if git.returncode == 0 else "?"
    return found


def run_corpus(
    base: Path | None = None, *, plant: bool = True, unfenced: bool = False, keep: bool = False
) -> Outcome:
    """The whole corpus in `base` (a new temporary folder, removed after, when None).
    `unfenced`: every workload runs with `--fence none`, as on a machine that cannot build the
    fence (a kernel that refuses user namespaces and no bubblewrap): the same work, in the real
    /tmp. `keep`: `base` is kept (the caller's), and the state folder it links to too.
    Raises `sdists.Unavailable` before starting anything when a pinned sdist cannot be
    had."""
    for pin in (CLICK, PYTEST):
        fetch(pin)
    own = base is None
    work = Path(tempfile.mkdtemp(prefix="lanewatch-corpus-")) if base is None else base
    work.mkdir(parents=True, exist_ok=True)
    shared = plants.shared_name()
    redirect = plants.shared_name().with_suffix(".log")
    shm = plants.shared_name("/dev/shm", "")
    # The neighbour's own first-level folder of /tmp, apart from the corpus's checkouts.
    neighbour = Path(tempfile.mkdtemp(prefix="lanewatch-corpus-", dir=os.path.realpath("/tmp")))
    # A short state folder: an unfenced lane's TMPDIR is a link in it (`state/t/…`), and the
    # sockets programs make there (multiprocessing's manager) must fit in 108 bytes, which a
    # pytest tmp_path under a long folder would not leave room for. `base/state` links to it;
    # removed at the end unless `keep`.
    state = Path(tempfile.mkdtemp(prefix="lwc-", dir=os.path.realpath("/tmp")))
    (work / "state").symlink_to(state)
    try:
        return _run(work, plant, (shared, shm), redirect, (neighbour, state), unfenced)
    finally:
        for path in (shared, shm, redirect):
            path.unlink(missing_ok=True)
        shutil.rmtree(neighbour, ignore_errors=True)
        if not keep:
            shutil.rmtree(state, ignore_errors=True)
        if own:
            shutil.rmtree(work, ignore_errors=True)


def _run(
    base: Path,
    plant: bool,
    shared: tuple[Path, Path],  # the fixed names the plants share: in /tmp, in /dev/shm
    redirect: Path,
    elsewhere: tuple[Path, Path],  # the neighbour's folder, and the run's state folder
    unfenced: bool,
) -> Outcome:
    neighbour, state = elsewhere
    t0, cpu0 = time.monotonic(), _children_cpu()
    phases: dict[str, float] = {}
    last = [t0]

    def lap(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(now - last[0], 1)
        last[0] = now

    env = child_env(base, state)
    root = base / "root"
    root.mkdir()
    cos = checkouts.make(base / "checkouts", env)
    lap("checkouts")
    procs = Processes(root, env)
    results: dict[str, dict[str, Any]] = {}
    failures: list[str] = []
    planted: list[Plant] = []
    try:
        recorder = Recorder(procs, base)
        mode = recorder.wait_ready()
        lap("recorder ready")
        _neighbour(procs, neighbour, failures)
        lap("neighbour")
        for pair in pairs(cos, free_fixed_port(CORPUS_PORTS), unfenced=unfenced):
            running = [_start(procs, cos, w, redirect) for w in pair]
            for w, lane in zip(pair, running, strict=True):
                code = lane.wait(WORKLOAD_TIMEOUT)
                stamp = lane.stamp()
                results[w.lane] = {
                    "what": w.what,
                    "checkout": w.checkout,
                    "fence": stamp.fence if stamp is not None else None,
                    "exit": code,
                    "seconds": round((lane.ended or time.monotonic()) - lane.started, 1),
                }
                if code != 0:
                    tail = (redirect.read_text() if w.redirect else lane.text())[-3000:]
                    failures.append(f"{w.lane} exited {code}: {tail}")
        lap("workloads")
        if plant:
            planted, lanes = plants.plant(procs, cos, *shared)
            _found_all(recorder, planted)
            for lane in lanes:
                _stop(lane)
        lap("plants")
        recorder.stop()
        if recorder.proc.returncode != 0:
            tail = recorder.err.read_text(errors="replace")[-3000:]
            failures.append(f"lanewatch record exited {recorder.proc.returncode}: {tail}")
        incidents = _incidents(env, root, recorder)
        lap("recorder stopped, incidents read")
    finally:
        procs.close()
    return Outcome(
        attribution=mode,
        seconds=time.monotonic() - t0,
        cpu=_children_cpu() - cpu0,
        workloads=results,
        phases=phases,
        plants=planted,
        incidents=incidents,
        score=score(planted, incidents),
        versions=versions(),
        failures=failures,
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _neighbour(procs: Processes, where: Path, failures: list[str]) -> None:
    """Another project's fenced lane, in a root the recorder does not watch, run and gone."""
    checkout = where / "checkout"
    checkout.mkdir()
    checkouts.git("init", "-q", cwd=checkout, env=procs.env)
    lane = procs.lane("build", checkout, ("sh", "-c", NEIGHBOUR), root=where / "root")
    if (code := lane.wait(WORKLOAD_TIMEOUT)) != 0:
        failures.append(f"the neighbour's lane exited {code}: {lane.text()[-3000:]}")


def _start(procs: Processes, cos: checkouts.Checkouts, w: Workload, redirect: Path) -> Lane:
    where = cos.of(w.checkout) / w.subdir
    if not w.redirect:
        return procs.lane(w.lane, where, w.argv, env=w.env, fence=w.fence)
    with open(redirect, "ab") as out:  # the user's `> /tmp/log`: the lane inherits it
        return procs.lane(w.lane, where, w.argv, env=w.env, stdout=out, fence=w.fence)


def _found_all(recorder: Recorder, planted: list[Plant]) -> None:
    """Until the recorder reported each plant (or the deadline: the score says which not).
    The plants come last, so by then it has seen everything the workloads did."""

    def all_seen() -> bool:
        seen = list(recorder.incidents().values())
        return all(any(matches(p, i) for i in seen) for p in planted)

    with contextlib.suppress(TimeoutError):
        wait_until(all_seen, PLANTS_TIMEOUT, "every planted collision reported")


def _stop(lane: Lane) -> None:
    if lane.proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            lane.proc.terminate()
    lane.wait(30)


def _incidents(env: dict[str, str], root: Path, recorder: Recorder) -> list[dict[str, Any]]:
    """What `lanewatch incidents --json` lists for the root (what a user reads afterwards),
    and any incident the recorder printed that it does not."""
    done = subprocess.run(
        [*LANEWATCH, "incidents", "--json", "--root", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    listed = json.loads(done.stdout)["incidents"] if done.stdout.strip() else []
    ids = {str(i["id"]) for i in listed}
    printed = [i for key, i in recorder.incidents().items() if key not in ids]
    return [*listed, *printed]
