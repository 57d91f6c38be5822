"""The scheme version (lanes/scheme.py) in every stamp, receipt and `id --json`: written by this
lanewatch, read as 1 from an older one, and a different value kept visible, never misjudged."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lanewatch import Lane, check_gate, write_receipt
from lanewatch.lanes.scheme import SCHEME_VERSION, stated
from lanewatch.lanes.stamp import StampStatus, parse_stamp, read_stamp, stamp_path
from lanewatch.proof.receipts import ReceiptStatus, parse_receipt, read_receipt
from lanewatch.proof.seal import ensure_key, sealed
from tests.conftest import lanewatch
from tests.kits.contractkit import parsed

pytestmark = pytest.mark.unprivileged  # a user journey: also run as a normal user


def _status(root: Path, cwd: Path) -> dict[str, object]:
    done = lanewatch("status", "--root", str(root), "--json", cwd=cwd)
    assert not done.stderr.strip(), done.stderr  # its exit says what it saw (4: a collision)
    return parsed("status", done.stdout)


def _rewrite(path: Path, **changes: object) -> None:
    """Rewrite a stamp's fields as another (or an older) lanewatch would have written them."""
    data = json.loads(path.read_text())
    for name, value in changes.items():
        if value is None:
            data.pop(name, None)
        else:
            data[name] = value
    path.write_text(json.dumps(data))


def test_id_json_carries_the_scheme(repo: Path) -> None:
    done = lanewatch("id", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert parsed("id", done.stdout)["scheme"] == SCHEME_VERSION
    text = lanewatch("id", cwd=repo).stdout
    assert any(line.split() == ["scheme", str(SCHEME_VERSION)] for line in text.splitlines())


def test_a_claimed_lane_stamps_its_scheme(repo: Path, root: Path) -> None:
    with Lane("agent-1", root=root, checkout=repo) as lane:
        on_disk = json.loads(stamp_path(lane.target.namespace).read_text())
        assert on_disk["scheme"] == SCHEME_VERSION
        assert read_stamp(lane.target.namespace).stamp.scheme == SCHEME_VERSION  # type: ignore[union-attr]
        ns = _status(root, repo)["namespaces"][0]  # type: ignore[index]
        assert ns["scheme"] == SCHEME_VERSION and ns["state"] == "live"


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (None, 1),  # an older lanewatch wrote no scheme: it kept scheme 1, the only one there was
        (SCHEME_VERSION + 6, SCHEME_VERSION + 6),  # another host's scheme: kept and shown
    ],
)
def test_another_scheme_is_shown_and_the_lane_judged_as_before(
    repo: Path, root: Path, written: object, read: int | None
) -> None:
    with Lane("agent-1", root=root, checkout=repo) as lane:
        ns_path = lane.target.namespace
        _rewrite(stamp_path(ns_path), scheme=written)
        result = read_stamp(ns_path)
        assert result.ok and result.stamp is not None
        assert stated(result.stamp.scheme) == read
        ns = _status(root, repo)["namespaces"][0]  # type: ignore[index]
        # The owner (this process) is alive: live, whatever scheme its stamp names.
        assert (ns["state"], ns["stamp_status"], ns["scheme"]) == ("live", "ok", read)


def test_a_scheme_that_is_not_an_int_is_a_wrong_field_as_any_other(repo: Path, root: Path) -> None:
    with Lane("agent-1", root=root, checkout=repo) as lane:
        data = json.loads(stamp_path(lane.target.namespace).read_text())
    assert parse_stamp(json.dumps({**data, "scheme": "two"}).encode()).status is StampStatus.GARBAGE
    assert parse_stamp(json.dumps({**data, "scheme": True}).encode()).status is StampStatus.GARBAGE


def test_a_receipt_carries_the_scheme_under_its_seal(repo: Path) -> None:
    written = write_receipt(
        "tests", exit_code=0, command=["pytest"], started_at=time.time(), checkout=repo
    )
    data = json.loads(written.path.read_text())
    assert data["scheme"] == SCHEME_VERSION
    assert read_receipt(written.path.parents[1], "tests").receipt.scheme == SCHEME_VERSION  # type: ignore[union-attr]
    assert check_gate("tests", checkout=repo).ok
    odd = json.dumps({**data, "scheme": "1"}).encode()
    assert parse_receipt(odd).status is ReceiptStatus.GARBAGE
    # The seal covers it: a hand-edited scheme is a changed receipt, and the gate says so.
    written.path.write_text(json.dumps({**data, "scheme": SCHEME_VERSION + 1}))
    assert not check_gate("tests", checkout=repo).ok


def test_an_older_receipt_without_a_scheme_reads_as_scheme_one_and_still_passes(
    repo: Path,
) -> None:
    written = write_receipt(
        "tests", exit_code=0, command=["pytest"], started_at=time.time(), checkout=repo
    )
    fields = json.loads(written.path.read_text())
    del fields["scheme"], fields["seal"]
    older = sealed(fields, ensure_key())  # as a lanewatch from before the field sealed it
    written.path.write_text(json.dumps(older))
    read = parse_receipt(written.path.read_bytes())
    assert read.receipt is not None and stated(read.receipt.scheme) == 1
    assert check_gate("tests", checkout=repo).ok
