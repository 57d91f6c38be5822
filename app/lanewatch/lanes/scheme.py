"""The scheme version: which layout of roots, namespaces, stamps and receipts a host keeps.

A stamp's or receipt's `schema` says how one file is written; the scheme says how a whole host
keeps its lanes (where namespaces live, what binds them to a checkout, what a gate reads). Hosts
that share work must run the same scheme: the many-host view flags one that differs, and every
stamp, receipt, `id --json` and the metrics carry it. Raise it only when a host on the old scheme
would misjudge a lane of the new one.
"""

from __future__ import annotations

SCHEME_VERSION = 1
LEGACY_SCHEME = 1  # the scheme of a stamp or receipt that names none (see `stated`)


def stated(scheme: int | None) -> int:
    """The scheme a stamp or receipt was written under. None (the file has no `scheme`): it
    was written by a lanewatch from before the field, which kept scheme 1, the only one there
    was. Any other value is kept as it is and shown; it never decides a verdict."""
    return LEGACY_SCHEME if scheme is None else scheme
