"""Receipt seals: an HMAC-SHA256 over a receipt's fields with a key only this user can read.

The key is 32 random bytes in `<state dir>/receipt-seal.key`, mode 0600, made on first use by
the writer (never by a gate) and never replaced: a key file that is not a regular file of ours
with mode 0600 and 32 bytes is refused with a reason, so receipts it sealed stay checkable.

What a seal stops: hand edits of a receipt (outcome and exit code together, checkout fields,
an old receipt's HEAD), and receipts copied from another user or machine. What it does not:
a process of the same user that can read the key can seal anything, and so can root; it is not
a signature anyone else can verify. Blind spot: a state folder writable by others lets them
swap the file for one of ours they can predict (a hard link); we check the file, not the folder.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanewatch.errors import LanewatchError
from lanewatch.lanes.fsutil import UnsafePath, fsync_dir, read_nofollow_in
from lanewatch.lanes.roots import state_dir

FIELD = "seal"  # the receipt field that holds the seal; left out of what it seals
ALG = "hmac-sha256"
KEY_FILE = "receipt-seal.key"
KEY_BYTES = 32
_DOMAIN = b"lanewatch receipt v1\0"  # so this key's MACs never mean anything else
_MAC_RE = re.compile(r"[0-9a-f]{64}")
NOT_MATCHING = (
    "the receipt's seal does not match: it was changed after `prove` wrote it, "
    "or written with another key"
)


class BadSealKey(LanewatchError):
    """The seal key cannot be trusted or read; never silently replaced."""


class NoSealKey(BadSealKey):
    """No seal key exists yet (a writer makes one; a gate never does)."""


@dataclass(frozen=True, slots=True)
class SealKey:
    secret: bytes = field(repr=False)
    path: Path

    @property
    def key_id(self) -> str:
        """A short fingerprint that names the key without giving it away."""
        return hashlib.sha256(b"lanewatch seal key id\0" + self.secret).hexdigest()[:16]


def key_path(directory: Path | None = None) -> Path:
    return (directory or state_dir()) / KEY_FILE


def load_key(directory: Path | None = None) -> SealKey:
    """This user's seal key. NoSealKey if there is none; BadSealKey if it cannot be trusted."""
    path = key_path(directory)
    try:
        # the folder may be reached through a symlink (a moved ~/.local/state); the key may not
        data, st = read_nofollow_in(Path(os.path.realpath(path.parent)), path.name, KEY_BYTES)
    except FileNotFoundError as exc:
        raise NoSealKey(f"no seal key at {path}; `lanewatch prove` makes one") from exc
    except UnsafePath as exc:
        raise BadSealKey(f"the seal key {path} is not a regular file") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise BadSealKey(f"the seal key {path} is a symlink") from exc
        raise BadSealKey(f"cannot read the seal key {path}: {exc.strerror}") from exc
    if st.st_uid != os.geteuid():
        raise BadSealKey(
            f"the seal key {path} belongs to uid {st.st_uid}, not to this user ({os.geteuid()})"
        )
    if st.st_mode & 0o077:
        raise BadSealKey(
            f"the seal key {path} is readable or writable by others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}), so others may forge receipts with it: "
            f"`chmod 600` it if no one else could have read it, else remove it and prove again"
        )
    if len(data) != KEY_BYTES:
        raise BadSealKey(f"the seal key {path} holds {len(data)} bytes, not {KEY_BYTES}")
    return SealKey(data, path)


def ensure_key(directory: Path | None = None) -> SealKey:
    """This user's seal key, made now if there is none (a bad one raises, never replaced)."""
    try:
        return load_key(directory)
    except NoSealKey:
        pass
    _create(key_path(directory))
    return load_key(directory)


def _create(path: Path) -> None:
    """Write a new key to a private temp file (O_EXCL, 0600) and link it into place: the key
    appears whole or not at all, and a key another process made first is kept."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=True) as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another writer won the race: use theirs
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def canonical(fields: Mapping[str, Any]) -> bytes:
    """The bytes a seal covers: every field but the seal, sorted keys, compact, ASCII."""
    body = {name: value for name, value in fields.items() if name != FIELD}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text.encode("ascii")


def _mac(fields: Mapping[str, Any], key: SealKey) -> str:
    return hmac.new(key.secret, _DOMAIN + canonical(fields), hashlib.sha256).hexdigest()


def sealed(fields: Mapping[str, Any], key: SealKey) -> dict[str, Any]:
    """`fields` with their seal added under FIELD."""
    seal = {"alg": ALG, "key_id": key.key_id, "mac": _mac(fields, key)}
    return {**{k: v for k, v in fields.items() if k != FIELD}, FIELD: seal}


def seal_problem(fields: Mapping[str, Any], key: SealKey) -> str | None:
    """Why `fields` (a receipt as read) do not carry `key`'s seal over them; None if they do."""
    seal = fields.get(FIELD)
    if seal is None:
        return "the receipt has no seal: `lanewatch prove` did not write it (or an older one did)"
    if not isinstance(seal, dict) or seal.get("alg") != ALG:
        return f"the receipt's seal is not an {ALG} seal"
    mac = seal.get("mac")
    if not isinstance(mac, str) or not _MAC_RE.fullmatch(mac):
        return "the receipt's seal has no well-formed mac"
    try:
        expected = _mac(fields, key)
    except (TypeError, ValueError):  # a value JSON cannot say again: not what we wrote
        return NOT_MATCHING
    if not hmac.compare_digest(expected, mac):
        named = seal.get("key_id")
        if isinstance(named, str) and len(named) <= 64 and named != key.key_id:
            return f"{NOT_MATCHING} (it names key {named!r}; this user's is {key.key_id!r})"
        return NOT_MATCHING
    return None
