"""The audit's report: the runs, every path they wrote outside their lanes, and three views of
it (JSON, the Markdown migration queue, text for the terminal)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lanewatch.audit.scopes import SCOPES
from lanewatch.inert import inert

EXIT_OK = 0
EXIT_SHARED = 4  # a path written by two runs: unfenced, they would clobber each other
EXIT_INCOMPLETE = 5  # a run could not be fenced or did not start: the picture has holes


@dataclass
class Run:
    index: int
    checkout: str
    lane: str
    namespace: str
    log: str = ""
    exit_code: int | None = None
    fence: str | None = None  # how the lane was fenced: "kernel" or "bwrap" (its stamp says)
    home: str = ""  # "overlay", or why the home folder was not seen
    error: str | None = None
    log_tail: str = ""
    before: Any = None  # the checkout's state before the run (not reported)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("before")
        return data


@dataclass
class Write:
    run: int
    where: str  # the real place the path names: the checkout, or "/tmp", "/var/tmp", "~"
    kind: str  # "written" | "deleted"
    mtime_ns: int | None
    tests: list[str] = field(default_factory=list)


@dataclass
class Read:
    run: int
    time_ns: int
    tests: list[str] = field(default_factory=list)


@dataclass
class Finding:
    path: str  # "/tmp/x", "~/.cache/tool/x", "<checkout>/out/x"
    scope: str  # scopes.SCOPES
    owner: str  # the shared folder it belongs to
    fix: str
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)  # seen as root only (kernelwatch.py)
    reads_seen: bool = False  # whether reads of this path were watched at all

    @property
    def runs(self) -> list[int]:
        return sorted({w.run for w in self.writes})

    @property
    def shared(self) -> bool:
        """Two runs wrote the same real path (for the checkout: two runs in ONE checkout)."""
        by_place: dict[str, set[int]] = {}
        for w in self.writes:
            by_place.setdefault(w.where, set()).add(w.run)
        return any(len(runs) > 1 for runs in by_place.values())

    @property
    def tests(self) -> list[str]:
        return sorted({t for w in self.writes for t in w.tests})

    @property
    def crossed(self) -> list[tuple[int, list[int]]]:
        """(reader, the other runs that wrote it) for each run that read what another wrote:
        one checkout's gate reading another's artifact."""
        out = []
        for reader in sorted({r.run for r in self.reads}):
            others = [w for w in self.runs if w != reader]
            if others:
                out.append((reader, others))
        return out

    @property
    def read_note(self) -> str:
        """Who read it, in words ("run 1 read what run 0 wrote"), or that reads were not seen."""
        if not self.reads_seen:
            return "reads not seen"
        if not self.reads:
            return "read by no run"
        parts = [
            f"run {reader} read what run {', '.join(map(str, writers))} wrote"
            for reader, writers in self.crossed
        ]
        own = sorted({r.run for r in self.reads} - {c[0] for c in self.crossed})
        parts += [f"run {r} read it back" for r in own]
        tests = sorted({t for r in self.reads for t in r.tests})
        if tests:
            parts.append("read by " + ", ".join(f"`{inert(t)}`" for t in tests))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "scope": self.scope,
            "owner": self.owner,
            "shared": self.shared,
            "runs": self.runs,
            "times": len(self.writes),
            "tests": self.tests,
            "fix": self.fix,
            "writes": [asdict(w) for w in self.writes],
            "reads_seen": self.reads_seen,
            "reads": [asdict(r) for r in self.reads],
            "read_by_other_run": bool(self.crossed),
        }


@dataclass
class AuditReport:
    command: list[str]
    pytest: bool
    runs: list[Run]
    findings: list[Finding]
    unseen: list[str]
    work_dir: str = ""
    kept: bool = False
    repository: str | None = None

    kernel: str = ""  # "on", or why every write outside the fenced places was not seen
    timed_out: list[int] = field(default_factory=list)  # runs ended by --timeout
    timeout: float | None = None
    bytecode_caches: int = 0  # `__pycache__/*.pyc` paths written, left out (scopes.py)
    own_ipc_names: int = 0  # names in /dev/shm of one run alone, left out (audit._own_ipc_names)

    @property
    def shared(self) -> list[Finding]:
        return [f for f in self.findings if f.shared]

    @property
    def crossed(self) -> list[Finding]:
        """Paths one run read after another wrote them (seen as root)."""
        return [f for f in self.findings if f.crossed]

    @property
    def errors(self) -> list[str]:
        return [f"run {r.index}: {r.error}" for r in self.runs if r.error]

    @property
    def exit_code(self) -> int:
        if self.shared or self.crossed:
            return EXIT_SHARED
        if self.errors:
            return EXIT_INCOMPLETE
        return EXIT_OK

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.scope == s) for s in SCOPES}

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == EXIT_OK,
            "exit_code": self.exit_code,
            "command": self.command,
            "pytest": self.pytest,
            "repository": self.repository,
            "work_dir": self.work_dir,
            "kept": self.kept,
            "counts": self.counts(),
            "shared": len(self.shared),
            "read_by_other_run": len(self.crossed),
            "kernel": self.kernel,
            "timeout": self.timeout,
            "timed_out": self.timed_out,
            "runs": [r.to_json() for r in self.runs],
            "findings": [f.to_json() for f in self.findings],
            "unseen": self.unseen,
            "errors": self.errors,
            "bytecode_caches": self.bytecode_caches,
            "own_ipc_names": self.own_ipc_names,
        }

    @property
    def left_out(self) -> list[str]:
        """The lines that say what was seen and left out."""
        out: list[str] = []
        if self.bytecode_caches:
            out.append(
                f"{self.bytecode_caches} bytecode caches (`__pycache__/*.pyc`, Python's and "
                "pytest's assertion rewriting, in a venv's site-packages too): each is derived "
                "from its source and written atomically, so runs sharing one cannot clobber it"
            )
        if self.own_ipc_names:
            out.append(
                f"{self.own_ipc_names} names in /dev/shm each written by one run alone "
                "(semaphores and shared memory a program names unique, as multiprocessing's "
                "`sem.XXXXXX` and `psm_…`): no other run used them"
            )
        return out


def _writers(f: Finding, pytest: bool) -> str:
    runs = ", ".join(str(r) for r in f.runs)
    if not pytest:
        return f"runs {runs}"
    tests = ", ".join(f"`{inert(t)}`" for t in f.tests) or "no test (collection or the session)"
    return f"runs {runs}; by {tests}"


def markdown(report: AuditReport) -> str:
    """The migration queue: shared paths first, grouped by path, each with a fix."""
    cmd = inert(" ".join(report.command))
    out = [f"# Migration queue for `{cmd}`", ""]
    c = report.counts()
    out.append(
        f"{len(report.runs)} runs in parallel; {len(report.findings)} paths written outside the "
        f"lanes ({', '.join(f'{n} {s}' for s, n in c.items())}); "
        f"**{len(report.shared)} shared between runs**"
        + (f", **{len(report.crossed)} read by another run**." if report.crossed else ".")
    )
    out.append("")
    if report.timed_out:
        ended = ", ".join(map(str, report.timed_out))
        out += [f"**Timed out** after {report.timeout:g} s and ended: runs {ended}.", ""]
    for f in report.findings:
        mark = "**COLLISION**" if f.shared else "not shared"
        if f.crossed:
            mark += "; **READ BY ANOTHER RUN**"
        out.append(f"## `{inert(f.path)}`")
        out.append("")
        out.append(f"- scope: {f.scope} ({inert(f.owner)}); {mark}")
        done = "listened on" if f.owner == "ports" else "written"  # a port: audit/portwatch.py
        out.append(f"- {done} {len(f.writes)} times: {_writers(f, report.pytest)}")
        out.append(f"- reads: {f.read_note}")
        out.append(f"- fix: {f.fix}")
        out.append("")
    if report.left_out:
        out += ["## Left out", "", *(f"- {line}" for line in report.left_out), ""]
    if report.unseen:
        out += ["## Not seen", ""] + [f"- {inert(u)}" for u in report.unseen] + [""]
    if report.errors:
        out += ["## Errors", ""] + [f"- {inert(e)}" for e in report.errors] + [""]
    return "\n".join(out)


def text(report: AuditReport) -> list[str]:
    out = []
    for r in report.runs:
        state = r.error or f"exit {r.exit_code}, fence {r.fence}, home {r.home}"
        out.append(f"run {r.index}: {inert(r.checkout)}  {inert(state)}")
    for f in report.findings:
        mark = "SHARED " if f.shared else "READ   " if f.crossed else "       "
        out.append(f"{mark}{f.scope:16} {inert(f.path)}  ({_writers(f, report.pytest)})")
        if f.reads:
            out.append(f"       {f.read_note}")
    if report.timed_out:
        ended = ", ".join(map(str, report.timed_out))
        out.append(f"timed out after {report.timeout:g} s and ended: runs {ended}")
    out += [f"left out: {line}" for line in report.left_out]
    for u in report.unseen:
        out.append(f"not seen: {inert(u)}")
    code = report.exit_code
    if code == EXIT_OK:
        out.append(f"audit: ok, {len(report.findings)} paths written, none shared between runs")
    elif code == EXIT_SHARED:
        out.append(
            f"audit: FAILED, {len(report.shared)} paths written by more than one run, "
            f"{len(report.crossed)} read by a run that did not write them "
            "(--markdown lists the fixes)"
        )
    else:
        out.append("audit: INCOMPLETE, a run could not be audited (see above)")
    return out
