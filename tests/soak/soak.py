"""Soak: a root recorder for a long while beside churn of fenced lanes and real work.

    sudo .venv/bin/python -m tests.soak.soak --minutes 30 [--json] [--keep] [--reap-age S]
                                             [--trace DIR]

What runs, all in folders of its own under /tmp (removed at the end unless --keep):

- `lanewatch record --root ROOT --json`, kernel attribution (root): the recorder under test.
- churn: fenced lanes one after another, each writing in its checkout and in its own /tmp,
  then starting CHILDREN processes at once, each in a mount namespace of its own (a copy of
  the lane's fence) writing in the checkout and in /tmp too: thousands of mount namespaces
  made and gone, their numbers handed on by the kernel again and again. Lanes take turns
  between two checkouts at two first-level entries of /tmp (each fence binds back only its
  own), the case where a stale view of a namespace renamed writes into paths that never
  existed.
- real work, beside it: pytest with xdist (`-n 2`) over a suite that uses tmp_path, git
  commits in a linked worktree, pip installing a wheel into a venv in the lane's /tmp.
- one planted collision: two unfenced lanes writing one fixed name in /tmp.

With `--reap-age S` the recorder also runs the reaper (`record --reap`, docs/reaper.md):
released and stale namespaces idle S seconds are cleared and the trash purged after S, a pass
every S/2 seconds, as a service would keep a root. `--trace DIR` runs the recorder under
tracemalloc (`traced.py`: what grew, each minute; slow, for finding a leak, not for figures).

It reports: duration, lanes made, mount namespaces made, incidents (planted found, invented),
the recorder's peak RSS (VmHWM) and its RSS over time, the sizes of the root's logs, and
what the reaper did (namespaces and trash entries left at the end). Exit
status 0 when nothing was invented and the planted collision was found, else 1; 2 when it
cannot run here (not root, no fanotify, no unshare).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.kernel.fanotify import fanotify_available
from lanewatch.records.incident_log import read_all

LANEWATCH = [sys.executable, "-m", "lanewatch"]
CHILDREN = 20  # mount namespaces each churn lane makes, besides its fence
SUITE = """
import pytest

@pytest.mark.parametrize("n", range(40))
def test_scratch(tmp_path, n):
    p = tmp_path / "f.txt"
    p.write_text(str(n) * 100)
    assert p.read_text().startswith(str(n))
