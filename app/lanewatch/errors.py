"""Errors every layer can raise and every CLI command can turn into one clear line."""

from __future__ import annotations


class LanewatchError(Exception):
    """A refusal or failure with a message meant for a person."""


class Unbound(LanewatchError):
    """Nothing binds this path to a checkout: we refuse rather than fall back to a shared folder."""


class BadLaneName(LanewatchError):
    """A lane name that cannot be turned into a namespace."""


class FenceRefused(LanewatchError):
    """`--fence tmp`, and the lane's private /tmp cannot be built here: nothing was run."""


class ClaimRefused(LanewatchError):
    """Another owner holds the namespace's lock."""

    def __init__(self, message: str, owner: object | None = None) -> None:
        super().__init__(message)
        self.owner = owner


class BadValue(LanewatchError):
    """An option's value that cannot be one (a heartbeat of NaN): a usage error."""


class BadTarget(LanewatchError):
    """A TARGET that cannot name one namespace: several match, or it is not inside a root."""


class Missing(LanewatchError):
    """What was named does not exist: a namespace, lane, trash id, incident, recorded write."""


class Unsupported(LanewatchError):
    """This system lacks what the command needs (/proc, inotify: lanewatch watches Linux)."""
