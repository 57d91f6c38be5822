"""Owner stamps: atomic writes that never go through a symlink, and typed reads of anything."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lanewatch.files.walk import read_stamp_at
from lanewatch.lanes.stamp import (
    MAX_STAMP_BYTES,
    SCHEMA,
    OwnerState,
    Stamp,
    StampRead,
    StampStatus,
    parse_stamp,
    read_stamp,
    stamp_path,
    touch_heartbeat,
    write_stamp,
)
from lanewatch.linux import procid
from lanewatch.model.classify import classify
from lanewatch.model.views import NsState
from tests.conftest import plant_special

NOW = 1_800_000_000.0


def make_stamp(**changes: Any) -> Stamp:
    me = procid.ProcessIdentity.current()
    stamp = Stamp(
        lane="agent/1",
        namespace="repo-0123456789ab.agent~2F1",
        checkout_id="repo-0123456789ab",
        checkout_path="/src/repo",
        host=procid.hostname(),
        boot_id=me.boot_id,
        pid=me.pid,
        start_ticks=me.start_ticks,
        user="someone",
        uid=os.getuid(),
        command=["pytest", "-x"],
        started_at=NOW,
        heartbeat_at=NOW,
        heartbeat_interval=5.0,
    )
    return replace(stamp, **changes)


def stamp_bytes(stamp: Stamp | None = None) -> bytes:
    return json.dumps((stamp or make_stamp()).to_json(), indent=2, sort_keys=True).encode() + b"\n"


@pytest.fixture
def ns(tmp_path: Path) -> Path:
    path = tmp_path / "ns"
    (path / ".lanewatch").mkdir(parents=True)
    return path


def assert_typed(result: StampRead) -> None:
    assert isinstance(result, StampRead)
    assert isinstance(result.status, StampStatus)
    assert (result.stamp is not None) == (result.status is StampStatus.OK)
    if result.stamp is not None:
        s = result.stamp
        assert type(s.pid) is int and s.pid > 0
        assert type(s.start_ticks) is int
        assert isinstance(s.state, OwnerState)
        assert all(isinstance(c, str) for c in s.command)
        for value in (s.started_at, s.heartbeat_at, s.heartbeat_interval):
            assert isinstance(value, int | float) and math.isfinite(value)
        assert s.heartbeat_interval > 0


def test_round_trip(ns: Path) -> None:
    stamp = make_stamp(child_pid=42, child_start_ticks=7, pgid=42)
    write_stamp(ns, stamp)
    result = read_stamp(ns)
    assert result.status is StampStatus.OK
    assert result.stamp == stamp
    assert result.mtime == os.stat(stamp_path(ns)).st_mtime
    assert result.heartbeat_at == max(stamp.heartbeat_at, result.mtime)
    released = stamp.with_changes(state=OwnerState.RELEASED, released_at=NOW + 1, exit_code=3)
    write_stamp(ns, released)
    assert read_stamp(ns).stamp == released
    leftovers = [p.name for p in (ns / ".lanewatch").iterdir()]
    assert leftovers == ["owner.json"]  # the temp file was renamed, not left behind


def test_heartbeat_is_a_touch_not_a_rewrite(ns: Path) -> None:
    write_stamp(ns, make_stamp())
    inode = os.stat(stamp_path(ns)).st_ino
    touch_heartbeat(ns, NOW + 60)
    result = read_stamp(ns)
    assert os.stat(stamp_path(ns)).st_ino == inode
    assert result.mtime == NOW + 60
    assert result.heartbeat_at == NOW + 60
    assert result.stamp is not None and result.stamp.heartbeat_at == NOW


def test_missing_empty_and_whitespace(ns: Path) -> None:
    assert read_stamp(ns).status is StampStatus.MISSING
    assert read_stamp(ns / "nowhere").status is StampStatus.MISSING
    stamp_path(ns).write_bytes(b"")
    assert read_stamp(ns).status is StampStatus.EMPTY
    stamp_path(ns).write_bytes(b" \n\t ")
    assert read_stamp(ns).status is StampStatus.EMPTY


def test_every_truncation_of_a_valid_stamp_is_partial_never_ok(ns: Path) -> None:
    data = stamp_bytes()
    end = data.rstrip()
    for cut in range(len(end)):
        result = parse_stamp(data[:cut])
        assert result.status in (StampStatus.EMPTY, StampStatus.GARBAGE), cut
        assert result.stamp is None
    assert parse_stamp(end).ok
    stamp_path(ns).write_bytes(data[: len(data) // 2])
    assert read_stamp(ns).status is StampStatus.GARBAGE


def test_oversized(ns: Path) -> None:
    data = stamp_bytes(make_stamp(command=["x" * MAX_STAMP_BYTES]))
    assert parse_stamp(data).status is StampStatus.OVERSIZED
    stamp_path(ns).write_bytes(data)
    assert read_stamp(ns).status is StampStatus.OVERSIZED
    with stamp_path(ns).open("wb") as f:  # a huge file is not read whole
        f.truncate(1 << 30)
    assert read_stamp(ns).status is StampStatus.OVERSIZED


def test_future_schema_is_reported_not_guessed(ns: Path) -> None:
    obj = make_stamp().to_json() | {"schema": SCHEMA + 1, "new_field": [1, 2]}
    stamp_path(ns).write_text(json.dumps(obj))
    result = read_stamp(ns)
    assert result.status is StampStatus.FUTURE_SCHEMA
    assert result.stamp is None
    assert result.raw is not None and result.raw["schema"] == SCHEMA + 1
    assert str(SCHEMA + 1) in result.detail


@pytest.mark.parametrize(
    "change",
    [
        {"schema": 0},
        {"schema": -1},
        {"schema": "1"},
        {"schema": True},
        {"pid": True},
        {"pid": 0},
        {"pid": -5},
        {"pid": 1.5},
        {"start_ticks": None},
        {"command": "pytest -x"},
        {"command": ["ok", 3]},
        {"heartbeat_interval": 0},
        {"heartbeat_interval": float("nan")},
        {"heartbeat_interval": float("inf")},
        {"heartbeat_at": float("nan")},
        {"started_at": float("-inf")},
        {"released_at": float("nan")},
        {"state": "zombie"},
        {"state": ["live"]},
        {"state": None},
        {"child_pid": "12"},
        {"lane": 5},
        {"uid": None},
    ],
)
def test_wrong_fields_are_garbage(change: dict[str, Any]) -> None:
    obj = make_stamp().to_json() | change
    result = parse_stamp(json.dumps(obj).encode())
    assert result.status is StampStatus.GARBAGE, change
    assert result.detail


@pytest.mark.parametrize("missing", ["pid", "state", "schema", "command", "boot_id", "lane"])
def test_missing_fields_are_garbage(missing: str) -> None:
    obj = make_stamp().to_json()
    del obj[missing]
    assert parse_stamp(json.dumps(obj).encode()).status is StampStatus.GARBAGE


def test_not_json_shapes() -> None:
    for data in [b"[]", b"42", b'"stamp"', b"null", b"{", b"\xff\xfe\x00", b"{}", b"NaN"]:
        result = parse_stamp(data)
        assert result.status is StampStatus.GARBAGE, data
    deep = b"[" * 200_000 + b"]" * 200_000
    assert parse_stamp(deep).status in (StampStatus.GARBAGE, StampStatus.OVERSIZED)
    nested = b"[" * 50_000
    assert parse_stamp(nested).status is StampStatus.GARBAGE


def test_unknown_extra_fields_are_kept_out_but_tolerated() -> None:
    obj = make_stamp().to_json() | {"added_in_a_patch": {"x": 1}}
    result = parse_stamp(json.dumps(obj).encode())
    assert result.ok and result.stamp == make_stamp()


def test_a_symlinked_stamp_is_never_followed(ns: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(stamp_bytes())
    stamp_path(ns).symlink_to(elsewhere)
    result = read_stamp(ns)
    assert result.status is StampStatus.SYMLINK
    assert result.stamp is None


@pytest.mark.unprivileged
@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "device"])
def test_a_stamp_that_is_not_a_regular_file_is_named_for_what_it_is(ns: Path, kind: str) -> None:
    plant_special(stamp_path(ns), kind)  # a reader must not block on it, nor call it a symlink
    for read in (read_stamp(ns), read_stamp_at(str(ns))):
        assert read.status == kind and read.stamp is None, read
        assert "owner.json is a" in read.detail and "not a file" in read.detail
    verdict = classify(read_stamp(ns), None, 0.0, host="h", boot_id="b")
    assert verdict.state is NsState.ORPHAN and "not a file" in verdict.reason


def test_a_symlinked_meta_folder_is_never_followed(tmp_path: Path) -> None:
    real = tmp_path / "real-meta"
    real.mkdir()
    (real / "owner.json").write_bytes(stamp_bytes())
    ns = tmp_path / "ns"
    ns.mkdir()
    (ns / ".lanewatch").symlink_to(real)
    assert read_stamp(ns).status is StampStatus.SYMLINK


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable(ns: Path) -> None:
    stamp_path(ns).write_bytes(stamp_bytes())
    stamp_path(ns).chmod(0)
    assert read_stamp(ns).status is StampStatus.UNREADABLE


def test_write_replaces_a_planted_symlink_instead_of_writing_through_it(
    ns: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    stamp_path(ns).symlink_to(victim)
    write_stamp(ns, make_stamp())
    assert victim.read_text() == "precious\n"
    assert not stamp_path(ns).is_symlink()
    assert read_stamp(ns).ok


def test_touch_never_follows_a_symlink(ns: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("x")
    os.utime(victim, (NOW, NOW))
    stamp_path(ns).symlink_to(victim)
    touch_heartbeat(ns, NOW + 100)
    assert os.stat(victim).st_mtime == NOW


# -- hypothesis: the parser never raises and always answers with a status -------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=8,
)
FIELD_NAMES = sorted(make_stamp().to_json())


@settings(max_examples=300, database=None, deadline=None)
@given(st.binary(max_size=2048))
def test_parse_never_raises_on_bytes(data: bytes) -> None:
    assert_typed(parse_stamp(data))


@settings(max_examples=300, database=None, deadline=None)
@given(json_values)
def test_parse_never_raises_on_any_json(value: object) -> None:
    data = json.dumps(value).encode("utf-8", "surrogatepass")
    assert_typed(parse_stamp(data))


@settings(max_examples=200, database=None, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELD_NAMES), json_values, max_size=4))
def test_parse_never_raises_on_mutated_stamps(changes: dict[str, object]) -> None:
    obj = make_stamp().to_json() | changes
    data = json.dumps(obj).encode("utf-8", "surrogatepass")
    result = parse_stamp(data)
    assert_typed(result)
    if result.ok:
        assert result.stamp is not None
        assert result.stamp.to_json() == json.loads(data) | {
            k: v for k, v in result.stamp.to_json().items() if k not in obj
        }


@settings(
    max_examples=200,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # each example rewrites the file
)
@given(st.binary(max_size=512))
def test_read_never_raises_on_files(ns: Path, data: bytes) -> None:
    stamp_path(ns).write_bytes(data)
    assert_typed(read_stamp(ns))
