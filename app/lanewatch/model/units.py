"""Sizes and checkouts as people read them, one way for the dashboard and the CLI alike. Pure."""

from __future__ import annotations

from lanewatch.inert import inert


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


def checkout_label(checkout_id: str | None, checkout_path: str | None, none: str = "–") -> str:
    """`slug:abcd`: the readable part of a checkout id plus enough hash to tell twins apart
    (two worktrees `app` at two paths read `app:1f3a` and `app:9c07`); inert: both come from a
    stamp. `none` when the stamp names neither."""
    if checkout_id:
        slug, _, digest = checkout_id.rpartition("-")
        if slug and digest:
            return inert(f"{slug}:{digest[:4]}")
        return inert(checkout_id)
    if checkout_path:
        return inert(checkout_path.rstrip("/").rsplit("/", 1)[-1])
    return none
