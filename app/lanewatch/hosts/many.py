"""The local engine and every host's stream behind one engine's interface (for the dashboard).

Each batch reaches the UI with the whole health (the local roots', then each host's), since a
batch's health replaces what the picture had; a full local picture (a rescan, a restarted
engine process) carries every host's namespaces and incidents too, so it never erases them.
A rescan and the engine's silence are the local engine's. It satisfies
`model.engine_api.EngineApi` (an engine to the dashboard) and `Routes` (where an action on a
`NAME:…` key runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType

from lanewatch.errors import LanewatchError
from lanewatch.hosts import link
from lanewatch.hosts.actions import FarActions
from lanewatch.hosts.farviews import SEP, split_key
from lanewatch.hosts.stream import HostStream
from lanewatch.model.engine_api import EngineApi
from lanewatch.model.views import Changes, SourceHealth


class ManyHosts:
    def __init__(self, local: EngineApi, streams: Sequence[HostStream]) -> None:
        self.local = local
        self.streams = list(streams)
        self._lock = threading.Lock()
        self._local_health: tuple[SourceHealth, ...] = ()
        self._out: Callable[[Changes], None] = lambda c: None

    def start(self, on_changes: Callable[[Changes], None]) -> None:
        self._out = on_changes
        for stream in self.streams:
            stream.start(self._from_host)
        self.local.start(self._from_local)

    def stop(self) -> None:
        for stream in self.streams:  # every link asked to end first: they end together
            stream.stop(wait=False)
        self.local.stop()
        for stream in self.streams:
            stream.join()

    def acknowledge(self, incident_id: str) -> None:
        """A far incident (`NAME:ID`) is acknowledged there (`lanewatch incidents ID --ack`);
        its stream then brings it back acknowledged. A local one, by the local engine."""
        name, sep, far = incident_id.partition(SEP)
        stream = self.stream(name) if sep else None
        if stream is None:
            self.local.acknowledge(incident_id)
            return
        answer = link.call(stream.host, "incidents", far, "--ack")
        if answer.code != 0:
            raise LanewatchError(f"host {name}: {answer.why()}")

    def rescan(self) -> None:
        self.local.rescan()  # each host's stream sends its full picture on every reconnect

    def quiet_for(self) -> float | None:
        return self.local.quiet_for()

    def far(self, key: str) -> tuple[FarActions, str] | None:
        """(host, its own key) of a `NAME:…` key of one of these hosts; None for a local one;
        an error for a far namespace's key of a host this dashboard does not have."""
        name, sep, far = key.partition(SEP)
        stream = self.stream(name) if sep and far else None
        if stream is not None:
            return FarActions(stream.host), far
        found = split_key(key)
        if found is not None:
            raise LanewatchError(f"no host {found[0]} in this dashboard")
        return None

    def stream(self, name: str) -> HostStream | None:
        return next((s for s in self.streams if s.host.name == name), None)

    def _health(self) -> tuple[SourceHealth, ...]:
        hosts = [h for s in self.streams for h in s.health()]
        return (*self._local_health, *hosts)

    def _from_local(self, changes: Changes) -> None:
        with self._lock:
            if changes.health or changes.full:
                self._local_health = tuple(changes.health)
            if changes.full:
                upserts = dict(changes.upserts)
                incidents = dict(changes.incidents)
                for s in self.streams:
                    with s.lock:
                        upserts.update(s.views)
                        incidents.update(s.incidents)
                changes = replace(
                    changes,
                    upserts=MappingProxyType(upserts),
                    incidents=MappingProxyType(incidents),
                )
            out = replace(changes, health=self._health())
        self._out(out)

    def _from_host(self, changes: Changes) -> None:
        with self._lock:
            out = replace(changes, health=self._health())
        self._out(out)
