"""What `--json` prints: one object with a top-level `schema`, "lanewatch.<name>/<version>".

Each name has a JSON Schema shipped in the wheel (lanewatch/schemas/<name>.json) that the tests
validate real outputs against (tests/processes/test_json_contract.py). A field renamed keeps its old
name beside the new one for one release; docs/json.md lists both.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from lanewatch.cli.common import echo_json

VERSION = 1
# Every report, and what prints it.
NAMES = (
    "id",  # lanewatch id --json
    "roots",  # lanewatch roots list --json
    "status",  # lanewatch status --json
    "incidents",  # lanewatch incidents --json
    "incident",  # lanewatch incidents ID --json
    "history",  # lanewatch history PATH --json
    "trash",  # lanewatch trash --json
    "gate",  # lanewatch gate STEP --json
    "drill",  # lanewatch drill --json
    "audit",  # lanewatch audit --json
    "kill",  # lanewatch kill TARGET --json
    "clear",  # lanewatch clear TARGET... --json
    "restore",  # lanewatch restore ID --json
    "purge",  # lanewatch purge --json
    "reap",  # lanewatch reap [--dry-run] --json: one pass of the reaper
    "record",  # lanewatch record --json: every line
    "hello",  # lanewatch hello --json: the many-host handshake
    "files",  # lanewatch files TARGET --json: one namespace's files (a far files view)
    "events",  # lanewatch events [--follow]: every line
    "ports",  # lanewatch ports [PORT] --json: leases and listeners
    "doctor",  # lanewatch doctor --json: what a lane gets here
)


def schema_id(name: str) -> str:
    return f"lanewatch.{name}/{VERSION}"


def with_schema(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` with `schema` first (sort_keys puts it where it falls; the key is what counts)."""
    return {"schema": schema_id(name), **{k: v for k, v in data.items() if k != "schema"}}


def report(name: str, data: dict[str, Any]) -> None:
    echo_json(with_schema(name, data))


def schema_text(name: str) -> str:
    """The shipped JSON Schema of report `name`."""
    return resources.files("lanewatch").joinpath("schemas", f"{name}.json").read_text()
