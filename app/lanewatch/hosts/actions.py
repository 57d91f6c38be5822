"""Kill and clear a remote lane: the far lanewatch runs its own command, with its own checks
(`ssh HOST lanewatch kill KEY --yes --json`): the owner's identity is re-checked there at the
moment of the signal, as here. The person confirmed on this side (the dialog named the host), so
the far command gets `--yes`; another user's lane is never forced (no --allow-other-user)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lanewatch.hosts import link
from lanewatch.hosts.config import Host

KILL_TIMEOUT = 60.0  # the far kill waits for the lane to end (5 s by default) and ssh's setup


@dataclass(frozen=True, slots=True)
class RemoteResult:
    ok: bool
    message: str
    data: dict[str, Any] | None  # the far command's JSON, when it printed one
    code: int


def _result(host: Host, verb: str, answer: link.Answer, ok_when: Any) -> RemoteResult:
    data = answer.json()
    if answer.no_lanewatch:
        return RemoteResult(False, f"host {host.name}: lanewatch is not installed", None, 127)
    if data is None:
        why = answer.why()
        return RemoteResult(False, f"host {host.name}: {verb} failed: {why}", None, answer.code)
    message = f"host {host.name}: {data.get('message') or data.get('outcome') or verb}"
    return RemoteResult(bool(ok_when(data, answer.code)), message, data, answer.code)


def kill(
    host: Host,
    far_key: str,
    signal_name: str = "TERM",
    seen: tuple[int | None, float | None] | None = None,
) -> RemoteResult:
    """`seen`: the owner (pid, started_at) the row showed; the far kill refuses any other."""
    args = ["kill", far_key, "--signal", signal_name, "--yes", "--json"]
    if seen is not None and seen[0] is not None and seen[1] is not None:
        args += ["--if-owner", f"{seen[0]}:{seen[1]!r}"]
    answer = link.call(host, *args, timeout=KILL_TIMEOUT)
    # Success is the lane ended (as the local kill says it), exit 0 and "stopped"/"gone".
    return _result(host, "kill", answer, lambda d, code: code == 0)


def clear(host: Host, far_key: str) -> RemoteResult:
    answer = link.call(host, "clear", far_key, "--yes", "--json", timeout=KILL_TIMEOUT)
    return _result(host, "clear", answer, lambda d, code: code == 0)


def trash(host: Host) -> tuple[list[dict[str, Any]], str | None]:
    """The host's trash entries as `lanewatch trash --json` prints them there (docs/json.md),
    or why they could not be read."""
    answer = link.call(host, "trash", "--json")
    data = answer.json()
    if answer.no_lanewatch:
        return [], f"host {host.name}: lanewatch is not installed"
    if data is None or answer.code != 0:
        return [], f"host {host.name}: cannot list its trash: {answer.why()}"
    entries = data.get("entries") or ()
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)], None


def restore(host: Host, trash_id: str) -> RemoteResult:
    """`lanewatch restore ID --json` there: refused there when the name is taken again."""
    answer = link.call(host, "restore", trash_id, "--json", timeout=KILL_TIMEOUT)
    return _result(host, "restore", answer, lambda d, code: code == 0)


@dataclass(frozen=True, slots=True)
class FarActions:
    """One host's actions, as `actions.routed` asks for them (`model.engine_api.FarHost`)."""

    host: Host

    @property
    def name(self) -> str:
        return self.host.name

    def kill(
        self,
        key: str,
        signal_name: str = "TERM",
        seen: tuple[int | None, float | None] | None = None,
    ) -> RemoteResult:
        return kill(self.host, key, signal_name, seen)

    def clear(self, key: str) -> RemoteResult:
        return clear(self.host, key)

    def restore(self, trash_id: str) -> RemoteResult:
        return restore(self.host, trash_id)
