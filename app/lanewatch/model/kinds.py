"""The incident kinds: one entry each, read by every place that lists, describes or detects them.
Pure.

An entry names the kind (the stable string of `incidents --json`; a renamed kind keeps its old
name readable in `LEGACY_NAMES`, so records written before still read), says it in plain
words, ranks how bad it is, explains it in one line, and lists its detectors (the functions of
`model/detectors/` that emit it, each declaring its kind and the fact it reads:
`model/detection.py`). The registry drives detection: an intake hands each fact it learns to
`detect`, which runs the detectors that read it. `IncidentKind` is made from the entries. The
dashboard's colours, its help and empty view, `lanewatch incidents` and the metrics read the
registry; `tests/processes/test_kinds.py` checks that every detector is registered under the kind it
declares, and that the demo's plan and the docs' kinds table list each kind.

Adding a kind (docs/architecture.md, "Add an incident kind"): a detector module in
`model/detectors/` reading one of the facts of `model/facts.py`, an entry here, a line in the
demo's plan (`demo/scenario.py`), a row in docs/engine.md's kinds table, and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from lanewatch.model.detection import AnyDetector
from lanewatch.model.detectors import (
    foreign_receipt,
    foreign_writer,
    over_budget,
    port_clash,
    refused_claim,
    takeover,
    unbound_writer,
)
from lanewatch.model.facts import Fact
from lanewatch.model.observation import Observation


class Severity(StrEnum):
    HIGH = "high"  # two lanes' work is mixed now: one lane's files are being overwritten
    MEDIUM = "medium"  # a result may be wrong or a clash is one step away
    LOW = "low"  # the guard held; nothing was overwritten


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # the detectors' `KIND`
    label: str  # plain words, lower case: "a takeover" reads in a sentence
    severity: Severity
    explanation: str  # one line for people
    detectors: tuple[AnyDetector, ...]  # what emits it, in the order `detect` runs them
    # The one line for people, from every writer: title(writers, *, path, victim,
    # victim_lane, latest) -> str | None (`model.incidents`); None: the detector's summary.
    title: Callable[..., str | None] | None = None
    # One incident per file (the group key is the path): a lane's flood of them folds into one
    # incident with a count (`model/flood.py`).
    per_file: bool = False
    # A collision between lanes (what `status` exits 4 for); False: a warning about one lane.
    collision: bool = True
    # Its lanes clash only while their runs are alive together (a port, not a file, which stays
    # for the next lane to read): reopened after an acknowledgement, the incident is titled by
    # the writers seen since (`model.incidents._titled`).
    clashes_while_alive: bool = False


_KINDS = (
    Kind(
        takeover.KIND,
        "takeover",
        Severity.HIGH,
        "Another process rewrote a live lane's stamp without the lock: two owners, one namespace.",
        (takeover.takeover,),
    ),
    Kind(
        foreign_writer.KIND,
        "write from another lane",
        Severity.HIGH,
        "Processes of other lanes write (or work) inside this lane's namespace.",
        (foreign_writer.held, foreign_writer.foreign_write),
        foreign_writer.title,
    ),
    Kind(
        foreign_receipt.KIND,
        "foreign receipt",
        Severity.MEDIUM,
        "A receipt in this namespace names another checkout: a result here may not be its own.",
        (foreign_receipt.foreign_receipt,),
    ),
    Kind(
        unbound_writer.KIND,
        "write in shared temp",
        Severity.MEDIUM,
        "Lanes write one file in shared temp, outside their namespaces, where they can clash.",
        (unbound_writer.held, unbound_writer.unbound_write),
        unbound_writer.title,
        per_file=True,
    ),
    Kind(
        port_clash.LEASED,
        "port of another lane",
        Severity.HIGH,
        "A lane listens on a port leased to another lane: its $PORT reaches the wrong work.",
        (port_clash.leased,),
        port_clash.title,
    ),
    Kind(
        port_clash.SHARED,
        "port shared by lanes",
        Severity.MEDIUM,
        "Lanes listen on one fixed port outside their leases, where they clash or answer "
        "for each other.",
        (port_clash.shared,),
        port_clash.title,
        clashes_while_alive=True,
    ),
    Kind(
        refused_claim.KIND,
        "refused claim",
        Severity.LOW,
        "A second claim on a lane was refused by its lock; nothing was overwritten.",
        (refused_claim.refused_claim,),
    ),
    Kind(
        over_budget.KIND,
        "lane over its budget",
        Severity.MEDIUM,
        "A lane holds more disk or memory than its root's budgets.toml gives it, or soon will.",
        (over_budget.over_budget,),
        collision=False,
    ),
)

KINDS: Mapping[str, Kind] = MappingProxyType({k.name: k for k in _KINDS})

# The kinds as an enum (`IncidentKind.SHARED_FILE == "shared-file"`), made from the registry.
IncidentKind = StrEnum(  # type: ignore[misc]
    "IncidentKind", [(k.name.upper().replace("-", "_"), k.name) for k in _KINDS]
)

# Each fact type's detectors, in the registry's order.
_READERS: dict[type, tuple[AnyDetector, ...]] = {}
for _kind in _KINDS:
    for _detector in _kind.detectors:
        _READERS[_detector.reads] = (*_READERS.get(_detector.reads, ()), _detector)


def detect(fact: Fact) -> list[Observation]:
    """What the registry's detectors find in `fact`: the observations of every detector that
    reads its type, in the registry's order (none for a fact no detector reads)."""
    out: list[Observation] = []
    for detector in _READERS.get(type(fact), ()):
        out.extend(detector.on(fact))
    return out


# The kinds that mean a write escaped the lanes altogether: the many-host view flags a host
# where they are seen (hosts/flags.py); without the kernel, the engine reads the held file's
# versions for their timelines (engine/heldversions.py).
ESCAPED_THE_LANES: frozenset[str] = frozenset({unbound_writer.KIND})

# Names a kind had before (jargon out): records on disk may still carry them; they
# are read under the new name (`model.incidents.record_from_json`), and looked up here.
LEGACY_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "foreign-writer": foreign_writer.KIND,
        "unbound-writer": unbound_writer.KIND,
    }
)


def current_name(name: str) -> str:
    """The kind's name today (an old name from a stored record becomes the new one)."""
    return LEGACY_NAMES.get(name, name)


def kind_of(name: str) -> Kind | None:
    """The entry of `name` (or of its old name); None for a kind this version does not know
    (a newer engine's record on a shared root): callers show its name as is."""
    return KINDS.get(current_name(name))


def severity_of(name: str) -> Severity:
    """A kind's severity; an unknown kind counts as high, so it is never overlooked."""
    entry = kind_of(name)
    return entry.severity if entry is not None else Severity.HIGH


def is_collision(name: str) -> bool:
    """Whether an incident of this kind is a collision (an unknown kind counts as one)."""
    entry = kind_of(name)
    return entry.collision if entry is not None else True
