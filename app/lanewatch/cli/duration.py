"""A duration option's type, as seconds (`gate` and `hook --max-age`, `purge --older-than`)."""

from __future__ import annotations

import click


class Duration(click.ParamType):
    """`90`, `90s`, `10m`, `1h30m`, `7d`, `2w` as seconds (proof.gate.parse_duration)."""

    name = "DURATION"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        from lanewatch.proof.gate import parse_duration

        if isinstance(value, int | float):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
