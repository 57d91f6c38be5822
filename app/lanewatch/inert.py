"""Untrusted strings made inert for display: what a stamp, a file name or another process wrote
is shown as visible text, never sent to a terminal as a control.

A lane named `x\\x1b]0;OWNED\\x07` would retitle the terminal, `\\x1b]52;` write the clipboard,
`\\x1b[2J` clear the screen, a newline forge a row, a bidi override reorder what follows. Every
such code point becomes a visible escape: `\\x1b`, `\\n`, `\\u202e`. A byte that was not UTF-8
(os.fsdecode's surrogate escape, U+DC80-U+DCFF) is shown as the byte, `\\xff`; printed raw, it
would be written back to the terminal as that byte (a C1 `\\x9b` is a CSI) or crash the encoder.

Escaped: Unicode categories Cc (C0, DEL, C1), Cf (bidi overrides and isolates, zero-width
spaces and joiners, soft hyphen, BOM, tag characters), Cs (surrogates), Zl and Zp (line and
paragraph separators). tests/fast/test_inert.py checks the ranges below against `unicodedata`.
A backslash is left alone, so `inert` is idempotent: `inert(inert(s)) == inert(s)`.

Stdlib only: the CLI, the dashboard and the exports all import it.
"""

from __future__ import annotations

import re

_FORMAT = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_UNSAFE = re.compile(f"[{_CONTROLS}\t\n{_FORMAT}\ud800-\udfff]")
# Inside a multi-line body (file contents, a diff) tabs and line breaks are its layout.
_UNSAFE_IN_BODY = re.compile(f"[{_CONTROLS}{_FORMAT}\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _shown(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, kept by os.fsdecode
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def inert(text: object) -> str:
    """`text` as one line of visible characters: every control, format or surrogate code
    point (ESC, BEL, CR, LF, TAB, DEL, C1, bidi overrides, zero-width) as an escape."""
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable():  # the common case, in C: nothing to do
        return s
    if _UNSAFE.search(s) is None:
        return s
    return _UNSAFE.sub(_shown, s)


def inert_lines(text: object) -> str:
    """Like `inert`, but a multi-line body keeps its newlines and tabs (a CR is escaped)."""
    s = text if isinstance(text, str) else str(text)
    if _UNSAFE_IN_BODY.search(s) is None:
        return s
    return _UNSAFE_IN_BODY.sub(_shown, s)
