"""What the corpus runs: each workload is one `lanewatch run` lane in one of the two
checkouts; the pairs run at once (one lane per checkout), one pair after another."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace

from tests.corpus.checkouts import IDENTITY, MP_SCRIPT, TINY, TINY_WHEEL, Checkouts
from tests.corpus.sdists import CLICK, PYTEST

PY = sys.executable
XDIST = ("-m", "pytest", "-q", "-p", "xdist", "-p", "lanewatch", "-n", "2")
# pip (this venv's, pointed at the new one with --python: ensurepip would cost 2 s of CPU)
PIP_INTO_VENV = (
    '"$1" -m venv --without-pip .venvs/tiny && "$1" -m pip --python .venvs/tiny/bin/python '
    f"install -q --no-index --no-cache-dir {TINY_WHEEL} && "
    f'.venvs/tiny/bin/python -c "import {TINY}"'
)
# A fixed name in /tmp, which the fence makes the lane's own: both lanes of the last pair write
# it at once. (An unfenced lane would share it for real: then $TMPDIR instead.)
FIXED = """fixed() {
    if [ "${LANEWATCH_FENCE:-none}" != none ]; then echo /tmp/corpus-shell.log
    else echo "$TMPDIR/corpus-shell.log"; fi
}
"""
GIT_IN_WORKTREES = (
    FIXED
    + """set -e
git worktree add -q -b corpus-extra .worktrees/extra
echo one > .worktrees/extra/one.txt
git -C .worktrees/extra add one.txt
git -C .worktrees/extra commit -q -m one
echo two > two.txt
git add two.txt
git commit -q -m two
git merge -q --no-edit corpus-extra
git worktree remove .worktrees/extra
git gc -q
git log --oneline > "$(fixed)"
"""
)
SHELL_REDIRECTS = (
    FIXED
    + """set -e
