"""Signals as a terminal gives them, for the suite and the benchmark.

A program started by `nohup`, or with `&` from a script (job control off), inherits SIGHUP (and
SIGINT, SIGQUIT) ignored, and so does every lane it starts: a lane keeps what it was given, as
`nohup lanewatch run` should. The tests and figures that end a lane by those signals then saw it
run on (the benchmark's served lane ignored its Ctrl-C, waited 30 s and was SIGKILLed, leaving
its command orphaned). Called first, so every process they start begins from a terminal's
dispositions."""

from __future__ import annotations

import signal


def restore() -> None:
    for sig in (signal.SIGHUP, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
