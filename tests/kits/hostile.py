"""A hostile corpus: strings a stamp, a file name, a ledger or an incident record may carry, and
the check that none of them reached a person's terminal raw.

Used by the CLI tests (real `lanewatch` subprocesses, their stdout and stderr bytes) and the
dashboard test (the bytes `lanewatch dash` writes to a pty). Each hostile sequence ends in a
marker word, so a leak is found as the exact bytes (`\\x1b]0;OWNED`) even though the dashboard
itself writes legitimate escapes.
"""

from __future__ import annotations

import os
import unicodedata

# Terminal controls, each a leak if it arrives as bytes.
OSC_TITLE = "\x1b]0;OWNED\x07"  # retitles the terminal (or the tmux pane), BEL-terminated
OSC_CLIPBOARD = "\x1b]52;c;T1dORUQ=\x1b\\"  # writes the clipboard, ST-terminated
CSI_CLEAR = "\x1b[2JWIPED"  # clears the screen
CSI_RED = "\x1b[31mRED"
C1_CSI = "\x9b31mCONE"  # the one-byte CSI
UNDECODABLE = os.fsdecode(b"\xff\x9bBYTE")  # a file name that was not UTF-8: '\udcff\udc9bBYTE'

LEAKS = (
    b"\x1b]0;OWNED",
    b"\x1b]52;",
    b"\x1b[2JWIPED",
    b"\x1b[31mRED",
    b"\xc2\x9b31mCONE",  # U+009B written as UTF-8
    b"\x9b31mCONE",
    b"\x9bBYTE",  # the surrogate-escaped byte written back as itself
)

# What a lane name can carry (anything but NUL; at most 150 bytes once encoded).
LANE = f"x{OSC_TITLE}{CSI_RED}\nFAKEROW"
LANE_BIDI = "bidi\u202eevil\u200dzwj\u2066iso\u2069[red]x[/]"
LANE_C1 = f"c1{C1_CSI}\r\b\x01\x7fDEL"
LANE_BYTES = f"raw{UNDECODABLE}"
LANES = (LANE, LANE_BIDI, LANE_C1, LANE_BYTES)

COMMAND = ["sh", "-c", f"echo {OSC_CLIPBOARD}{CSI_CLEAR}", "[bold]rm", "\ttab"]
HOST = f"host{C1_CSI}"
USER = f"user{OSC_TITLE}"
LONG = "L" * 2000 + OSC_CLIPBOARD + "END"
CHECKOUT_PATH = f"/checkouts/{CSI_CLEAR}/{UNDECODABLE}/\u202e{LONG}"
FILE_NAMES = (
    os.fsencode(f"f{CSI_CLEAR}.txt"),
    b"g\xff\x9bBYTE.txt",
    os.fsencode(f"h{OSC_TITLE}\n.txt"),
)
CONTENT = f"line one\n{OSC_TITLE}{CSI_CLEAR}\r\nline {C1_CSI} three\n".encode()

# Visible escapes a person should see instead.
SHOWN = "x\\x1b]0;OWNED\\x07"

# Code points no output line may hold raw: controls (but the newline that ends a line),
# format characters (bidi, zero-width), surrogates, line and paragraph separators.
_FORBIDDEN = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def check_text(data: bytes, where: str, *, allow_tab: bool = False) -> str:
    """`data` as UTF-8 text holding no hostile bytes and no raw control or format character;
    raises AssertionError naming `where` and what leaked."""
    for leak in LEAKS:
        assert leak not in data, f"{where}: {leak!r} reached the output"
    try:
        text = data.decode("utf-8")  # a raw 0x9b or 0xff byte is not UTF-8
    except UnicodeDecodeError as exc:
        raise AssertionError(f"{where}: not UTF-8 ({exc}): {data[:200]!r}") from None
    for n, ch in enumerate(text):
        if ch == "\n" or (allow_tab and ch == "\t"):
            continue
        cat = unicodedata.category(ch)
        around = text[max(0, n - 40) : n + 40]
        assert cat not in _FORBIDDEN, f"{where}: raw {ch!r} ({cat}) at {n}: {around!r}"
    return text
