"""Sizes as people read them, one way for the dashboard and the CLI alike. Pure."""

from __future__ import annotations


def size(count: int | None) -> str:
    """Bytes in decimal units: `512B`, `1.2kB`, `34MB`; `…` when not counted yet."""
    if count is None:
        return "…"
    value = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            if unit == "B":
                return f"{int(value)}B"
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
        value /= 1000
    raise AssertionError("unreachable")
