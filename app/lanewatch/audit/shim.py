"""What runs inside each audited lane before CMD, and the pytest plugin the audit injects.

`SHIM` runs as `python -I -S -c SHIM SPEC CMD...` inside the lane's fence (stdlib only: it runs
in the user's Python, with nothing of lanewatch importable). It
- points TMPDIR, TMP, TEMP, PYTEST_DEBUG_TEMPROOT (lanes.lane.TEMP_VARS) at a folder of the
  lane (not `/tmp`): what a tool writes through them is the lane's own, and what still lands
  in the fence's private `/tmp` is a fixed name;
- where the kernel allows, mounts an overlay on $HOME whose upper folder is the lane's, so every
  write to the home folder lands there (and never in the real home); the checkout and the
  audit's own folders, when they lie under $HOME, are bound back on top so they stay real;
- writes what it could see to SPEC's `status` file, then execs CMD.

`CLOCK` is a pytest plugin (pytest only): it appends one JSON line per test, with the wall-clock
nanoseconds its setup started and its teardown ended, to $LANEWATCH_AUDIT_CLOCK.
"""

from __future__ import annotations

from lanewatch.linux import userns

# linux/userns.py's text (the private mounts, written once), then the shim's own.
SHIM = (
    userns.source()
    + r"""
import ctypes, json, os, sys
spec, cmd = json.loads(sys.argv[1]), sys.argv[2:]
status = {"home": "not asked"}
os.makedirs(spec["tmpdir"], mode=0o700, exist_ok=True)
for var in spec["tempvars"]:
    os.environ[var] = spec["tmpdir"]
for key, value in spec.get("env", {}).items():
    os.environ[key] = value
if spec.get("pythonpath"):
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = spec["pythonpath"] + (os.pathsep + old if old else "")
home = spec.get("home") or ""
def overlay():
    if not home or not os.path.isdir(home):
        return "no home folder to watch ($HOME unset or missing)"
    bad = [p for p in (home, spec["upper"], spec["work"]) if any(c in p for c in ",:\\")]
    if bad:
        return "a path overlayfs cannot take (a comma, colon or backslash): %s" % bad[0]
    libc = ctypes.CDLL(None, use_errno=True)
    cwd = os.getcwd()
    failed = enter_private_mounts(libc, os.getuid() == 0)  # linux/userns.py, run ahead of this
    if failed is not None:
        what, err = failed
        if what == "unshare":
            return "no namespace for the home overlay: %s" % os.strerror(err)
        if what == "mount /":
            return "cannot make the mounts private: %s" % os.strerror(err)
        return "home overlay failed: %s: %s" % (what, os.strerror(err))
    under = [k for k in spec.get("keep", []) if k == home or k.startswith(home.rstrip("/") + "/")]
    opened = [(os.open(k, os.O_PATH), k) for k in under if os.path.exists(k)]
    opts = "lowerdir=%s,upperdir=%s,workdir=%s" % (home, spec["upper"], spec["work"])
    if libc.mount(b"overlay", os.fsencode(home), b"overlay", 0, opts.encode()) != 0:
        return "the kernel refused an overlay on the home folder: %s" % os.strerror(
            ctypes.get_errno())
    for fd, path in opened:
        if libc.mount(os.fsencode(fd_path(fd)), os.fsencode(path), None,
                      4096 | 16384, None) != 0:
            return "cannot keep %s real under the overlay: %s" % (
                path, os.strerror(ctypes.get_errno()))
        os.close(fd)
    try:
        os.chdir(cwd)
    except OSError:
        pass
    return "overlay"
if spec.get("upper"):
    try:
        status["home"] = overlay()
    except OSError as exc:
        status["home"] = "home overlay failed: %s" % exc
with open(spec["status"], "w") as f:
    json.dump(status, f)
try:
    os.execvp(cmd[0], cmd)
except OSError as exc:
    sys.stderr.write("lanewatch audit: command cannot run: %s (%s)\n" % (cmd[0], exc.strerror))
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""
)

CLOCK_MODULE = "lanewatch_audit_clock"
CLOCK_ENV = "LANEWATCH_AUDIT_CLOCK"
CLOCK = r'''"""lanewatch audit: when each test ran (JSON lines to $LANEWATCH_AUDIT_CLOCK)."""
import json
import os
import time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.time_ns()
    yield
    end = time.time_ns()
    out = os.environ.get("LANEWATCH_AUDIT_CLOCK")
    if out:
        line = {"test": item.nodeid, "start": start, "end": end, "pid": os.getpid()}
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
        finally:
            os.close(fd)
'''
