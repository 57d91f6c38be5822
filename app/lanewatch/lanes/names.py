"""Namespace names: deterministic, injective, never a path outside the root.

A namespace is named `<checkout id>.<encoded lane>`. The lane name is encoded, not sanitised:
bytes outside [A-Za-z0-9_.-] become `~XX` (UTF-8, upper-case hex), `~` included, so `a/b`,
`a_b` and `a b` stay three different folders and the encoding can be reversed for display.
The checkout id holds no `.`, so the first `.` splits the two parts, and a name never equals
`.` or `..`.

A lane name is text as the OS hands it over (argv, environment): undecodable bytes arrive as
surrogate escapes (`\\udcff`) and are encoded as the bytes they stand for. A string whose
surrogates do not stand for such bytes (`\\ud800`, or `\\udcc3\\udca9`, which would be the bytes
of `é`) cannot travel through argv or the environment unchanged, so it is refused: accepting it
would give two names one folder.
"""

from __future__ import annotations

import functools
import re

from lanewatch.errors import BadLaneName

_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
MAX_ENCODED = 150  # leaves room for the checkout id within a 255-byte file name


# Compiled on first use, not at import (docs/performance.md, `run_start`).
@functools.cache
def _encoded_re() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9_.\-]|~[0-9A-F]{2}")


@functools.cache
def _checkout_id_re() -> re.Pattern[str]:
    return re.compile(r"[a-z0-9][a-z0-9-]*-[0-9a-f]{12}")


def encode_lane(lane: str) -> str:
    if not lane:
        raise BadLaneName("a lane name cannot be empty")
    if "\x00" in lane:
        raise BadLaneName("a lane name cannot contain a NUL byte")
    try:
        raw = lane.encode("utf-8", "surrogateescape")
        canonical = raw.decode("utf-8", "surrogateescape") == lane
    except UnicodeError:
        canonical = False
    if not canonical:
        raise BadLaneName(
            f"lane name {lane!r} holds surrogate characters that do not stand for raw bytes"
        )
    out = "".join(chr(b) if b in _KEEP else f"~{b:02X}" for b in raw)
    if len(out) > MAX_ENCODED:
        raise BadLaneName(
            f"lane name too long: {len(out)} characters once encoded, the limit is "
            f"{MAX_ENCODED} (A-Z a-z 0-9 _ . - count one each, every other byte three)"
        )
    return out


def decode_lane(encoded: str) -> str:
    """Inverse of encode_lane; raises ValueError on a name it did not make.

    Only the canonical spelling is accepted (`~41` is not `A`), so a foreign folder can never
    pass for a lane's namespace.
    """
    if not encoded or "".join(_encoded_re().findall(encoded)) != encoded:
        raise ValueError(f"not an encoded lane name: {encoded!r}")
    raw = bytearray()
    i = 0
    while i < len(encoded):
        if encoded[i] == "~":
            raw.append(int(encoded[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(encoded[i]))
            i += 1
    lane = raw.decode("utf-8", "surrogateescape")
    try:
        if encode_lane(lane) == encoded:
            return lane
    except BadLaneName:
        pass
    raise ValueError(f"not the canonical encoding of a lane name: {encoded!r}")


def namespace_name(checkout_id: str, lane: str) -> str:
    if not _checkout_id_re().fullmatch(checkout_id):
        raise BadLaneName(f"not a checkout id: {checkout_id!r}")
    return f"{checkout_id}.{encode_lane(lane)}"


def split_namespace_name(name: str) -> tuple[str, str] | None:
    """(checkout id, raw lane) for a name this scheme made, else None (a foreign folder)."""
    checkout_id, sep, encoded = name.partition(".")
    if not sep or not _checkout_id_re().fullmatch(checkout_id):
        return None
    try:
        return checkout_id, decode_lane(encoded)
    except ValueError:
        return None
