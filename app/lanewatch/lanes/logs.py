"""Warnings through logging, with their untrusted parts inert (they name paths and lanes).

Apart from inert.py, which every display imports: `lanewatch run` starts without logging
(docs/performance.md, `run_start`), and the core imports this module when it has something
to warn about."""

from __future__ import annotations

import logging
from typing import Any

from lanewatch.inert import inert, inert_lines


class InertFormatter(logging.Formatter):
    """Log lines with their untrusted parts inert: the message on one line (a newline in a
    path cannot forge a second record), a traceback with its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return inert(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return inert_lines(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return inert_lines(super().formatStack(stack_info))


def inert_warnings() -> None:
    """Warnings go to stderr through logging's last-resort handler (where nothing else is set
    up), inert."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(InertFormatter())


def warn(logger: str, message: str, *args: object) -> None:
    """A warning from `logger`; the last resort made inert first, as the CLI makes it at its
    start (a command that starts without logging, `run`, has not)."""
    inert_warnings()
    logging.getLogger(logger).warning(message, *args)
