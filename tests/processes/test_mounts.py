"""mountinfo parsing (real content and escapes), a real bind mount inside a namespace (as root),
and the symlink-proof containment helpers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.actions.mounts import (
    is_direct_child,
    is_within,
    mounts_inside,
    parse_mountinfo,
    read_mountinfo,
    unescape,
)
from tests.kits.actionkit import bind_mounted

SAMPLE = (
    b"22 1 0:21 / /proc rw,relatime shared:5 - proc proc rw\n"
    b"36 35 98:0 /mnt1 /mnt/with\\040space\\011tab rw,noatime master:1 shared:2 - ext3 "
    b"/dev/root rw,errors=continue\n"
    b"37 35 98:0 /src /srv/a\\134b rw - ext4 /dev/vda rw\n"
    b"38 35 98:0 / /srv/ab rw - ext4 /dev/vdb rw\n"
    b"39 35 98:0 / /srv/nl\\012x rw - tmpfs none rw\n"
    b"garbage line\n"
)


def test_unescape_octal() -> None:
    assert unescape(b"/a\\040b\\011c\\012d\\134e") == "/a b\tc\nd\\e"
    assert unescape(b"/plain") == "/plain"
    assert unescape(b"/x\\377") == os.fsdecode(b"/x\xff")  # not UTF-8: kept as the fs encoding


def test_parse_sample_with_optional_fields_and_escapes() -> None:
    entries = parse_mountinfo(SAMPLE)
    assert len(entries) == 5  # the garbage line is skipped
    spaced = entries[1]
    assert spaced.mount_point == "/mnt/with space\ttab"
    assert spaced.root == "/mnt1"
    assert spaced.optional == ("master:1", "shared:2")
    assert (spaced.fstype, spaced.source, spaced.super_options) == (
        "ext3",
        "/dev/root",
        "rw,errors=continue",
    )
    assert entries[2].mount_point == "/srv/a\\b"
    assert entries[4].mount_point == "/srv/nl\nx"
    assert entries[0].optional == ("shared:5",)


def test_parse_real_mountinfo() -> None:
    entries = read_mountinfo()
    points = {e.mount_point for e in entries}
    assert "/" in points
    assert "/proc" in points
    assert all(e.mount_point.startswith("/") for e in entries)
    assert len({e.mount_id for e in entries}) == len(entries)


def test_mounts_inside_is_by_folder_not_by_string() -> None:
    assert mounts_inside("/srv/a", mountinfo=SAMPLE) == []  # not /srv/ab, not /srv/a\b
    assert mounts_inside("/srv", mountinfo=SAMPLE) == ["/srv/a\\b", "/srv/ab", "/srv/nl\nx"]
    assert mounts_inside("/srv/ab", mountinfo=SAMPLE) == ["/srv/ab"]
    assert mounts_inside("/srv/ab", mountinfo=SAMPLE, include_self=False) == []
    assert mounts_inside("/mnt", mountinfo=SAMPLE) == ["/mnt/with space\ttab"]


def test_mounts_inside_real_root_and_nothing_in_tmp(tmp_path: Path) -> None:
    assert "/proc" in mounts_inside("/")
    assert mounts_inside(tmp_path) == []


@pytest.fixture
def bind_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder bind-mounted inside a namespace, on the same filesystem; unmounted after."""
    source = tmp_path / "elsewhere"
    source.mkdir()
    (source / "precious").write_text("not yours")
    ns = tmp_path / "root" / "name space"
    target = ns / "in ner"  # spaces: mountinfo escapes them as \040
    target.mkdir(parents=True)
    with bind_mounted(source, target):
        yield ns, target


@pytest.mark.privileged
def test_real_bind_mount_on_the_same_filesystem(bind_mount: tuple[Path, Path]) -> None:
    ns, target = bind_mount
    # Why mountinfo: the cheap checks miss a bind mount of the same filesystem.
    assert target.stat().st_dev == ns.stat().st_dev
    assert (target / "precious").exists()
    assert mounts_inside(ns) == [str(target)]
    assert mounts_inside(ns.parent) == [str(target)]
    assert mounts_inside(target) == [str(target)]
    assert mounts_inside(target, include_self=False) == []
    link = ns.parent / "link"
    link.symlink_to(ns)
    assert mounts_inside(link) == [str(target)]  # the kernel lists resolved paths


# --- is_within / is_direct_child ----------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "ns" / "sub").mkdir(parents=True)
    (root / "ns" / "file").write_text("x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "out").symlink_to(outside)  # a link in the root that leads out
    (root / "ns" / "sub" / "up").symlink_to(outside)
    (root / "ns" / "filelink").symlink_to(root / "ns" / "file")  # even a link that stays in
    (root / "ns2").mkdir()
    return root


def test_is_within(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_within(tree / "ns", tree)
    assert is_within(tree / "ns" / "file", tree)
    assert is_within(tree / "ns" / "sub", tree / "ns")
    assert is_within(str(tree / "ns" / "file"), str(tree))
    monkeypatch.chdir(tree)
    assert is_within("ns/./file", tree)


def test_is_within_never_through_a_symlink(tree: Path) -> None:
    assert not is_within(tree / "out" / "secret", tree)
    assert not is_within(tree / "out", tree)  # the link itself leads out
    assert not is_within(tree / "ns" / "sub" / "up" / "secret", tree)
    assert not is_within(tree / "ns" / "filelink", tree)


def test_is_within_refuses_what_it_cannot_check(tree: Path) -> None:
    assert not is_within(tree, tree)
    assert is_within(tree, tree, allow_self=True)
    assert not is_within(tree / "ns" / "missing", tree)
    assert not is_within(tree / "ns" / ".." / "ns2", tree)  # no climbing, even if it lands in
    assert not is_within(tree / ".." / "outside" / "secret", tree)
    assert not is_within(tree.parent / (tree.name + "-sibling"), tree)
    assert not is_within(tree.parent / "outside", tree)


def test_is_direct_child(tree: Path) -> None:
    assert is_direct_child(tree / "ns", tree)
    assert is_direct_child(tree / "ns2", tree)
    assert not is_direct_child(tree / "ns" / "sub", tree)  # too deep
    assert not is_direct_child(tree / "out", tree)  # a symlink to a folder
    assert not is_direct_child(tree / "ns" / "file", tree / "ns")  # not a folder
    assert not is_direct_child(tree, tree)
    assert not is_direct_child(tree / "missing", tree)
    assert not is_direct_child(tree / ".." / "outside", tree)
