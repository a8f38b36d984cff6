"""Capture contents made safe for the people and programs that read them.

Any client chooses its client id, topic names and SASL user name, so a capture's strings are
attacker-chosen. Two readers of them need care:

* a terminal (tables, summaries, verdicts, error lines): control characters would move the
  cursor, retitle the window or clear the screen, and bidirectional overrides would reorder what
  is shown. :func:`printable` shows each of them as an escape (``\\x1b``, ``\\u202e``), as tshark
  does, and a backslash as ``\\\\`` so that an escape in the output is never ambiguous;
* a spreadsheet opening a CSV file: a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return is taken as a formula. :func:`csv_cell` prefixes such a cell with ``'`` as
  OWASP's CSV-injection guidance recommends (the cell then shows as text, the quote hidden).

JSON needs neither: its encoder escapes control characters, and nothing evaluates its strings.
"""

from __future__ import annotations

import re

# C0 controls and DEL, C1 controls, bidirectional embeddings, overrides and isolates, line and
# paragraph separators, zero-width and BOM characters, and the backslash itself
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\\\\]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(m: re.Match) -> str:
    c = m.group()
    if c == "\\":
        return "\\\\"
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def printable(text: str) -> str:
    """The text with every character that would act on a terminal shown as an escape."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def csv_cell(text: str) -> str:
    """A string cell that no spreadsheet takes as a formula (OWASP: prefix with a single quote)."""
    return "'" + text if text.startswith(_FORMULA_START) else text
