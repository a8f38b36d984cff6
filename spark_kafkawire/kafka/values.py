"""The two value types a decoded body may hold besides plain dicts and lists: a records field's
batch summaries with its bytes, and a secret field as shown. They subclass list and dict, so they
stay interpreted Python in every mode (the compiled modules take them as they are, see
compiled.py)."""

from __future__ import annotations


class RawRecords(list):
    """A records field's batch summaries (the list) with the field's bytes in ``.data``."""

    def __init__(self, summary: list, data: bytes):
        super().__init__(summary)
        self.data = data


class Redacted(dict):
    """A secret field as shown (length, user name). ``secrets``: the texts of it that must appear
    nowhere else in the output (a PLAIN password, a SCRAM proof or signature, a bearer token, the
    whole token), for :func:`seal`."""

    __slots__ = ("secrets",)
    secrets: list[str]
