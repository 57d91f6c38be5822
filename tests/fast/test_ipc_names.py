"""Names in /dev/shm: one lane family using a name alone is no collision, two families on one
name are one `shared-file` incident naming both from the first write on. Pure: the detector's
rule and the recorder's memory of who wrote which name (`model/ipcnames.py`); end to end with
real multiprocessing in tests/processes/test_shm_names.py."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.model.detectors.unbound_writer import alone_in_ipc, unbound_write
from lanewatch.model.incidents import merge
from lanewatch.model.ipcnames import IpcNames
from lanewatch.model.kernelwrites import KernelWrite
from tests.kits.attributionkit import kw

PATH = "/dev/shm/psm_1f2e3d"


def by(lane: str, path: str = PATH, t: float = 1.0, family: str | None = None) -> KernelWrite:
    return replace(kw(path, lane, t), family=family)


def test_a_name_in_dev_shm_alone_is_quiet_and_with_a_rival_is_judged() -> None:
    assert alone_in_ipc("/dev/shm/sem.Xy12ab", frozenset())
    assert alone_in_ipc("/dev/shm/joblib_memmapping_folder_1/x.pkl", frozenset())
    assert not alone_in_ipc("/dev/shm/x", frozenset({"/r/ck.b"}))
    assert not alone_in_ipc("/tmp/receipt.json", frozenset())  # /tmp: judged as before
    assert not alone_in_ipc("/dev/shmem/x", frozenset())  # not below /dev/shm
    assert unbound_write(by("a"), ["/r"]) is None
    assert unbound_write(by("a"), ["/r"], frozenset({"/r/ck.b"})) is not None
    assert unbound_write(by("a", "/tmp/receipt.json"), ["/r"]) is not None


def test_the_first_family_is_handed_back_once_when_a_second_writes_the_name() -> None:
    names = IpcNames()
    first, again = by("a", t=1.0), by("a", t=2.0)
    assert names.meet(first, "/r") == (frozenset(), [])
    assert names.meet(again, "/r") == (frozenset(), [])  # still alone
    rivals, earlier = names.meet(by("b", t=3.0), "/r2")
    assert rivals == {"/r/ck.a"} and earlier == [(again, "/r")]  # a's latest, once
    assert names.meet(by("b", t=4.0), "/r2") == (frozenset({"/r/ck.a"}), [])
    assert names.meet(by("a", t=5.0), "/r") == (frozenset({"/r/ck.b"}), [])  # b was judged


def test_the_incident_names_both_writers_from_the_first_write_on() -> None:
    names = IpcNames()
    rec = None
    for w in (by("a", t=1.0), by("b", t=2.0), by("a", t=3.0)):
        rivals, earlier = names.meet(w, "/r")
        for prior, _root in earlier:
            obs = unbound_write(prior, ["/r"], frozenset({"/r/ck.b"}))
            assert obs is not None
            rec = merge(rec, obs, "/r")
        obs = unbound_write(w, ["/r"], rivals)
        if obs is not None:
            rec = merge(rec, obs, "/r")
    assert rec is not None
    assert rec.summary == f"a and b both write {PATH}"
    assert rec.first_seen == 1.0  # a's first write, judged once b wrote the name


def test_one_family_is_one_user_of_a_name() -> None:
    """An xdist worker and its main lane (one family) share a name on purpose."""
    names = IpcNames()
    names.meet(by("pytest"), "/r")
    worker = replace(by("pytest-gw0"), family="ck.pytest")
    assert names.meet(worker, "/r") == (frozenset(), [])


def test_the_memory_forgets_the_oldest_name_first() -> None:
    names = IpcNames(most=2)
    for n in range(3):
        names.meet(by("a", f"/dev/shm/n{n}"), "/r")
    assert names.meet(by("b", "/dev/shm/n0"), "/r") == (frozenset(), [])  # forgotten
    assert names.meet(by("b", "/dev/shm/n2"), "/r")[0] == {"/r/ck.a"}
