"""Namespace names: deterministic, injective, reversible, and never a path outside the root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.errors import BadLaneName
from lanewatch.lanes.checkout import checkout_id_for
from lanewatch.lanes.lane import Lane
from lanewatch.lanes.names import (
    MAX_ENCODED,
    decode_lane,
    encode_lane,
    namespace_name,
    split_namespace_name,
)

CID = checkout_id_for("/home/someone/src/repo")
SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")

# Every code point, lone surrogates included: what argv and os.environ can hand us.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


def encode_or_none(lane: str) -> str | None:
    try:
        return encode_lane(lane)
    except BadLaneName:
        return None


def assert_safe_component(name: str) -> None:
    assert name not in ("", ".", "..")
    assert set(name) <= SAFE, name
    assert len(name.encode()) <= 255


@settings(max_examples=400, database=None, deadline=None)
@given(any_text)
def test_encode_is_reversible_or_refused(lane: str) -> None:
    encoded = encode_or_none(lane)
    if encoded is None:
        return
    assert set(encoded) <= SAFE
    assert_safe_component(namespace_name(CID, lane))
    assert decode_lane(encoded) == lane
    assert split_namespace_name(namespace_name(CID, lane)) == (CID, lane)


@settings(max_examples=400, database=None, deadline=None)
@given(any_text, any_text)
def test_distinct_names_never_share_an_encoding(a: str, b: str) -> None:
    ea, eb = encode_or_none(a), encode_or_none(b)
    if a != b and ea is not None and eb is not None:
        assert ea != eb


@settings(max_examples=200, database=None, deadline=None)
@given(st.text(max_size=40).filter(bool).filter(lambda s: "\x00" not in s))
def test_ordinary_text_is_always_accepted(lane: str) -> None:
    if len(lane.encode()) * 3 <= MAX_ENCODED:
        assert decode_lane(encode_lane(lane)) == lane


def test_sanitise_alike_names_stay_distinct() -> None:
    names = ["a/b", "a_b", "a b", "a~2Fb", "a-b", "a.b", "A/B"]
    encoded = [encode_lane(n) for n in names]
    assert len(set(encoded)) == len(names)
    assert encode_lane("a/b") == "a~2Fb"
    assert encode_lane("a~2Fb") == "a~7E2Fb"


@pytest.mark.parametrize(
    ("lane", "why"),
    [("", "empty"), ("a\x00b", "NUL"), ("x" * (MAX_ENCODED + 1), "too long")],
)
def test_refused_names_say_why(lane: str, why: str) -> None:
    with pytest.raises(BadLaneName, match=why):
        encode_lane(lane)


def test_multibyte_names_are_limited_by_their_encoded_length() -> None:
    fits = "é" * (MAX_ENCODED // 6)  # each é is two bytes, six characters once encoded
    assert decode_lane(encode_lane(fits)) == fits
    with pytest.raises(BadLaneName, match="too long"):
        encode_lane(fits + "é")


@pytest.mark.parametrize(
    "lane",
    [".", "..", "...", "/", "../../etc", "a/../../b", "~", "é", "日本", "\n", "-", "CON", "\udcff"],
)
def test_hostile_names_stay_inside_the_root(root: Path, lane: str) -> None:
    name = namespace_name(CID, lane)
    assert_safe_component(name)
    target = root / name
    assert os.path.realpath(target.parent) == os.path.realpath(root)
    target.mkdir()  # a real, single folder directly under the root
    assert [p.name for p in root.iterdir()] == [name]
    assert split_namespace_name(name) == (CID, lane)


def test_surrogate_escaped_bytes_do_not_alias_real_text() -> None:
    # "\udcc3\udca9" is what surrogateescape would make of the bytes C3 A9, which are "é":
    # that spelling never comes out of a real decode, and must not share é's folder.
    assert encode_lane("\udcff") == "~FF"  # an undecodable byte from argv: kept, distinct
    assert encode_lane("\udcff") != encode_lane("ÿ")
    aliased = encode_or_none("\udcc3\udca9")
    assert aliased is None or aliased != encode_lane("é")
    with pytest.raises(BadLaneName, match="surrogate"):
        encode_lane("\ud800")  # not an escaped byte at all: no file name can hold it


def test_decode_refuses_names_it_did_not_make() -> None:
    for foreign in ["", "~41", "a~7e", "~", "~4", "a/b", "a b", "é", "~ZZ"]:
        with pytest.raises(ValueError):
            decode_lane(foreign)
        assert split_namespace_name(f"{CID}.{foreign}") is None
    assert split_namespace_name(".lanewatch-root") is None
    assert split_namespace_name("Not-A-Checkout.lane") is None
    assert split_namespace_name(f"{CID}") is None


def test_namespace_name_refuses_a_bad_checkout_id() -> None:
    for bad in ["", "..", "a/b-0123456789ab", "x-0123", "a.b-0123456789ab"]:
        with pytest.raises(BadLaneName):
            namespace_name(bad, "lane")


def test_sanitise_alike_lanes_claim_distinct_folders(repo: Path, root: Path) -> None:
    names = ["a/b", "a_b", "a b", ".", "..", "é", "\udcff"]
    lanes = [Lane(n, root=root, checkout=repo, command=["test"]) for n in names]
    try:
        for lane in lanes:
            lane.claim()
        folders = {lane.namespace for lane in lanes}
        assert len(folders) == len(names)
        for lane in lanes:
            assert lane.namespace.parent == root.resolve()
            assert lane.stamp.lane == lane.name
            assert (lane.namespace / ".lanewatch" / "owner.json").is_file()
        assert sorted(p.name for p in root.iterdir() if p.name != ".lanewatch-root") == sorted(
            f.name for f in folders
        )
    finally:
        for lane in lanes:
            lane.release()
