"""The contracts of `model/engine_api.py` hold for the classes that implement them: the same
methods, the same parameters (a Protocol is only checked by a type checker, which CI does not
run; this is the part a reader relies on), and `actions.routed` sends a far key to its host."""

from __future__ import annotations

import inspect
from dataclasses import replace

import pytest

from lanewatch.actions import routed
from lanewatch.engine.engine import Engine
from lanewatch.engine.process import EngineProcess
from lanewatch.errors import LanewatchError
from lanewatch.hosts.actions import FarActions, RemoteResult
from lanewatch.hosts.config import Host
from lanewatch.hosts.many import ManyHosts
from lanewatch.hosts.stream import HostStream
from lanewatch.model import engine_api
from lanewatch.model.views import NsState
from tests.fast.test_hosts_flags import a_view


def _members(protocol: type) -> dict[str, object]:
    return {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_") and (callable(value) or isinstance(value, property))
    }


def _params(function: object) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("protocol", "cls"),
    [
        (engine_api.EngineApi, Engine),
        (engine_api.EngineApi, EngineProcess),
        (engine_api.EngineApi, ManyHosts),
        (engine_api.Routes, ManyHosts),
        (engine_api.FarHost, FarActions),
    ],
)
def test_each_implementation_has_the_protocols_methods(protocol: type, cls: type) -> None:
    members = _members(protocol)
    assert members
    for name, wanted in members.items():
        have = getattr(cls, name, None)
        assert have is not None, f"{cls.__name__} lacks {name}"
        if isinstance(wanted, property):
            assert isinstance(have, property), f"{cls.__name__}.{name} is not a property"
        else:
            assert _params(have) == _params(wanted), f"{cls.__name__}.{name}"


def test_a_far_result_has_ok_and_message() -> None:
    fields = set(RemoteResult.__dataclass_fields__)
    assert set(_members(engine_api.Result)) <= fields


def test_many_hosts_route_far_keys_to_their_host_and_refuse_unknown_hosts() -> None:
    far = Host("far", "far")
    many = ManyHosts(Engine([]), [HostStream(far)])
    assert many.far("/roots/r1/ns") is None
    host, key = many.far("far:/roots/r1/ns") or (None, "")
    assert isinstance(host, FarActions) and host.name == "far" and key == "/roots/r1/ns"
    assert many.far("far:trash-id") is not None  # a trash entry's id, not a path
    with pytest.raises(LanewatchError, match="no host gone"):
        many.far("gone:/roots/r1/ns")


def test_an_unknown_hosts_kill_is_a_failed_outcome_not_an_error() -> None:
    many = ManyHosts(Engine([]), [])
    ns = replace(a_view(), key="gone:/roots/r1/ns", root="gone:/roots/r1", state=NsState.LIVE)
    outcome = routed.kill(ns, "ns", many)
    assert (outcome.verb, outcome.ok) == ("kill", False)
    assert "no host gone" in outcome.message
