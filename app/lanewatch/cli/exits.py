"""Exit codes: one meaning each, for every command (docs/exit-codes.md is this table in words).

A script can rely on them: 3 is always a refusal for safety, never "nobody answered"; 6 is always
"not inside a checkout", never a usage error. `run` and `prove` exit with CMD's own code when CMD
ran, so there these numbers can also be CMD's: the line on stderr (`lanewatch: ...`) tells.
tests/processes/test_exit_codes.py calls each command into each situation and checks the code.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # done, or nothing to do (the message, or JSON's `outcome`, says which)
    FAILED = 1  # tried and could not: a signal sent but the lane still runs, a delete failed
    USAGE = 2  # click's usage error; a lane name or TARGET that cannot be one
    REFUSED = 3  # refused for safety: live, held by another owner, not ours, name taken
    COLLISION = 4  # status: an open collision; drill: a lane read another's bytes; audit: shared
    INCOMPLETE = 5  # status: a root unread; drill: blind to a clobber; audit: a run not fenced
    UNBOUND = 6  # not inside a checkout, and nothing (--checkout, $LANEWATCH_CHECKOUT) bound one
    NEEDS_CONFIRMATION = 7  # not confirmed: no terminal on stdin to ask and no --yes, or a "no"
    NOT_FOUND = 8  # no such namespace, lane, trash id, incident or recorded write
    UNSUPPORTED = 9  # this system lacks what the command needs (/proc, inotify: Linux)
    # 10-19: the gate's refusals, one code each (proof/gate.py EXIT_CODES)
    RUN_FAILED = 125  # run/prove: lanewatch failed around CMD (a root, the receipt, the seal key)
    # 126 / 127: CMD not executable / not found; 128+N: CMD died of signal N (run, prove)


# What each means, for `docs/exit-codes.md` and the test that keeps the two in step.
MEANING: dict[Exit, str] = {
    Exit.OK: "done, or nothing to do (the message or the JSON `outcome` says which)",
    Exit.FAILED: "the command tried and could not (a signal sent but the lane still runs, "
    "a purge that could not delete an entry)",
    Exit.USAGE: "usage error: a bad option or argument, a lane name or TARGET that cannot be one, "
    "an incident ID prefix that names more than one",
    Exit.REFUSED: "refused for safety: the target is live, held, another user's, changed "
    "since it was seen, or its name is taken; a hook that is not ours",
    Exit.COLLISION: "a collision: `status` has an open incident; `drill` saw a lane read "
    "another's bytes; `audit` saw a path written by two runs",
    Exit.INCOMPLETE: "the picture is incomplete: `status` could not read a root; `drill --unbound` "
    "saw no clobber; `audit` could not fence or start a run",
    Exit.UNBOUND: "unbound: not inside a git checkout and no --checkout",
    Exit.NEEDS_CONFIRMATION: "not confirmed, so nothing done: no terminal to ask on and no "
    "--yes, or the question was answered no",
    Exit.NOT_FOUND: "not found: no such namespace, lane, trash id, incident or recorded write",
    Exit.UNSUPPORTED: "unsupported here: this system lacks what the command needs "
    "(/proc or inotify: Linux)",
    Exit.RUN_FAILED: "`run`/`prove`: lanewatch failed around CMD (a root it cannot use, the "
    "receipt could not be written, the seal key cannot be trusted); never CMD's own 1",
}
