"""Capture contents made safe for the people and programs that read them.

Any client chooses its client id, topic names and SASL user name, so a capture's strings are
attacker-chosen. Two readers of them need care:

* a terminal (tables, summaries, verdicts, error lines): control characters would move the
  cursor, retitle the window or clear the screen, and bidirectional controls would reorder what
  is shown. :func:`printable` shows as an escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``), as
  tshark does, every character of the Unicode categories Cc (controls), Cf (format characters:
  bidirectional marks, embeddings, overrides and isolates, the Arabic letter mark U+061C,
  interlinear annotation U+FFF9-U+FFFB, tag characters, zero-width characters), Zl and Zp (line
  and paragraph separators), Cs (surrogates, which no terminal encoding can write) and Cn (not
  assigned in this Python's Unicode: a newer terminal may give it a meaning), decided by category,
  not by a list; and a backslash as ``\\\\`` so that an escape in the output is never ambiguous;
* a spreadsheet opening a CSV file: a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
  carriage return is taken as a formula. :func:`csv_cell` prefixes such a cell with ``'`` as
  OWASP's CSV-injection guidance recommends (the cell then shows as text, the quote hidden).

JSON needs neither: its encoder escapes control characters, and nothing evaluates its strings.
"""

from __future__ import annotations

import re
import unicodedata

#: the categories shown as escapes (see the module)
UNSAFE_CATEGORIES = frozenset(("Cc", "Cf", "Zl", "Zp", "Cs", "Cn"))
#: characters that may need an escape: all but printable ASCII (each is then judged by category)
_MAYBE = re.compile(r"[^\x20-\x5b\x5d-\x7e]")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(m: re.Match) -> str:
    c = m.group()
    if c == "\\":
        return "\\\\"
    if unicodedata.category(c) not in UNSAFE_CATEGORIES:
        return c
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def printable(text: str) -> str:
    """The text with every character that would act on a terminal shown as an escape."""
    return _MAYBE.sub(_escape, text) if _MAYBE.search(text) else text


def csv_cell(text: str) -> str:
    """A string cell that no spreadsheet takes as a formula (OWASP: prefix with a single quote)."""
    return "'" + text if text.startswith(_FORMULA_START) else text
