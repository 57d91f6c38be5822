"""The planted collisions, made while the recorder watches: each is a real collision a user
would want reported, and the corpus must find every one.

- a cross-lane write: a lane of the linked checkout writes a file in the `tmp/` of a lane of
  the main checkout (and holds it open, so a recorder without the kernel sees it too);
- a shared fixed name: two unfenced lanes (`--fence none`), one per checkout, write one
  fixed-name file in the real /tmp;
- a takeover: a live lane's stamp is rewritten to name another live process;
- a leased port: a lane of the linked checkout listens on the port another lane leased;
- a shared port: a lane of each checkout listens on one fixed port outside every lease, at
  once (SO_REUSEPORT, as `gunicorn --reuse-port` does: the kernel then splits the connections
  between the two lanes' servers);
- a shared name in /dev/shm: two fenced lanes, one per checkout, write one fixed name there
  (the fence leaves /dev/shm shared unless `--fence-shm`), as two copies of a program that
  names its shared memory do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from lanewatch.lanes.stamp import write_stamp
from lanewatch.linux.procid import ProcessIdentity
from tests.corpus.checkouts import Checkouts
from tests.corpus.lanes import Lane, Processes, wait_until
from tests.corpus.score import Plant
from tests.kits.portkit import CORPUS_PORTS, free_fixed_port

HOLD = (
    "import sys, time\n"
    "f = open(sys.argv[1], 'w')\n"
    "f.write('planted by ' + sys.argv[2])\n"
    "f.flush()\n"
    "time.sleep(600)\n"
)
SLEEP = ("sleep", "600")
# Listens on 127.0.0.1:ARGV[1] until stopped; as servers do (SO_REUSEADDR: the port may still
# have connections in TIME_WAIT from the last lane that leased it, the corpus's own `web`), and
# with ARGV[2] "reuse" as `--reuse-port` servers do (SO_REUSEPORT: two may listen at once).
LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "if sys.argv[2:] == ['reuse']:\n"
    "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "print('listening', flush=True)\n"
    "time.sleep(600)\n"
)


def shared_name(where: str = "/tmp", suffix: str = ".json") -> Path:
    """A fixed name in the real /tmp (or /dev/shm), unique to this run (`session.run_corpus`
    removes it)."""
    return Path(os.path.realpath(where)) / f"lanewatch-corpus-{uuid.uuid4().hex}{suffix}"


def plant(
    procs: Processes, checkouts: Checkouts, shared: Path, shm: Path
) -> tuple[list[Plant], list[Lane]]:
    """Start the six collisions; the plants to look for and the lanes to stop after."""
    py = sys.executable
    victim = procs.lane("victim", checkouts.main, SLEEP)
    taken = procs.lane("taken", checkouts.main, SLEEP)
    wait_until(lambda: victim.ready() and taken.ready(), 30, "the victim lanes started")
    target = victim.namespace / "tmp" / "corpus-clobbered.json"
    intruder = procs.lane("intruder", checkouts.linked, (py, "-c", HOLD, str(target), "intruder"))
    both = [
        procs.lane(
            f"shared-{which}",
            checkouts.of(which),
            (py, "-c", HOLD, str(shared), which),
            fence="none",
        )
        for which in ("main", "linked")
    ]
    in_shm = [
        procs.lane(f"shm-{which}", checkouts.of(which), (py, "-c", HOLD, str(shm), which))
        for which in ("main", "linked")
    ]
    # Not holding our stdout: the intruder of a takeover holding a file in /tmp open for
    # writing (whoever ran the corpus redirected it there) would be a collision of its own.
    sleeper = procs.popen(SLEEP, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stamp = taken.stamp()
    assert stamp is not None
    ident = ProcessIdentity.of(sleeper.pid)
    # Behind the lock's back, while the owner lives: what a second tool claiming by hand does.
    write_stamp(taken.namespace, stamp.with_changes(pid=sleeper.pid, start_ticks=ident.start_ticks))
    leased = victim.stamp()
    assert leased is not None and leased.ports, "the victim lane got no port lease"
    squatter = procs.lane("squatter", checkouts.linked, (py, "-c", LISTEN, str(leased.ports[0])))
    fixed = free_fixed_port(CORPUS_PORTS)
    servers = [
        procs.lane(f"port-{which}", checkouts.of(which), (py, "-c", LISTEN, str(fixed), "reuse"))
        for which in ("main", "linked")
    ]
    for lane in (squatter, *servers):
        _listening(lane)
    plants = [
        Plant(
            "cross-lane-write",
            "lane intruder writes in lane victim's tmp/",
            victim=str(victim.namespace),
            path=str(target),
        ),
        Plant("shared-file", "two unfenced lanes write one fixed name in /tmp", path=str(shared)),
        Plant(
            "takeover",
            "lane taken's stamp rewritten to name another live process",
            victim=str(taken.namespace),
        ),
        Plant(
            "leased-port",
            "lane squatter listens on lane victim's leased port",
            victim=str(victim.namespace),
        ),
        Plant("shared-port", "two lanes listen on one fixed port at once", path=f":{fixed}"),
        Plant("shared-file", "two fenced lanes write one fixed name in /dev/shm", path=str(shm)),
    ]
    return plants, [victim, taken, intruder, *both, *in_shm, squatter, *servers]


def _listening(lane: Lane) -> None:
    wait_until(
        lambda: "listening" in lane.text() or lane.proc.poll() is not None,
        30,
        f"lane {lane.name} listening",
    )
    assert "listening" in lane.text(), f"lane {lane.name} could not listen: {lane.text()}"