"""


@dataclass
class Figures:
    minutes: float = 0.0
    lanes: int = 0
    namespaces: int = 0  # mount namespaces made: each fence and each churn child
    real_work: dict[str, int] = field(default_factory=dict)  # runs of each kind
    failures: dict[str, int] = field(default_factory=dict)  # lanes that exited non-zero
    incidents: int = 0
    planted_found: bool = False
    invented: list[dict[str, Any]] = field(default_factory=list)
    peak_rss_kib: int = 0
    rss_kib: list[tuple[float, int]] = field(default_factory=list)  # (minute, VmRSS) samples
    log_bytes: dict[str, int] = field(default_factory=dict)
    written_entries: int = 0  # lines of the write history (all files)
    reaped: dict[str, int] = field(default_factory=dict)  # reap.json's totals (--reap-age)
    namespaces_left: int = 0  # namespaces in the root at the end
    trash_left: int = 0  # entries in its trash at the end


def _git(*args: str, cwd: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "soak",
        "GIT_AUTHOR_EMAIL": "soak@example.invalid",
        "GIT_COMMITTER_NAME": "soak",
        "GIT_COMMITTER_EMAIL": "soak@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    _git("init", "-q", "-b", "main", cwd=path)
    (path / "test_soak.py").write_text(SUITE)
    (path / ".gitignore").write_text(".soak/\n.pytest_cache/\n__pycache__/\n")
    _git("add", ".", cwd=path)
    _git("commit", "-q", "-m", "init", cwd=path)
    return path


def _wheel(folder: Path) -> Path:
    """A tiny pure-Python wheel, made here: pip installs it without any index."""
    name, version = "lanewatch_soak_probe", "1.0"
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": b"VALUE = 1\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: soak\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return out


class Soak:
    def __init__(
        self, minutes: float, keep: bool, trace: Path | None = None, reap: float | None = None
    ) -> None:
        self.minutes = minutes
        self.keep = keep
        self.trace = trace  # --trace DIR: the recorder under tracemalloc (traced.py)
        self.reap = reap  # --reap-age S: the recorder's reaper clears after S, purges after S
        self.base = Path(tempfile.mkdtemp(prefix="lanewatch-soak-", dir="/tmp"))
        self.other = Path(tempfile.mkdtemp(prefix="lanewatch-soak-b-", dir="/tmp"))
        self.root = self.base / "root"
        self.root.mkdir()
        self.env = {
            **os.environ,
            "LANEWATCH_STATE_DIR": str(self.base / "state"),
            "LANEWATCH_SYSTEM_STATE_DIR": str(self.base / "system-state"),
            "TMPDIR": str(self.base / "tmp"),
        }
        for var in ("LANEWATCH_ROOT", "LANEWATCH_LANE", "LANEWATCH_NAMESPACE", "TMP", "TEMP"):
            self.env.pop(var, None)
        (self.base / "tmp").mkdir()
        if reap is not None:
            (self.base / "state").mkdir()
            (self.base / "state" / "reap.toml").write_text(
                f'[reap]\nage = "{reap:g}s"\ntrash_retention = "{reap:g}s"\n'
                f'every = "{max(1.0, reap / 2):g}s"\n'
            )
        self.a = _repo(self.base / "a")
        self.a_wt = self.base / "a-wt"
        _git("worktree", "add", "-q", str(self.a_wt), "-b", "side", cwd=self.a)
        self.b = _repo(self.other / "b")
        self.wheel = _wheel(self.base)
        self.planted = Path(f"/tmp/lanewatch-soak-planted-{uuid.uuid4().hex}.json")
        self.figures = Figures()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.recorder: subprocess.Popen[bytes] | None = None

    # -- lanes ---------------------------------------------------------------------------------
    def lane(self, name: str, cwd: Path, cmd: list[str], *, fence: str = "auto") -> int:
        args = [*LANEWATCH, "run", "--root", str(self.root), "--lane", name, "--fence", fence]
        proc = subprocess.run(
            [*args, "--", *cmd],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=600,
            check=False,
        )
        with self.lock:
            self.figures.lanes += 1
            self.figures.namespaces += fence != "none"
            if proc.returncode != 0:
                kind = name.rsplit("-", 1)[0]
                self.figures.failures[kind] = self.figures.failures.get(kind, 0) + 1
        return proc.returncode

    def churn(self) -> None:
        unshare = shutil.which("unshare")
        assert unshare is not None
        child = 'echo "$1" > "$2/.soak/ns-$1"; echo "$1" > /tmp/ns-$1; sleep 0.3'
        script = (
            "mkdir -p .soak && echo lane > .soak/lane && echo lane > /tmp/lane.txt; i=0; "
            f"while [ $i -lt {CHILDREN} ]; do {unshare} -m sh -c '{child}' sh $i \"$PWD\" & "
            "i=$((i+1)); done; wait"
        )
        n = 0
        while not self.stop.is_set():
            cwd = self.a if n % 2 == 0 else self.b
            self.lane(f"churn-{n}", cwd, ["sh", "-c", script])
            with self.lock:
                self.figures.namespaces += CHILDREN
            n += 1

    def work(self) -> None:
        py = sys.executable
        jobs = [
            ("pytest", self.b, [py, "-m", "pytest", "-q", "-n", "2", "-p", "no:randomly"]),
            (
                "git",
                self.a_wt,
                ["sh", "-c", "date > .soak-git && git add -f .soak-git && git commit -qm soak"],
            ),
            (
                "pip",
                self.a,
                [
                    "sh",
                    "-c",
                    f"{py} -m venv --without-pip /tmp/venv && {py} -m pip -q --python /tmp/venv "
                    f"install --no-index {self.wheel}",
                ],
            ),
        ]
        n = 0
        while not self.stop.is_set():
            kind, cwd, cmd = jobs[n % len(jobs)]
            self.lane(f"{kind}-{n}", cwd, cmd)
            with self.lock:
                self.figures.real_work[kind] = self.figures.real_work.get(kind, 0) + 1
            n += 1

    def plant(self) -> None:
        """Two unfenced lanes write one fixed name in /tmp: the one collision there is."""
        for lane in ("planted-1", "planted-2"):
            cmd = ["sh", "-c", f'echo {lane} > "{self.planted}"']
            self.lane(lane, self.a, cmd, fence="none")

    # -- the recorder --------------------------------------------------------------------------
    def start_recorder(self) -> None:
        out = open(self.base / "record.jsonl", "wb")  # noqa: SIM115 (closed with the soak)
        cmd = [*LANEWATCH, "record", "--root", str(self.root), "--json"]
        if self.reap is not None:
            cmd.append("--reap")
        if self.trace is not None:
            cmd = [sys.executable, "-m", "tests.soak.traced", str(self.trace), "60", *cmd[3:]]
        self.recorder = subprocess.Popen(
            cmd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            lines = (self.base / "record.jsonl").read_text(errors="replace").splitlines()
            for line in lines:
                with contextlib.suppress(ValueError):
                    obj = json.loads(line)
                    mode = (obj.get("attribution") or {}).get("mode")
                    if obj.get("type") in ("start", "attribution") and mode:
                        if mode != "kernel":
                            raise SystemExit(f"the recorder has no kernel attribution: {line}")
                        return
            if self.recorder.poll() is not None:
                raise SystemExit(f"the recorder exited: {lines[-5:]}")
            time.sleep(0.2)
        raise SystemExit("the recorder did not say how it attributes within 60 s")

    def rss(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the recorder in KiB."""
        assert self.recorder is not None
        values = {"VmRSS": 0, "VmHWM": 0}
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.recorder.pid}/status").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in values:
                    values[key] = int(rest.split()[0])
        return values["VmRSS"], values["VmHWM"]

    # -- the run -------------------------------------------------------------------------------
    def run(self) -> Figures:
        t0 = time.monotonic()
        self.start_recorder()
        self.plant()
        threads = [
            threading.Thread(target=self.churn, name="soak-churn", daemon=True),
            threading.Thread(target=self.work, name="soak-work", daemon=True),
        ]
        for t in threads:
            t.start()
        deadline = t0 + self.minutes * 60
        while time.monotonic() < deadline:
            minute = (time.monotonic() - t0) / 60
            rss, hwm = self.rss()
            self.figures.rss_kib.append((round(minute, 1), rss))
            self.figures.peak_rss_kib = max(self.figures.peak_rss_kib, hwm)
            time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
        self.stop.set()
        for t in threads:
            t.join(timeout=900)
        time.sleep(3)  # the recorder takes in the last writes
        self.figures.peak_rss_kib = max(self.figures.peak_rss_kib, self.rss()[1])
        self.figures.minutes = round((time.monotonic() - t0) / 60, 1)
        self.stop_recorder()
        self.tally()
        return self.figures

    def stop_recorder(self) -> None:
        if self.recorder is not None and self.recorder.poll() is None:
            self.recorder.send_signal(signal.SIGINT)
            try:
                self.recorder.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.recorder.kill()
                self.recorder.wait()

    def tally(self) -> None:
        f = self.figures
        records = read_all([str(self.root)])
        f.incidents = len(records)
        for rec in records.values():
            if rec.path == str(self.planted):
                f.planted_found = len(rec.writers) == 2
                continue
            paths = [e.path for e in rec.evidence][:3]
            f.invented.append({"kind": rec.kind, "summary": rec.summary, "paths": paths})
        meta = self.root / ".lanewatch-root"
        for name in ("incidents.jsonl", "writes.jsonl", "writes.1.jsonl"):
            p = meta / name
            f.log_bytes[name] = p.stat().st_size if p.exists() else 0
        f.log_bytes["evidence"] = sum(
            p.stat().st_size for p in (meta / "evidence").rglob("*") if p.is_file()
        )
        for name in ("writes.jsonl", "writes.1.jsonl"):
            p = meta / name
            if p.exists():
                f.written_entries += sum(1 for _ in p.open("rb"))
        f.namespaces_left = sum(1 for p in self.root.iterdir() if p.name != meta.name)
        trash = meta / "trash"
        f.trash_left = sum(1 for _ in trash.iterdir()) if trash.is_dir() else 0
        with contextlib.suppress(OSError, ValueError):
            state = json.loads((self.base / "state" / "reap.json").read_text())
            f.reaped = dict(state.get("totals") or {})

    def close(self) -> None:
        self.stop.set()
        self.stop_recorder()
        self.planted.unlink(missing_ok=True)
        if not self.keep:
            for folder in (self.base, self.other):
                shutil.rmtree(folder, ignore_errors=True)


