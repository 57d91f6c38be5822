"""The many-host pieces that need no host: a far namespace's JSON back into the same view (keys
prefixed), and the flags that name a half-migrated host with its fix."""

from __future__ import annotations

from lanewatch.cli.lanes.status_cmd import incident_json, namespace_json
from lanewatch.hosts import flags
from lanewatch.hosts.config import Host
from lanewatch.hosts.farviews import incident, remote_key, split_key, view
from lanewatch.lanes.scheme import SCHEME_VERSION
from lanewatch.model.views import Incident, LaneMember, NamespaceView, NsState

FAR = Host("far", "me@far.example")


def a_view() -> NamespaceView:
    return NamespaceView(
        key="/r/c.lane", root="/r", name="c.lane", lane="lane", checkout_id="c",
        checkout_path="/src", host="farhost", pid=42, user="me", command=("sleep", "9"),
        state=NsState.LIVE, reason="pid 42 alive", grade="known", started_at=1.0,
        heartbeat_at=2.0, heartbeat_interval=5.0, released_at=None, exit_code=None,
        last_write=3.0, files=4, bytes=5, write_rate=(1, 2), stamp_status="ok",
        incident_ids=("shared-file-1",), uid=1000, fence="bwrap",
        members=(LaneMember(7, 8, "sleep 9", 1.5, "descendant", 1000),),
    )  # fmt: skip


def shared(path: str, acknowledged: bool = False) -> Incident:
    return Incident(
        id=f"shared-file-{path}", kind="shared-file", victim=None, intruder={"lane": "a"},
        first_seen=1.0, last_seen=2.0, count=2, grade="known", evidence=(),
        acknowledged=acknowledged, path=path,
    )  # fmt: skip


def test_a_far_view_comes_back_whole_under_its_host() -> None:
    v = a_view()
    back = view("far", {**namespace_json(v, 10.0), "write_rate": [1, 2]})
    assert back.key == "far:/r/c.lane" and back.root == "far:/r" and back.host == "far"
    assert split_key(back.key) == ("far", "/r/c.lane") and split_key(v.key) is None
    assert back.incident_ids == ("far:shared-file-1",)
    expected = {"key", "root", "host", "incident_ids"}
    for name in NamespaceView.__dataclass_fields__:
        if name not in expected:
            assert getattr(back, name) == getattr(v, name), name
    # A state this side does not know is "could not tell", never dead.
    assert view("far", {"key": "/x", "state": "from-the-future"}).state is NsState.UNKNOWN


def test_a_far_incident_keeps_its_facts() -> None:
    i = incident("far", incident_json(shared("/tmp/x"), evidence=True))
    assert i.id == remote_key("far", "shared-file-/tmp/x") and i.path == "/tmp/x"
    assert i.summary.startswith("[far]") and i.count == 2 and not i.acknowledged


def test_flags_name_the_fix() -> None:
    missing = flags.missing(FAR, "command not found")
    assert missing.fix == "ssh me@far.example 'python3 -m pip install --user lanewatch'"
    assert flags.scheme(FAR, {"scheme": SCHEME_VERSION}) is None
    older = flags.scheme(FAR, {"scheme": SCHEME_VERSION - 1, "version": "0.0.1"})
    assert older is not None and older.fix.startswith("ssh me@far.example")
    newer = flags.scheme(FAR, {"scheme": SCHEME_VERSION + 1})
    assert newer is not None and newer.fix == "python3 -m pip install -U lanewatch"  # here
    assert flags.unbound([shared("/tmp/a", acknowledged=True)]) is None
    found = flags.unbound([shared("/tmp/a"), shared("/tmp/b")])
    assert found is not None and found.kind == flags.UNBOUND
    assert "/tmp/a, /tmp/b" in found.detail and "lanewatch run --lane" in found.fix
