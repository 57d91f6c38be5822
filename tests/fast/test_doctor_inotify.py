"""`lanewatch doctor`'s inotify verdict from its figures: room for one more watcher of the
roots, or which limit stands in the way and the setting that makes room. Pure (the real
count, with a real watcher, is in tests/processes/test_doctor.py)."""

from __future__ import annotations

from lanewatch.cli.tools.checkup import DEGRADED, OK, inotify_verdict
from lanewatch.linux.inotifyuse import InotifyUse


def test_room_for_another_watcher_is_ok() -> None:
    check = inotify_verdict(2_000, 2, InotifyUse(5_000, 10, 0), 65_536, 128, "alice")
    assert check.status == OK and not check.fix
    assert check.summary == (
        "room to watch the roots' 2,000 folders: 5,000 of 65,536 watches and 10 of 128 "
        "instances held by alice's processes"
    )


def test_too_few_watches_left_says_which_setting_makes_room() -> None:
    """Editors and their language servers often hold most of a user's watches (VS Code's
    "unable to watch for file changes"): a new dashboard would then poll."""
    check = inotify_verdict(6_000, 1, InotifyUse(7_000, 40, 2), 8_192, 128, "alice")
    assert check.status == DEGRADED
    assert "6,000 folders want a watch each, and 1,192 are left" in check.summary
    assert "2 of alice's processes not read" in check.summary
    assert check.fix.startswith("sudo sysctl fs.inotify.max_user_watches=65536 ")
    assert int(check.fix.split("=")[1].split()[0]) >= 7_000 + 6_000


def test_too_few_instances_left_says_so() -> None:
    check = inotify_verdict(10, 3, InotifyUse(100, 127, 0), 65_536, 128, "bob")
    assert check.status == DEGRADED
    assert "3 roots want an inotify instance each, and 1 left" in check.summary
    assert check.fix.startswith("sudo sysctl fs.inotify.max_user_instances=256 ")


def test_a_kernel_without_limits_is_no_finding() -> None:
    assert inotify_verdict(10, 1, InotifyUse(0, 0, 0), None, None, "bob").status == OK
