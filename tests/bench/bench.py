"""lanewatch's benchmark: every speed figure against its floor, measured in the same run.

    python tests/bench/bench.py [--quick | --smoke] [--json] [--only NAME ...]

Builds its own workload in a folder it creates (`tempfile.mkdtemp`, removed at the end), runs
each measure in a child process of its own (`tests/bench/fig_*.py`), and prints one JSON object
(`--json`) or a table: `{"figures": {name: {value, unit, floor, ratio, target, target_on, ok,
note, detail}}, "machine": {...}, "run": {...}}`. `target_on` says whether the target bounds
the value or the ratio to the floor. `ok` is null when a figure could not be measured; `note`
says why. Not part of the test suite's pass/fail (`tests/journeys/test_bench_smoke.py` only runs
`--smoke`). docs/performance.md describes every figure, its workload and the scales:

- full: 1,000 namespaces x 100 files, loads of 10 s, idle 20 s, 500 processes (< 10 min);
- `--quick`: the same 1,000 lanes with 10 files each, loads of 2-4 s, 200 processes (< 1 min);
- `--smoke`: 40 lanes x 4 files, half-second loads: checks the machinery, not the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests.bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.common import (
    SCALES,
    Scale,
    child_env,
    dump_json,
    last_json_line,
    module_cmd,
)
from tests.bench.workload import Owners, Tree, build_tree, every_nth
from tests.kits import terminal_signals

# The figures in the order of docs/performance.md's table; the value each is judged on.
FIGURES = (
    "first_picture",
    "first_picture_cold",
    "first_screen",
    "write_to_model",
    "write_to_screen",
    "frame_one_cell",
    "burst",
    "idle_cpu",
    "service_cpu",
    "foreign_writes",
    "rss",
    "heartbeats",
    "process_probe",
    "fence",
    "run_start",
    "net_fence",
    "forward",
    "private_ports",
    "guard",
    "corpus",
)
LIGHT = {
    "fence",
    "run_start",
    "net_fence",
    "forward",
    "private_ports",
    "corpus",
    "guard",
}  # figures that need no workload tree


class ChildFailed(RuntimeError):
    pass


def log(message: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%X')}] {message}\n")
    sys.stderr.flush()


def figure(
    value: float | None,
    unit: str,
    floor: float | None,
    target: float,
    target_on: str = "value",
    *,
    note: str | None = None,
    detail: dict[str, Any] | None = None,
    ok: bool | None = None,
    digits: int = 3,
) -> dict[str, Any]:
    """One figure. `ok` is computed from the target unless given; None when not measured."""
    ratio = None
    if value is not None and floor:
        ratio = round(value / floor, 2)
    if ok is None and value is not None:
        judged = ratio if target_on == "ratio" else value
        ok = judged is not None and judged <= target
    return {
        "value": None if value is None else round(value, digits),
        "unit": unit,
        "floor": None if floor is None else round(floor, digits),
        "ratio": ratio,
        "target": target,
        "target_on": target_on,
        "ok": ok if value is not None else None,
        "note": note,
        "detail": detail or {},
    }


def missing(unit: str, target: float, target_on: str, why: str) -> dict[str, Any]:
    return figure(None, unit, None, target, target_on, note=why)


class Bench:
    def __init__(self, scale: Scale, only: set[str] | None) -> None:
        self.scale = scale
        self.only = only
        self.work = Path(tempfile.mkdtemp(prefix="lanewatch-bench-"))
        self.env = child_env(self.work)
        self.figures: dict[str, dict[str, Any]] = {}
        self.children: list[subprocess.Popen[str]] = []
        self.owners: list[Owners] = []
        self.tree: Tree | None = None
        self.plan: Path | None = None
        self.no_beats: dict[str, Any] | None = None  # write_to_model's run: the heartbeats' floor

    # -- children -------------------------------------------------------------------------------
    def child(self, module: str, *args: object, timeout: float = 300) -> dict[str, Any]:
        """Run one measure in its own process (and process group); its JSON answer."""
        proc = subprocess.Popen(
            module_cmd(module, *map(str, args)),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            process_group=0,
        )
        self.children.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            what = f"{module} {args[0] if args else ''}".strip()
            raise ChildFailed(f"{what} took over {timeout:g}s") from None
        except BaseException:
            self._kill_group(proc)
            raise
        finally:
            self.children.remove(proc)
        if proc.returncode != 0:
            tail = " | ".join(err.strip().splitlines()[-3:])
            raise ChildFailed(f"{module} exited with {proc.returncode}: {tail}")
        return last_json_line(out)

    @staticmethod
    def _kill_group(proc: subprocess.Popen[str]) -> None:
        """The child and anything it left in its group (writers, sleepers). Only called before
        the child is reaped, so its pid still names its group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def step(
        self, names: tuple[str, ...], unit: str, target: float, on: str, fn: Callable[[], None]
    ) -> None:
        """Run `fn` for `names` (unless filtered out); a failure becomes each figure's note."""
        wanted = [n for n in names if self.only is None or n in self.only]
        if not wanted:
            return
        log(f"measuring {', '.join(wanted)}")
        t0 = time.monotonic()
        try:
            fn()
        except (ChildFailed, OSError, RuntimeError, ValueError, KeyError) as exc:
            log(f"  failed: {exc}")
            for n in wanted:
                self.figures.setdefault(n, missing(unit, target, on, f"not measured: {exc}"))
        log(f"  done in {time.monotonic() - t0:.1f}s")

    # -- workload -----------------------------------------------------------------------------
    def setup(self) -> None:
        s = self.scale
        t0 = time.monotonic()
        self.tree = build_tree(self.work / "root", s.namespaces, s.files)
        log(
            f"built {s.namespaces} namespaces x {s.files} files in {time.monotonic() - t0:.1f}s"
            f" under {self.work}"
        )
        owners = Owners(self.tree.keys, s.owners, self.work, self.env)
        self.owners.append(owners)
        owners.start("quiet")
        writers = every_nth(self.tree.keys, s.writers)
        self.plan = self.tree.plan_file(self.work / "plan-writers.json", writers)

    @property
    def root(self) -> Path:
        assert self.tree is not None
        return self.tree.root

    # -- figures --------------------------------------------------------------------------------
    def run(self) -> None:
        step = self.step
        step(("fence", "run_start"), "ms", 30, "value", self.fence)
        step(("net_fence", "forward", "private_ports"), "ms", 30, "value", self.net_fence)
        step(("corpus",), "incidents", 0, "value", self.corpus)
        step(("guard",), "ms", 50, "value", self.guard)
        if self.only is not None and self.only <= LIGHT:
            return  # `--only fence`: no need for the 1,000 lanes
        self.setup()
        step(("first_picture",), "s", 1.2, "ratio", self.first_picture)
        step(("first_screen",), "s", 0.5, "value", self.first_screen)
        step(("frame_one_cell",), "ms", 20, "value", self.frame_one_cell)
        step(("process_probe",), "ms", 2.0, "ratio", self.process_probe)
        step(("idle_cpu", "rss"), "%", 0.3, "value", self.idle_and_rss)
        step(("service_cpu", "foreign_writes"), "%", 3.0, "value", self.service)
        if self.figures.get("service_cpu", {}).get("value", 0) is None:  # one child, 2 targets
            self.figures["service_cpu"]["target"] = 0.2
        step(("write_to_model",), "ms", 20, "value", self.write_to_model)
        step(("heartbeats",), "ms", 2.0, "ratio", self.heartbeats)
        step(("write_to_screen",), "ms", 2.0, "ratio", self.write_to_screen)
        step(("burst",), "s", 1.0, "value", self.burst)
        step(("idle_cpu",), "%", 0.3, "value", self.idle_released)
        step(("first_picture_cold",), "s", 1.2, "ratio", self.first_picture_cold)

    def first_picture(self) -> None:
        s = self.scale
        r = self.child("fig_scan", "warm", self.root, s.scan_reps, timeout=900)
        detail = {
            "namespaces": r["namespaces"],
            "files_on_disk": r["floor_files"],
            "files_counted": r["engine_files"],
            "states_s": round(r["states"], 3),
            "runs_floor_s": r["floor_s"],
            "runs_engine_s": r["counts_s"],
        }
        note = None
        if r["engine_files"] != r["floor_files"]:
            note = f"the engine counted {r['engine_files']} files, the floor {r['floor_files']}"
        self.figures["first_picture"] = figure(
            r["counts"], "s", r["floor"], 1.2, "ratio", note=note, detail=detail
        )

    def first_picture_cold(self) -> None:
        s = self.scale
        if not s.cold_reps:
            why = "full run only (it drops the machine's caches)"
            self.figures["first_picture_cold"] = missing("s", 1.2, "ratio", why)
            return
        r = self.child("fig_scan", "cold", self.root, s.cold_reps, timeout=900)
        if "note" in r:
            self.figures["first_picture_cold"] = missing("s", 1.2, "ratio", r["note"])
            return
        self.figures["first_picture_cold"] = figure(
            r["counts"],
            "s",
            r["floor"],
            1.2,
            "ratio",
            note="caches dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before each run",
            detail={
                "states_s": round(r["states"], 3),
                "runs_floor_s": r["floor_s"],
                "runs_engine_s": r["counts_s"],
            },
        )

    def first_screen(self) -> None:
        s = self.scale
        floor = self.child("fig_screen", "stamps", self.root)
        runs = [
            self.child("fig_screen", "first", self.root, s.namespaces, timeout=300)
            for _ in range(max(1, s.screen_reps))
        ]
        runs.sort(key=lambda x: x["screen_s"])
        r = runs[len(runs) // 2]  # the median run, with its breakdown
        median = r["screen_s"]
        values = [x["screen_s"] for x in runs]
        note = None
        if not all(x["all_live"] and x["rows"] == s.namespaces for x in runs):
            note = f"rows {r['rows']}, states {r['states']}: not every lane listed as live"
        self.figures["first_screen"] = figure(
            median,
            "s",
            floor["floor_s"],
            0.5,
            "value",
            note=note,
            detail={
                "runs_s": [round(v, 3) for v in values],
                "first_frame_s": round(r["first_frame_s"], 3),
                "engine_delivered_s": r["engine_delivered_s"] and round(r["engine_delivered_s"], 3),
                "ui_applied_s": r["ui_applied_s"] and round(r["ui_applied_s"], 3),
                "imports_s": round(r["imports_s"], 3),
                "value_plus_imports_s": round(median + r["imports_s"], 3),
                "stamps_read": floor["stamps"],
            },
        )

    def frame_one_cell(self) -> None:
        s = self.scale
        r = self.child("fig_frame", s.namespaces, s.frame_samples, timeout=300)
        lane, data = r["lane_table"], r["data_table"]
        self.figures["frame_one_cell"] = figure(
            lane["p90_ms"],
            "ms",
            data["p90_ms"],
            20,
            "value",
            detail={
                "rows": r["rows"],
                "measure": "p90 of CPU per frame (tests/bench/table_frame.py frame_costs)",
                "lane_table": lane,
                "data_table": data,
            },
        )

    def fence(self) -> None:
        r = self.child("fig_fence", self.work, self.scale.fence_reps)
        ms = {k: r[k] * 1000 for k in ("python", "unfenced", "fenced")}
        detail = {
            "how": r["how"],
            "interpreter": r.get("interpreter"),
            "fenced_ms": round(ms["fenced"], 1),
            "unfenced_ms": round(ms["unfenced"], 1),
            "python_ms": round(ms["python"], 1),
            # additive: the minimums, and the 1-minute load average before and after
            **{f"{k}_min_ms": round(r[f"{k}_min"] * 1000, 1) for k in ms if f"{k}_min" in r},
            "load": r.get("load"),
        }
        if r["how"] == "none":
            self.figures["fence"] = missing("ms", 30, "value", "this kernel fences no lane")
        else:
            extra = ms["fenced"] - ms["unfenced"]
            self.figures["fence"] = figure(extra, "ms", None, 30, detail=detail, digits=1)
        self.figures["run_start"] = figure(
            ms["unfenced"], "ms", ms["python"], 150, detail=detail, digits=1
        )

    def net_fence(self) -> None:
        """`--fence net` over the /tmp fence (target <= 30 ms); a forwarded port's time to
        carry 256 MiB against a direct connection's (target <= 4x: two Python threads copy)."""
        r = self.child("fig_netfence", self.work, self.scale.fence_reps)
        ms = {k: r[k] * 1000 for k in ("tmp", "net")}
        detail = {
            "net": r["how"],
            "net_ms": round(ms["net"], 1),
            "tmp_fence_ms": round(ms["tmp"], 1),
            **{f"{k}_min_ms": round(r[f"{k}_min"] * 1000, 1) for k in ms},
            "load": r.get("load"),
        }
        if r["how"] != "private":
            why = "no network fence here (slirp4netns, /dev/net/tun or the kernel refuse)"
            self.figures["net_fence"] = missing("ms", 30, "value", why)
            self.figures["forward"] = missing("ms", 4.0, "ratio", why)
            self.figures["private_ports"] = missing("ms", 0.5, "value", why)
            return
        self.figures["net_fence"] = figure(
            ms["net"] - ms["tmp"], "ms", None, 30, detail=detail, digits=1
        )
        keys = ("direct_mb_s", "forwarded_mb_s", "bytes")
        self.figures["forward"] = figure(
            r["forwarded_s"] * 1000,
            "ms",
            r["direct_s"] * 1000,
            4.0,
            "ratio",
            detail={**{k: r[k] for k in keys}, "load": r.get("load")},
            digits=1,
        )
        # A net-fenced lane's look between probes (its socket counts; docs/ports.md), target
        # 0.5 ms per lane per look; the tables' read, done only when they moved, in the detail.
        self.figures["private_ports"] = figure(
            r["private_look_ms"],
            "ms",
            None,
            0.5,
            detail={"tables_ms": round(r["private_tables_ms"], 2), "load": r.get("load")},
            digits=2,
        )

    def guard(self) -> None:
        """`lanewatch guard`: p99 of a hook call, start to exit; the floor is the
        interpreter alone (`python -c pass`) measured beside it. The CPU each used is in the
        detail: on a loaded machine the wall clock is mostly waiting for a core."""
        r = self.child("fig_guard", self.work, self.scale.guard_calls, timeout=1800)
        keys = ("p50", "p90", "p99", "max", "floor_p50", "floor_p99")
        keys += ("cpu_p50", "cpu_p99", "floor_cpu_p50")  # CPU: what the load of others leaves
        ms = {k: round(r[k] * 1000, 1) for k in keys if k in r}
        note = f"{r['wrong']} of {r['calls']} calls gave the wrong verdict" if r["wrong"] else None
        detail = {"calls": r["calls"], **{f"{k}_ms": v for k, v in ms.items()}, "load": r["load"]}
        wrong = False if r["wrong"] else None
        self.figures["guard"] = figure(
            ms["p99"], "ms", ms["floor_p99"], 50, ok=wrong, note=note, detail=detail, digits=1
        )

    def corpus(self) -> None:
        """Invented incidents on the real-workload corpus (tests/corpus); not at --smoke, whose
        runs check the machinery (the corpus has its own test)."""
        if self.scale.mode == "smoke":
            why = "not at --smoke: tests/corpus/test_corpus.py runs it; `--only corpus`"
            self.figures["corpus"] = missing("incidents", 0, "value", why)
            return
        r = self.child("fig_corpus", self.work, timeout=900)
        if "note" in r:
            self.figures["corpus"] = missing("incidents", 0, "value", r["note"])
            return
        ok = r["invented"] == 0 and r["found"] == r["planted"] and not r["failures"]
        self.figures["corpus"] = figure(r["invented"], "incidents", None, 0, detail=r, ok=ok)

    def process_probe(self) -> None:
        s = self.scale
        r = self.child("fig_probe", self.work / "probe-root", s.probe_procs, s.probe_reps)
        timed = ("floor", "probe", "procscan_only", "fast_probe")
        detail = {k: v for k, v in r.items() if k not in timed}
        detail["procscan_only_ms"] = round(r["procscan_only"] * 1000, 2)
        detail["fast_probe_ms"] = round(r["fast_probe"] * 1000, 2)
        self.figures["process_probe"] = figure(
            r["probe"] * 1000, "ms", r["floor"] * 1000, 2.0, "ratio", detail=detail, digits=2
        )

    def idle_and_rss(self) -> None:
        s = self.scale
        app = self.child(
            "fig_idle", "app", self.root, s.namespaces, s.idle_seconds, s.idle_settle, timeout=600
        )
        engine: dict[str, Any] = {}
        plain: dict[str, Any] = {}
        if s.idle_variants:
            engine = self.child("fig_idle", "engine", self.root, s.idle_seconds, timeout=600)
            plain = self.child(
                "fig_idle", "engine", self.root, s.idle_seconds, "--no-attribution", timeout=600
            )
        bare = self.child("fig_idle", "bare")
        self.figures["idle_cpu"] = figure(
            app["cpu_share"] * 100,
            "% of one core",
            0.0,
            0.3,
            "value",
            note="the dashboard (engine + UI, headless) with every lane live and quiet",
            detail={
                "seconds": app["seconds"],
                "engine_alone_pct": (
                    round(engine["cpu_share"] * 100, 2) if engine else "full run only"
                ),
                "engine_alone_threads_pct": engine.get("threads_pct", "full run only"),
                "engine_alone_no_attribution_pct": (
                    round(plain["cpu_share"] * 100, 2) if plain else "full run only"
                ),
                "probes": app["engine"]["probes"],
                "engine_in_window": app["in_window"],
                # Rows on screen whose ages read seconds, and frames painted in the window:
                # lanes younger than a minute repaint every second (see fig_idle).
                "ui_in_window": app.get("ui"),
                "engine_alone_in_window": engine.get("in_window", "full run only"),
                "threads_pct": app["threads_pct"],
                "engine_stats": app["engine"],
            },
        )
        self.figures["rss"] = figure(
            max(app["rss_mb"], app["rss_after_idle_mb"]),
            "MB",
            bare["rss_mb"],
            150,
            "value",
            digits=1,
            detail={
                "rss_settled_mb": app["rss_mb"],
                "rss_after_idle_mb": app["rss_after_idle_mb"],
                "peak_rss_mb": app["peak_rss_mb"],
                "engine_alone_mb": engine.get("rss_mb", "full run only"),
                "bare_textual_peak_mb": bare["peak_rss_mb"],
            },
        )

    def service(self) -> None:
        """`record --service` on the 1,000 quiet lanes: alone, then while another process
        writes 10,000 files a second outside every root (tests/bench/fig_service.py)."""
        s = self.scale
        wanted = [
            n for n in ("service_cpu", "foreign_writes") if self.only is None or n in self.only
        ]
        phases = []
        if "service_cpu" in wanted:
            phases.append("quiet")
        if "foreign_writes" in wanted:
            phases += ["foreign", "foreign_tmp"]
        # At --smoke (the suite) every write stays in the bench's own folder.
        where = self.work if s.mode == "smoke" else "auto"
        r = self.child(
            "fig_service", self.root, s.service_seconds, s.foreign_rate, where,
            f"warmup={s.service_warmup}", *phases, timeout=900,
        )  # fmt: skip
        common = {
            "foreign_folder": r["foreign_folder"],
            "settled_s": r["settled_s"],
            "warmup_s": r["warmup_s"],
        }
        if not r.get("attribution_kernel"):
            common["attribution"] = "not kernel (not root?): foreign writes never reach it"
        if "quiet" in r:
            q = r["quiet"]
            self.figures["service_cpu"] = figure(
                q["cpu_share"] * 100, "% of one core", 0.0, 0.2, "value",
                note="`lanewatch record --service` with every lane live and quiet",
                detail={**q, **common},
            )  # fmt: skip
        if "foreign" in r:
            f, t = r["foreign"], r["foreign_tmp"]
            if "quiet" in r:  # the same recorder a moment before, nobody of ours writing
                f = {
                    **f,
                    "above_quiet_pct": round((f["cpu_share"] - r["quiet"]["cpu_share"]) * 100, 2),
                }
            self.figures["foreign_writes"] = figure(
                f["cpu_share"] * 100, "% of one core", 0.0, 3.0, "value",
                note=(
                    f"the recorder while another process writes {f['writes_per_s']} files/s"
                    " outside every root and shared temp, same filesystem"
                ),
                detail={**f, **common, "in_shared_temp": t},
            )  # fmt: skip

    def idle_released(self) -> None:
        """Idle CPU once every lane is released: no live owner, no /proc scan."""
        if "idle_cpu" not in self.figures or self.figures["idle_cpu"]["value"] is None:
            return
        if not self.scale.idle_variants:
            self.figures["idle_cpu"]["detail"]["engine_alone_released_pct"] = "full run only"
            return
        self.owners[0].mode("release")  # the main tree's owners
        engine = self.child("fig_idle", "engine", self.root, self.scale.idle_seconds, timeout=600)
        detail = self.figures["idle_cpu"]["detail"]
        detail["engine_alone_released_pct"] = round(engine["cpu_share"] * 100, 2)
        detail["engine_alone_released_threads_pct"] = engine["threads_pct"]

    def _latency(self, what: str, seconds: float) -> dict[str, Any]:
        s = self.scale
        return self.child(
            "fig_latency",
            what,
            self.root,
            self.plan,
            s.write_rate,
            seconds,
            self.work,
            timeout=seconds + 600,
        )

    def write_to_model(self) -> None:
        s = self.scale
        floor = self._latency("floor", s.write_seconds)
        model = self._latency("model", s.write_seconds)
        self.figures["write_to_model"] = self._latency_figure(model, floor, "watchdog")
        self.no_beats = model

    def _latency_figure(
        self,
        model: dict[str, Any],
        floor: dict[str, Any],
        floor_name: str,
        target: float = 20,
        on: str = "value",
    ) -> dict[str, Any]:
        value = model["latency"].get("p99_ms")
        base = floor["latency"].get("p99_ms") if "latency" in floor else None
        notes = []
        if model["not_reached"]:
            notes.append(f"{model['not_reached']} writes never reached the model")
        notes += self._short_load(model, floor)
        note = "; ".join(notes) or None
        if value is None:
            return missing("ms", target, on, note or "no samples")
        return figure(
            value,
            "ms",
            base,
            target,
            on,
            note=note,
            detail={
                "lanewatch": model,
                floor_name: floor,
            },
        )

    def _short_load(self, *runs: dict[str, Any]) -> list[str]:
        """Say so when the writer could not keep the asked rate (a starved machine)."""
        asked = self.scale.write_rate
        return [
            f"the writer reached {r['write_rate']:g} of {asked} files/s (lagged "
            f"{r['writer_lag_ms'] / 1000:.1f}s): the load was lighter than asked"
            for r in runs
            if r.get("write_rate", asked) < 0.9 * asked
        ][:1]

    def heartbeats(self) -> None:
        s = self.scale
        owners = self.owners[0]
        owners.mode("beat")
        try:
            model = self._latency("model", s.beat_seconds)
        finally:
            owners.mode("quiet")
        floor = self.no_beats
        if floor is None:
            floor = self._latency("model", s.beat_seconds)
        # p99 with the beats within 2x of write_to_model's p99 without them, same run
        fig = self._latency_figure(model, floor, "without_heartbeats", 2.0, "ratio")
        fig["detail"]["heartbeats_per_s"] = round(s.namespaces / 5.0, 1)
        self.figures["heartbeats"] = fig

    def write_to_screen(self) -> None:
        s = self.scale
        args = (self.root, self.plan, s.write_rate, s.write_seconds, self.work)
        floor = self.child("fig_screen", "floor-write", *args, timeout=s.write_seconds + 600)
        app = self.child("fig_screen", "write", *args, timeout=s.write_seconds + 600)
        value = app["screen"].get("p99_ms")
        notes = []
        if app["not_reached"]:
            notes.append(f"{app['not_reached']} writes never reached the table")
        notes += self._short_load(app)
        note = "; ".join(notes) or None
        if value is None:
            self.figures["write_to_screen"] = missing(
                "ms", 2.0, "ratio", note or "no write to a row on screen"
            )
            return
        self.figures["write_to_screen"] = figure(
            value,
            "ms",
            floor["screen"].get("p99_ms"),
            2.0,
            "ratio",
            note=note,
            detail={"lanewatch": app, "watchdog_to_one_static": floor},
        )

    def burst(self) -> None:
        s = self.scale
        tree = build_tree(self.work / "burst-root", s.burst_namespaces, s.files)
        owners = Owners(tree.keys, 1, self.work, self.env)
        self.owners.append(owners)
        owners.start("quiet")
        plan = self.work / "plan-burst.json"
        dump_json(plan, {"keys": tree.keys})
        r = self.child(
            "fig_burst",
            tree.root,
            plan,
            s.burst_rate,
            s.burst_seconds,
            self.work,
            timeout=s.burst_seconds + 600,
        )
        ok = bool(r["matched"]) and r["catch_up_s"] is not None and r["catch_up_s"] <= 1.0
        note = None
        if not r["matched"]:
            from tests.bench.fig_burst import describe

            note = "the picture never matched the disk: events that change a state were lost"
            if r.get("differences"):  # kept in full in the detail; the gist on the note
                note += f" ({describe(r['differences'])})"
        self.figures["burst"] = figure(
            r["catch_up_s"], "s", None, 1.0, "value", ok=ok, note=note, detail=r
        )

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        t0 = time.monotonic()
        for proc in list(self.children):
            self._kill_group(proc)
        for owners in self.owners:
            owners.stop()
        t1 = time.monotonic()
        shutil.rmtree(self.work, ignore_errors=True)
        took = time.monotonic() - t1
        log(f"stopped the owners in {t1 - t0:.1f}s, removed {self.work} in {took:.1f}s")


def machine(work_fs: str) -> dict[str, Any]:
    import psutil
    import textual
    import watchdog.version

    def read(path: str) -> str | None:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    model = None
    cpuinfo = read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "python": platform.python_version(),
        "textual": textual.__version__,
        "watchdog": watchdog.version.VERSION_STRING,
        "psutil": psutil.__version__,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "root_user": os.geteuid() == 0,
        "workdir_fs": work_fs,
        "inotify_max_queued_events": read("/proc/sys/fs/inotify/max_queued_events"),
        "inotify_max_user_watches": read("/proc/sys/fs/inotify/max_user_watches"),
    }


