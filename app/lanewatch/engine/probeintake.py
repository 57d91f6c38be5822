"""The engine's side of the prober: which owners it should judge, and what a `ProbeReport`
means for the model (liveness evidence, writers of each held path, foreign and unbound
writers), handed back as events (`intake.Found`) for the model keeper to apply. The prober
itself runs on its own thread (`processes/prober.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from lanewatch.engine.heldversions import HeldVersions, Holder
from lanewatch.engine.intake import Found, Namespaces
from lanewatch.lanes.leases import lease_dir, read_leases
from lanewatch.lanes.roots import state_dir
from lanewatch.lanes.stamp import OwnerState, Stamp, read_stamp
from lanewatch.linux import netsockets
from lanewatch.linux.paths import is_under
from lanewatch.model import model as m
from lanewatch.model import ports
from lanewatch.model import writers as wr
from lanewatch.model.classify import run_over
from lanewatch.model.facts import ListenerSeen
from lanewatch.model.family import Stamped
from lanewatch.model.filehistory import FileHistory
from lanewatch.model.holdings import Holding, Owner, OwnerIndex, lane_of, writes
from lanewatch.model.kinds import ESCAPED_THE_LANES, detect
from lanewatch.model.observation import Observation
from lanewatch.processes.prober import SHARED_TEMP, ProbeReport

# What `writers` was given, holdings apart: the model's namespaces, their stamps on this host,
# the owners (`ProbeIntake._alike`).
_JudgedWith = tuple[Mapping[str, m.NsRecord], Mapping[str, Stamped], Mapping[str, Owner]]


class ProbeIntake:
    def __init__(
        self, roots: Sequence[str], *, namespaces: Namespaces, history: FileHistory, host: str
    ) -> None:
        """`namespaces`: the model as applied so far (read only, from any thread); `history`:
        where the writer of each held path is noted; `host`: this host's name."""
        self.roots = list(roots)
        self._namespaces = namespaces
        self.history = history
        self.host = host
        self.ignore = [str(state_dir()), str(lease_dir())]  # lanewatch's own: state, leases
        # The last answer of `local_stamps`, with the namespaces mapping it was read from.
        self._local: tuple[object, Mapping[str, Stamp]] | None = None
        self._stamped_from: tuple[object, Mapping[str, Stamped]] | None = None
        # Inferred attribution only (the engine sets it when the kernel does not attribute):
        # shared files read while lanes hold them, kept as versions for the incident's report.
        self.held: HeldVersions | None = None
        self.holding_shared = False  # the last report saw lanes hold a shared-file incident's file
        self.port_memory = ports.PortMemory()  # who listened on which port, outside leases
        # What the last `writers` was given when it found nothing and read no stamp from
        # disk (the model's namespaces, the holdings, the owners): given the same again, it
        # finds nothing again, so an idle probe (the full scan every minute, most holdings the
        # memo's very objects) is not judged again path by path (`_nothing_new`).
        self._found_nothing: tuple[_JudgedWith, object] | None = None
        # Held paths that meant nothing, each on its own, the last time, with the namespaces
        # mapping and owners they were judged with (`writers`' `quiet`): while those are the
        # same, an unchanged holding is not judged again, however many others came and went
        # (other users' files in shared temp change between two full scans of a busy machine).
        self._quiet: set[Holding] = set()
        self._quiet_with: _JudgedWith | None = None
        self.ephemeral = netsockets.ephemeral_range()

    def local_stamps(self) -> Mapping[str, Stamp]:
        """Owners the prober should judge: live stamps of this host. Safe from any thread.

        The same mapping object while no namespace changed (the model replaces its mapping on
        any change), so the prober's idle rounds can tell "nothing new" by identity."""
        namespaces = self._namespaces()
        last = self._local
        if last is not None and last[0] is namespaces:
            return last[1]
        out = {}
        for key, rec in namespaces.items():
            s = rec.owner
            if s is not None and s.state is OwnerState.LIVE and s.host == self.host:
                out[key] = s
        stamps = MappingProxyType(out)
        self._local = (namespaces, stamps)
        return stamps

    def prefixes(self) -> list[str]:
        return [*self.roots, *SHARED_TEMP]

    def probed(self, report: ProbeReport) -> Found:
        """What `report` means for the model (the worker counts it)."""
        out = Found()
        known = self._namespaces()
        owners = OwnerIndex(report.owners)
        heard = ports.listeners(report.holdings or (), owners, report.listening)
        by_lane = ports.ports_by_lane(heard)
        evidence = {
            k: replace(v, ports=by_lane.get(k, ())) if v.ports != by_lane.get(k, ()) else v
            for k, v in report.evidence.items()
            if k in known
        }
        out.emit(m.Probed(evidence))
        if report.footprints:
            out.emit(m.Metered({k: v for k, v in report.footprints.items() if k in known}))
        if report.holdings is None:
            return out
        for obs in self._port_clashes(heard, report.at, known):
            root = self._root_of(obs, known) or self._root_of(replace(obs, victim=None), known)
            out.emit(m.Observed(obs, root))
        for h in report.holdings:
            if h.kind == "fd" and h.access in ("write", "readwrite"):
                found = lane_of(h, owners)
                lane = found[0].lane if found else "?"
                self.history.note_writer(h.path, f"pid {h.pid} (lane {lane})")
        found_obs: list[Observation] = []
        stamped = self._stamped(known)
        last = self._found_nothing
        if not (
            last is not None
            and last[1] == report.holdings
            and self._alike(last[0], known, stamped, report.owners)
        ):
            same = self._alike(self._quiet_with, known, stamped, report.owners)
            nothing: set[Holding] = set()
            found_obs = wr.writers(
                report.holdings,
                report.owners,
                known.keys(),
                roots=self.roots,
                shared=SHARED_TEMP,
                ignore=self.ignore,
                at=report.at,
                stamped=stamped,
                quiet=self._quiet if same else (),
                found_quiet=nothing,
            )
            # What was judged with a stamp read from disk may change with the disk: not kept.
            kept = not stamped.read_any
            self._quiet = nothing if kept else set()
            judged_with = (known, stamped.stamps, report.owners)
            self._quiet_with = judged_with if kept else None
            quiet = not found_obs and kept
            self._found_nothing = (judged_with, report.holdings) if quiet else None
        held: dict[str, list[Holder]] = {}
        root_of: dict[str, str] = {}
        for obs in found_obs:
            root = self._root_of(obs, known)
            out.emit(m.Observed(obs, root))
            if obs.kind in ESCAPED_THE_LANES and obs.path and self.held is not None:
                ns = obs.intruder.get("namespace")
                if isinstance(ns, str):
                    root_of[ns] = root
                    lane = str(obs.intruder.get("lane") or "?")
                    held.setdefault(obs.path, []).extend(
                        Holder(lane, ns, h)
                        for h in report.holdings
                        if h.path == obs.path and h.pid == obs.intruder.get("pid") and writes(h)
                    )
        self.holding_shared = bool(held)
        if held and self.held is not None:
            self.held.seen(held, root_of, at=report.at)
        return out

    @staticmethod
    def _alike(
        judged_with: _JudgedWith | None,
        known: Mapping[str, m.NsRecord],
        stamped: _StampedNow,
        owners: Mapping[str, Owner],
    ) -> bool:
        """Whether `writers` would be given what it was judged with, holdings apart: the same
        owners, and the same namespaces with the same stamps (the same mapping, or one the
        model made again with nothing `writers` reads changed: a rescan, a heartbeat). It
        is a pure function of those (and of stamps read from disk, not kept after one; which
        namespaces have none in the model says where it would read them)."""
        if judged_with is None:
            return False
        was, stamps, by = judged_with
        if by != owners:
            return False
        if was is known:
            return True
        return (
            was.keys() == known.keys()
            and stamps == stamped.stamps
            and _ownerless(was) == _ownerless(known)
        )

    def _port_clashes(
        self, heard: Sequence[ports.Listener], at: float, known: Mapping[str, m.NsRecord]
    ) -> list[Observation]:
        """Port incidents (`model/detectors/port_clash.py`) among the listeners of lanes of the
        watched roots (a lane of another root: its own engine reports it)."""
        mine = [h for h in heard if any(is_under(h.owner.key, r) for r in self.roots)]
        if not mine:
            return []
        leases = read_leases()
        stamped = self._stamped(known)
        found: list[Observation] = []
        now = frozenset((h.holding.pid, h.socket.inode) for h in heard)
        for one in mine:
            fact = ListenerSeen(one, leases, self.port_memory, self.ephemeral, at, stamped, now)
            found.extend(detect(fact))
        return found

    def _stamped(self, known: Mapping[str, m.NsRecord]) -> _StampedNow:
        """What each namespace's stamp on this host says, live or released (`model/family.py`):
        made again only when the model's namespaces changed. A namespace the model knows
        without a stamp is read from disk when a holding asks (`_StampedNow`): a worker writes
        in its new lane the moment its stamp is written, before the tail has told the model."""
        last = self._stamped_from
        if last is not None and last[0] is known:
            return _StampedNow(last[1], known, self.host)
        out: dict[str, Stamped] = {}
        for key, rec in known.items():
            s = rec.owner
            if s is not None and s.host == self.host:
                out[key] = Stamped(s.pid, s.start_ticks, s.family, run_over(s, rec.liveness))
        self._stamped_from = (known, out)
        return _StampedNow(out, known, self.host)

    def _root_of(self, obs: Observation, known: Mapping[str, m.NsRecord]) -> str:
        key = obs.victim or obs.intruder.get("namespace")
        if isinstance(key, str):
            rec = known.get(key)
            if rec is not None:
                return rec.root
            for root in self.roots:
                if key.startswith(root + "/"):
                    return root
        return ""


