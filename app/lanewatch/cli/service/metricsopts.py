"""`--metrics ADDR:PORT` and `--metrics-textfile PATH` (docs/metrics.md): `record`'s Prometheus
options, shared with `service install`, which writes them into the unit's ExecStart. Both are
checked when the command line is read: a bad address is a usage error (exit 2) before anything
starts or any unit is written, and the textfile is made absolute (a unit runs from `/`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    from lanewatch.engine.metrics_address import parse_address

    try:
        parse_address(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
    return value


def _textfile(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else os.path.abspath(value)


def metrics_options(func: F) -> F:
    """Adds `metrics_at` and `metrics_textfile` (None when not given)."""
    func = click.option(
        "--metrics-textfile",
        "metrics_textfile",
        metavar="PATH",
        type=click.Path(dir_okay=False),
        callback=_textfile,
        help="Keep Prometheus metrics in PATH for node_exporter's textfile collector.",
    )(func)
    return click.option(
        "--metrics",
        "metrics_at",
        metavar="ADDR:PORT",
        callback=_address,
        help="Serve Prometheus metrics over HTTP (a bare PORT: on 127.0.0.1; docs/metrics.md).",
    )(func)


def metrics_args(metrics_at: str | None, metrics_textfile: str | None) -> list[str]:
    """The same options as `record` arguments (for the unit and the nohup line)."""
    return [
        *(["--metrics", metrics_at] if metrics_at is not None else []),
        *(["--metrics-textfile", metrics_textfile] if metrics_textfile is not None else []),
    ]