def filesystem_of(path: Path) -> str:
    best, fs = "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
                    best, fs = parts[1], parts[2]
    except OSError:
        pass
    return fs


def render(result: dict[str, Any]) -> str:
    lines = [f"{'figure':<20} {'value':>10} {'floor':>10} {'ratio':>7}  {'target':<18} ok"]
    for name, f in result["figures"].items():
        value = "-" if f["value"] is None else f"{f['value']:g}"
        floor = "-" if f["floor"] is None else f"{f['floor']:g}"
        ratio = "-" if f["ratio"] is None else f"{f['ratio']:g}x"
        if f["target_on"] == "ratio":
            target = f"<= {f['target']:g}x floor"
        else:
            target = f"<= {f['target']:g} {f['unit']}"
        ok = {True: "yes", False: "NO", None: "n/a"}[f["ok"]]
        lines.append(f"{name:<20} {value:>10} {floor:>10} {ratio:>7}  {target:<18} {ok}")
        lines.append(f"{'':<20} unit: {f['unit']}" + (f"; {f['note']}" if f["note"] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="lanewatch's benchmark")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="smaller workloads: under a minute")
    size.add_argument("--smoke", action="store_true", help="tiny workloads, for the test suite")
    parser.add_argument("--json", action="store_true", help="print the JSON object only")
    parser.add_argument("--only", nargs="+", choices=FIGURES, help="measure these figures")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    terminal_signals.restore()  # started with `&` from a script: Ctrl-C must reach its lanes
    started = time.monotonic()
    load_before = os.getloadavg()
    bench = Bench(SCALES[mode], set(args.only) if args.only else None)
    fs = filesystem_of(bench.work)
    try:
        bench.run()
    except KeyboardInterrupt:
        log("interrupted: stopping what was started, removing the work folder")
        return 130
    finally:
        bench.close()
    figures = {}
    for name in FIGURES:
        if args.only and name not in args.only:
            continue
        figures[name] = bench.figures.get(name) or missing("", 0, "value", "not measured")
    result = {
        "figures": figures,
        "machine": {
            **machine(fs),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "run": {
            "mode": mode,
            "scale": SCALES[mode].to_json(),
            "seconds": round(time.monotonic() - started, 1),
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