def _ownerless(known: Mapping[str, m.NsRecord]) -> set[str]:
    """The namespaces the model knows without a stamp (`_StampedNow` reads theirs from disk)."""
    return {k for k, rec in known.items() if rec.owner is None}


class _StampedNow(Mapping[str, Stamped]):
    """The model's stamps, and for a namespace it knows without one, the stamp on disk now
    (read once per probe, only for a namespace a holding lies in)."""

    def __init__(
        self, known: Mapping[str, Stamped], namespaces: Mapping[str, m.NsRecord], host: str
    ):
        self._known = known
        self._namespaces = namespaces
        self._host = host
        self._read: dict[str, Stamped | None] = {}

    @property
    def stamps(self) -> Mapping[str, Stamped]:
        """The model's stamps, as made for its namespaces mapping (none read from disk)."""
        return self._known

    @property
    def read_any(self) -> bool:
        """Whether a stamp was read from disk (what `writers` found may then change with the
        disk, not with the model)."""
        return bool(self._read)

    def __getitem__(self, key: str) -> Stamped:
        found = self._known.get(key)
        if found is None:
            found = self._from_disk(key)
        if found is None:
            raise KeyError(key)
        return found

    def _from_disk(self, key: str) -> Stamped | None:
        if key not in self._namespaces or self._namespaces[key].owner is not None:
            return None
        if key not in self._read:
            s = read_stamp(Path(key)).stamp
            ok = s is not None and s.host == self._host
            # No liveness evidence for a stamp read here: only its release says its run is over.
            over = ok and s is not None and s.state is OwnerState.RELEASED
            self._read[key] = Stamped(s.pid, s.start_ticks, s.family, over) if ok and s else None
        return self._read[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)
