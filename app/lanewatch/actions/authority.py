"""Whose lane it is, and whether the one acting may act on it.

A stamp is a file: anyone can write one in a folder of their own, naming any pid with its
start ticks (world-readable in /proc). So the stamp's `uid` is only a claim, and authority
comes from ownership: the stamp file and the namespace folder must be owned by the uid the
stamp names, and that uid must own the processes it names (`model.classify.claims_mismatch`
flags a stamp where any of that is known to be false; a flagged lane is `unknown`, never
acted on). A kill needs more than "not known to be false": every one of those owners must
have been read, and it acts as that uid or, as root, on another user's lane only when asked
explicitly (`allow_other_user`). The signal itself checks the process's uid again
(`signals.send_checked(expect_uid=...)`).
"""

from __future__ import annotations

import os
import pwd

from lanewatch.actions.assess import Assessment


def owner_label(uid: int) -> str:
    """ "user alice (uid 1000)", or "uid 1000" for a uid with no name here."""
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, OverflowError):
        return f"uid {uid}"


def is_other_user(a: Assessment) -> bool:
    """The lane's stamp names another uid than ours."""
    return a.stamp is not None and a.stamp.uid != os.getuid()


def why_not_killable_by_us(a: Assessment, allow_other_user: bool) -> str | None:
    """Why the one running this may not signal the lane's processes, or None.

    Called on a live or hung local lane whose claims were not found false; here every claim
    must also have been read (a claim that could not be checked is not trusted)."""
    stamp = a.stamp
    if stamp is None:
        return "it has no valid stamp"
    uid = stamp.uid
    if a.read.file_uid is None or a.read.folder_uid is None:
        return "cannot tell who owns its stamp file and folder, so cannot tell whose lane it is"
    ev = a.evidence
    # A headless lane's runner is gone: each member's uid is checked at its signal instead.
    if ev is None or (ev.uid is None and not a.members):
        return f"cannot tell which uid its owner pid {stamp.pid} runs as"
    if uid == os.getuid():
        return None
    owner = owner_label(uid)
    if os.geteuid() != 0:
        return f"it is the lane of {owner}, not yours; only root may kill another user's lane"
    if not allow_other_user:
        return (
            f"it is the lane of {owner}, not yours; as root, ask explicitly "
            "(--allow-other-user) to kill another user's lane"
        )
    return None
