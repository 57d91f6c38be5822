"""The JSON contract in tests: every `--json` output is checked against the JSON Schema the
wheel ships for it (lanewatch/schemas/<name>.json, read through the installed package)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from lanewatch.cli.reports import schema_id, schema_text
from tests.conftest import lanewatch


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads(schema_text(name))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def valid(name: str, data: Any) -> dict[str, Any]:
    """`data`, after checking it is report `name` and fits its schema (every error listed)."""
    errors = sorted(validator(name).iter_errors(data), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors)
    assert data["schema"] == schema_id(name)
    return data  # type: ignore[no-any-return]


def parsed(name: str, stdout: str) -> dict[str, Any]:
    return valid(name, json.loads(stdout))


def report(name: str, *args: str, cwd: Path, code: int = 0) -> dict[str, Any]:
    """Report `name` of the real CLI run with `--json`, after checking its exit code."""
    done = lanewatch(*args, "--json", cwd=cwd, timeout=60)
    # A plain string, not a tuple: pytest prints it whole (a refusal's reason is at its end).
    assert done.returncode == code, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return parsed(name, done.stdout)
