"""`lanewatch.inert`: untrusted strings shown, never obeyed, by the terminal."""

from __future__ import annotations

import logging
import os
import sys
import unicodedata

import pytest

from lanewatch.inert import inert, inert_lines
from lanewatch.lanes.logs import InertFormatter
from tests.kits import hostile

pytestmark = pytest.mark.unprivileged

_ESCAPED = {"Cc", "Cf", "Cs", "Zl", "Zp"}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("x\x1b]0;T\x07\x1b[31mR", "x\\x1b]0;T\\x07\\x1b[31mR"),
        ("a\nb\rc\td\b", "a\\nb\\rc\\td\\x08"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),
        ("bidi\u202eevil\u2066\u2069", "bidi\\u202eevil\\u2066\\u2069"),
        ("zero\u200bwidth\u200d\ufeff", "zero\\u200bwidth\\u200d\\ufeff"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("tag\U000e0041", "tag\\U000e0041"),
        (os.fsdecode(b"file\xff\x9b"), "file\\xff\\x9b"),  # undecodable bytes, as bytes
        ("lone\ud800", "lone\\ud800"),
    ],
)
def test_controls_format_characters_and_bytes_become_visible_escapes(raw: str, shown: str) -> None:
    assert inert(raw) == shown
    assert inert(shown) == shown  # idempotent


@pytest.mark.parametrize(
    "clean", ["pytest-gw12", "[red]x[/]", "é ü 日本 🙂", "back\\slash", "\u00a0nbsp", ""]
)
def test_clean_text_is_returned_as_it_is(clean: str) -> None:
    assert inert(clean) is clean  # the fast path: no copy


def test_every_code_point_of_the_dangerous_categories_is_escaped() -> None:
    """The ranges in the module against this Python's Unicode database. Nothing else is
    escaped (letters, marks, symbols and spaces are shown as they are), but for unassigned code
    points inside the format blocks: a later Unicode makes them format characters."""
    missed, extra = [], []
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        dangerous = unicodedata.category(ch) in _ESCAPED
        escaped = inert(ch) != ch
        if dangerous and not escaped:
            missed.append(f"U+{code:04X}")
        elif escaped and not dangerous and unicodedata.category(ch) != "Cn":
            extra.append(f"U+{code:04X}")
    assert not missed and not extra, (missed[:20], extra[:20])


def test_non_string_values_are_shown_too() -> None:
    assert inert(42) == "42" and inert(None) == "None"
    assert inert(("a\x1b",)) == "('a\\x1b',)"


def test_a_body_keeps_its_lines_and_tabs_but_nothing_else() -> None:
    body = f"one\n\ttwo{hostile.OSC_TITLE}\r\nthree{hostile.UNDECODABLE}\n"
    assert inert_lines(body) == "one\n\ttwo\\x1b]0;OWNED\\x07\\r\nthree\\xff\\x9bBYTE\n"
    assert inert_lines("clean\n\tbody") == "clean\n\tbody"


def test_each_hostile_string_of_the_corpus_passes_the_byte_check_once_inert() -> None:
    for value in (*hostile.LANES, *hostile.COMMAND, hostile.HOST, hostile.USER):
        hostile.check_text(inert(value).encode(), repr(value))
        if inert(value) == value:
            continue  # "sh", "[bold]rm": nothing to hide
        with pytest.raises(AssertionError):
            hostile.check_text(value.encode("utf-8", "surrogateescape"), repr(value))


def test_the_log_formatter_makes_messages_and_arguments_inert() -> None:
    record = logging.LogRecord(
        "lw", logging.WARNING, __file__, 1, "cannot keep %s: %s", (hostile.LANE, "x"), None
    )
    line = InertFormatter().format(record)
    assert line == "cannot keep x\\x1b]0;OWNED\\x07\\x1b[31mRED\\nFAKEROW: x"
