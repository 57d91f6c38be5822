"""`run`'s screen rule (runner/launchers.py `screen_in_lane`): inside a screen window `$STY`
would hand a screen CMD to the outer session, outside the lane; it is dropped for a CMD that
starts something and kept for one that talks to sessions already running. Pure: the real
screen runs in tests/processes/test_launchers.py."""

from __future__ import annotations

import pytest

from lanewatch.runner.launchers import screen_in_lane

ENV = {"STY": "4242.work", "HOME": "/home/a"}


@pytest.mark.parametrize(
    "cmd",
    [
        ["screen", "sh", "-c", "make"],
        ["/usr/bin/screen", "-S", "build", "make"],
        ["screen", "-t", "title", "-L", "vim"],
    ],
)
def test_a_screen_cmd_that_would_open_a_window_outside_the_lane_loses_sty(
    cmd: list[str],
) -> None:
    env, told = screen_in_lane(cmd, ENV, "a")
    assert "STY" not in env and env["HOME"] == "/home/a"
    assert told is not None and "4242.work" in told and "lane a" in told


@pytest.mark.parametrize(
    "cmd",
    [
        ["screen", "-dmS", "x", "make"],  # -m: a new session whatever $STY says
        ["screen", "-S", "x", "-dm", "make"],
        ["screen", "-m", "make"],
        ["screen", "-r", "work"],  # talks to a session already running
        ["screen", "-ls"],
        ["screen", "-X", "quit"],
        ["tmux", "new", "-d"],
        ["sh", "-c", "screen make"],  # not screen itself: nothing to say about it
    ],
)
def test_other_commands_keep_sty_and_nothing_is_said(cmd: list[str]) -> None:
    env, told = screen_in_lane(cmd, ENV, "a")
    assert env == ENV and told is None


def test_outside_screen_nothing_changes() -> None:
    env, told = screen_in_lane(["screen", "make"], {"HOME": "/home/a"}, "a")
    assert env == {"HOME": "/home/a"} and told is None
