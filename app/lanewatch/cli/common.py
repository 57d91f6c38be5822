"""Helpers shared by CLI commands: one way to fail, one way to print JSON, one way to print
an untrusted string (inert: a terminal escape in a lane name is shown, never sent).

No click at import: `lanewatch run` starts without it (cli/lanes/run_fast.py); what prints imports
it when it prints."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from lanewatch.cli.exits import Exit
from lanewatch.errors import (
    BadLaneName,
    BadTarget,
    BadValue,
    ClaimRefused,
    FenceRefused,
    LanewatchError,
    Missing,
    Unbound,
    Unsupported,
)
from lanewatch.inert import inert

if TYPE_CHECKING:
    from rich.text import Text

F = TypeVar("F", bound=Callable[..., Any])

# The names commands used before cli/exits.py; the numbers are the table's (docs/exit-codes.md).
EXIT_ERROR = Exit.FAILED
EXIT_UNBOUND = Exit.UNBOUND
EXIT_USAGE = Exit.USAGE  # what click gives a usage error: a lane name that cannot be one too
EXIT_REFUSED = Exit.REFUSED


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    import click  # see the module's docstring

    click.echo(f"lanewatch: {inert(message)}", err=True)
    sys.exit(code)


def needs_terminal(instead: str) -> None:
    """Refuse (usage, exit 2) to open the dashboard where there is no terminal: with stdin or
    stdout redirected (`lanewatch > out`, a CI step) it would write escape sequences into a file
    and wait for keys that never come. `instead` names what to run there."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return
    import click

    raise click.UsageError(
        f"the dashboard needs a terminal, and stdin or stdout is not one here; {instead}"
    )


def say(line: str, err: bool = False) -> None:
    """One line for a person, with what came from disk or another process in it made inert."""
    import click  # see the module's docstring

    click.echo(inert(line), err=err)


def cell(value: object, style: str = "") -> Text:
    """An untrusted string as a Rich table cell or line: inert, and never parsed as markup."""
    from rich.text import Text  # not at import: `run` and `gate` never print a table

    return Text(inert(value), style=style)


def _friendly(func: F, failed: int) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Unbound as exc:
            fail(str(exc), Exit.UNBOUND)
        except Unsupported as exc:
            fail(str(exc), Exit.UNSUPPORTED)
        except Missing as exc:  # before BadTarget: actions' NotFound is both
            fail(str(exc), Exit.NOT_FOUND)
        except (BadLaneName, BadTarget, BadValue) as exc:
            fail(str(exc), Exit.USAGE)
        except (ClaimRefused, FenceRefused) as exc:
            fail(str(exc), Exit.REFUSED)
        except LanewatchError as exc:
            fail(str(exc), failed)
        except OSError as exc:  # a root on a read-only disk, a path through a file, ...
            if isinstance(exc, BrokenPipeError) and failed != Exit.RUN_FAILED:
                raise  # stdout's reader went away (`| head -1`): click exits 1, quietly
            where = f": {exc.filename}" if exc.filename else ""
            fail(f"{exc.strerror or exc}{where}", failed)

    return wrapper  # type: ignore[return-value]


def friendly_errors(func: F) -> F:
    """Turn our own refusals into one line on stderr and a documented exit code (cli/exits.py)."""
    return _friendly(func, Exit.FAILED)


def friendly_errors_around_cmd(func: F) -> F:
    """The same, for `run` and `prove`: a failure of lanewatch's own is 125, never CMD's 1."""
    return _friendly(func, Exit.RUN_FAILED)


def ago(t: float | None, now: float, unknown: str) -> str:
    """How long before `now` `t` was, in its largest whole unit: "3h ago"; `unknown` for None."""
    if t is None:
        return unknown
    age = max(0.0, now - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if age >= size:
            return f"{age / size:.0f}{unit} ago"
    return f"{age:.0f}s ago"


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options (or other decorators) as one, in the order written: the same as
    stacking them in that order above the command."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def echo_json(data: Any) -> None:
    import click  # see the module's docstring

    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def mute_dead_streams() -> None:
    """Before the process exits with 128+N: a standard output or error that cannot be flushed
    (the terminal hung up: EIO) is pointed at /dev/null. Python flushes standard output once
    more as it exits, and a failure there turns the exit code into 120; what was left to say
    has no one to read it. A stream that flushes is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, stream.fileno())
                finally:
                    os.close(null)