for i in 1 2 3 4 5; do ls -la > "$TMPDIR/corpus-ls.txt"; date >> "$(fixed)"; done
sort "$TMPDIR/corpus-ls.txt" > "$TMPDIR/sorted.txt"
"""
)
# Another project's lane on the same machine (a root the recorder does not watch, a checkout
# in another /tmp entry), come and gone before the corpus starts: its mount namespace's number
# is free for the next fenced lane. It works a moment, as a short build would.
# A web project's lane: its dev server (`python -m http.server`, a process of its own) on the
# lane's $PORT, or, in a lane with a network of its own (`--fence net`), on the usual 3000; and
# its tests' own server on a port the kernel picks (bind to 0), as test suites start them. The
# tests request both for two seconds, so the recorder's listening sockets are read meanwhile.
# With $DOCS_PORT, a docs preview instead: the project's fixed port (`mkdocs serve`'s :8000),
# which a lane of each checkout serves one after the other, the first's run over before the
# second starts (agent sessions one after another, each previewing the docs).
SERVE = """
import http.server, os, subprocess, sys, threading, time, urllib.request
port = int(
    os.environ.get("DOCS_PORT")
    or (3000 if os.environ.get("LANEWATCH_NET") == "private" else os.environ["PORT"])
)
dev = subprocess.Popen(
    [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
own = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=own.serve_forever, daemon=True).start()
def get(p):
    with urllib.request.urlopen(f"http://127.0.0.1:{p}/", timeout=5) as r:
        return r.status
deadline = time.monotonic() + 30
while True:
    try:
        get(port)
        break
    except OSError:
        if dev.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the dev server on {port} did not answer")
        time.sleep(0.05)
until = time.monotonic() + 2
while time.monotonic() < until:
    assert get(port) == 200 and get(own.server_port) == 200
    time.sleep(0.05)
dev.terminate()
dev.wait()
"""
NEIGHBOUR = """set -e
for i in 1 2 3 4 5 6 7 8 9 10; do date > build.log; sleep 0.1; done
"""


@dataclass(frozen=True)
class Workload:
    lane: str
    checkout: str  # "main" or "linked"
    argv: tuple[str, ...]
    what: str  # for people: the figures name it
    env: dict[str, str] = field(default_factory=dict)  # paths relative to the checkout: "{co}"
    subdir: str = ""  # where in the checkout it runs (a project's own folder)
    # Its output goes to a file in shared /tmp, opened by whoever started the lane (the
    # user's `lanewatch run -- pytest … > /tmp/log`), not by the lane.
    redirect: bool = False
    fence: str = "auto"  # `lanewatch run --fence`


def pairs(
    checkouts: Checkouts, docs_port: int, *, unfenced: bool = False
) -> list[tuple[Workload, ...]]:
    """The groups of lanes run at once, in order (a pair each, and a docs preview beside the
    last two); `docs_port`: the project's fixed port; `unfenced`: every lane `--fence none`."""
    found = _pairs(checkouts, docs_port)
    if not unfenced:
        return found
    return [tuple(replace(w, fence="none") for w in group) for group in found]


def _pairs(checkouts: Checkouts, docs_port: int) -> list[tuple[Workload, ...]]:
    main, linked = checkouts.main, checkouts.linked
    click = Workload(
        "click",
        "main",
        (PY, *XDIST, "tests"),
        f"click {CLICK.version}'s tests (pytest -p lanewatch -n 2 > /tmp/…)",
        {"PYTHONPATH": str(main / CLICK.folder / "src")},
        subdir=CLICK.folder,
        redirect=True,
    )
    pytest_slice = Workload(
        "pytest-slice",
        "linked",
        (PY, *XDIST, "testing/test_tmpdir.py"),
        f"pytest {PYTEST.version}'s testing/test_tmpdir.py (-p lanewatch -n 2)",
        {"PYTHONPATH": str(linked / PYTEST.folder / "src")},
        subdir=PYTEST.folder,
    )
    tox = Workload(
        "tox",
        "main",
        (PY, "-m", "tox", "-q", "-e", "corpus"),
        "tox 4, one skip_install env (a virtualenv in .tox/)",
        {"VIRTUALENV_OVERRIDE_APP_DATA": str(main / ".tox" / "app-data")},
    )
    pip = Workload(
        "pip",
        "linked",
        ("sh", "-c", PIP_INTO_VENV, "sh", PY),
        "python -m venv, then pip installs a local wheel into it (pip --python)",
    )
    shell = Workload(
        "shell", "main", ("sh", "-c", SHELL_REDIRECTS), "shell redirects to /tmp and $TMPDIR"
    )
    git = Workload(
        "git",
        "linked",
        ("sh", "-c", GIT_IN_WORKTREES),
        "git worktree add, commits in two linked worktrees, merge, gc; git log > /tmp/…",
        dict(IDENTITY),
    )
    web = Workload(
        "web", "main", (PY, "-c", SERVE), "a dev server on the lane's $PORT, tests on port 0"
    )
    web_net = Workload(
        "web-net",
        "linked",
        (PY, "-c", SERVE),
        "--fence net: a dev server on 3000 in the lane's own network, tests on port 0",
        fence="net",
    )
    mp_main, mp_linked = (
        Workload(
            f"mp-{which}",
            which,
            (PY, MP_SCRIPT),
            "multiprocessing: a pool, an executor, a lock, a manager, shared memory (/dev/shm)",
        )
        for which in ("main", "linked")
    )
    docs_main, docs_linked = (
        Workload(
            f"docs-{which}",
            which,
            (PY, "-c", SERVE),
            f"a docs preview on the project's fixed port :{docs_port}, one lane after the other",
            {"DOCS_PORT": str(docs_port)},
        )
        for which in ("main", "linked")
    )
    return [
        (click, pytest_slice),
        (tox, pip),
        (shell, git),
        (web, web_net, docs_main),
        (mp_main, mp_linked, docs_linked),
    ]
