"""The fields the fast lane reads and moves: the boundary between ``_lane.c`` and the Python stages.

The lane (lane.py, _lane.c) takes the common packet in C, on the Python stages' own objects. What
it reads or writes of them is exactly the fields of four core types, the bases of Connection,
HalfStream, Framer and Accounting; nothing else of those objects is reached into. With the
extension the cores are its C types (``ConnCore`` ... ``AcctCore``: counters as C integers,
the other fields as objects); without it (no compiler, ``KAFKAWIRE_PURE_PYTHON=1``) they are the
plain classes below, whose slots are the one list of the fields (``FIELDS``; tests/test_lane.py
checks the C types declare exactly these). Besides the fields the lane calls
only what it is given (``Reassembler.feed``) and public methods: ``Framer.data``, ``Framer.cut``,
``OrderedDict.move_to_end``, and the row builder's ``count`` and ``backlog``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..compiled import lane_module


class _ConnCore:
    __slots__ = ("done", "self_connected", "opened", "last_ts", "halves", "log")


class _HalfCore:
    __slots__ = ("nxt", "captured", "sink", "base", "pending", "last_ts")


class _FramerCore:
    __slots__ = ("pos", "target", "rest_to", "max_frame", "on_frame", "acct", "buf", "synced", "first", "disabled",
                 "f_ts", "f_num", "f_off")


class _AcctCore:
    __slots__ = ("frames", "frame_bytes")


#: each core's fields, in the order the C type declares them
FIELDS: dict[str, tuple[str, ...]] = {c.__name__[1:]: c.__slots__
                                      for c in (_ConnCore, _HalfCore, _FramerCore, _AcctCore)}

if TYPE_CHECKING:  # the type checker sees the fields' one list
    ConnCore = _ConnCore
    HalfCore = _HalfCore
    FramerCore = _FramerCore
    AcctCore = _AcctCore
elif lane_module is not None:
    ConnCore, HalfCore, FramerCore, AcctCore = (lane_module.ConnCore, lane_module.HalfCore, lane_module.FramerCore,
                                                lane_module.AcctCore)
else:
    ConnCore, HalfCore, FramerCore, AcctCore = _ConnCore, _HalfCore, _FramerCore, _AcctCore