def report(f: Figures) -> str:
    mib = {k: f"{v / 2**20:.2f} MiB" for k, v in f.log_bytes.items()}
    lines = [
        f"duration            {f.minutes} min",
        f"lanes made          {f.lanes} (real work: {f.real_work}; non-zero exits: {f.failures})",
        f"mount namespaces    {f.namespaces}",
        f"incidents           {f.incidents} (planted found: {f.planted_found}; "
        f"invented: {len(f.invented)})",
        f"recorder peak RSS   {f.peak_rss_kib / 1024:.1f} MiB",
        f"RSS over time (MiB) {[(m, round(r / 1024, 1)) for m, r in f.rss_kib]}",
        f"root's logs         {mib}; write history lines {f.written_entries}",
        f"reaper              {f.reaped or 'off'}; left: {f.namespaces_left} namespaces, "
        f"{f.trash_left} trash entries",
    ]
    lines += [f"  invented: {i}" for i in f.invented[:20]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the folders for a look after")
    parser.add_argument("--trace", type=Path, help="tracemalloc snapshots each minute, here")
    parser.add_argument(
        "--reap-age",
        type=float,
        metavar="SECONDS",
        help="the recorder runs the reaper (record --reap): clears released and stale "
        "namespaces idle SECONDS, purges the trash after SECONDS",
    )
    args = parser.parse_args(argv)
    ok, why = fanotify_available()
    if os.geteuid() != 0 or not ok or shutil.which("unshare") is None:
        print(f"the soak needs root, fanotify and unshare(1) ({why})", file=sys.stderr)
        return 2
    # Stopped early (SIGINT, also when started in the background, or SIGTERM): clean up.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    soak = Soak(args.minutes, args.keep, args.trace, args.reap_age)
    try:
        figures = soak.run()
    finally:
        soak.close()
    print(json.dumps(asdict(figures), indent=1) if args.json else report(figures))
    return 0 if not figures.invented and figures.planted_found else 1


if __name__ == "__main__":
    sys.exit(main())
