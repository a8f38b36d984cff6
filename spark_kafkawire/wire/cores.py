"""The fields the fast lane reads and moves: the boundary between ``_lane.c`` and the Python stages.

The lane (lane.py, _lane.c) takes the common packet in C, on the Python stages' own objects. What
it reads or writes of them is exactly the fields of four core classes, the bases of Connection,
HalfStream, Framer and Accounting; nothing else of those objects is reached into. The classes
below are the one declaration of those fields. Compiled (mypyc, setup.py's NATIVE, like the stages
built on them), each is a C struct whose layout mypyc writes into the group's generated header;
``_lane.c`` is compiled against that header, so it reads and writes the same struct members the
compiled stages do (``int`` fields as mypyc's tagged integers, ``bool`` fields as a char, the
others as objects). The lane is built and used only together with the compiled stages; run as
Python (no compiler, ``KAFKAWIRE_PURE_PYTHON=1``, sources edited since the build) these are plain
slotted classes and no lane runs. Each class's ``__slots__`` is the list of its fields; the lane's
module lists those it reads (``_lane.FIELDS``), and tests/test_lane.py holds the two equal.

Besides the fields the lane calls only what it is given (``Reassembler.feed``) and public methods:
``Framer.data``, ``Framer.cut``, ``OrderedDict.move_to_end``, and the row builder's ``count`` and
``backlog``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .frames import Accounting, Frame
    from .tcp import HalfStream, Queued, Sink


class ConnCore:
    """The fields of a Connection the lane reads and moves."""

    __slots__ = ("done", "self_connected", "opened", "last_ts", "halves", "log")
    done: bool  # ended: its packets go to the reassembler
    self_connected: bool  # both endpoints the same
    opened: bool  # the listener has been told
    last_ts: int  # time of its last packet
    halves: list[HalfStream]  # its two HalfStreams
    log: bytearray | None  # the events of the packets the lane took, for its TCP health (see health.py)


class HalfCore:
    """The fields of a HalfStream the lane reads and moves."""

    __slots__ = ("nxt", "captured", "sink", "base", "pending", "last_ts")
    nxt: int  # stream offset of the next byte to deliver
    captured: int  # distinct payload bytes the capture holds
    sink: Sink | None  # where the direction's bytes go (a Framer, a TLS direction)
    base: int | None  # sequence number of stream offset 0, or None
    pending: list[Queued]  # segments waiting for the bytes before them
    last_ts: int  # time of the direction's last packet


class AcctCore:
    """The counters of an Accounting the lane moves."""

    __slots__ = ("frames", "frame_bytes")
    frames: int  # complete frames
    frame_bytes: int  # bytes of complete frames, size fields included


class FramerCore:
    """The fields of a Framer the lane reads and moves."""

    __slots__ = ("pos", "target", "rest_to", "max_frame", "on_frame", "acct", "buf", "synced", "first", "disabled",
                 "f_ts", "f_num", "f_off")
    pos: int  # stream offset of the next byte to arrive
    target: int  # bytes the frame in progress needs in all
    rest_to: int  # end of a frame cut by a gap
    max_frame: int  # largest frame accepted
    on_frame: Callable[[Frame], None]  # called with each Frame
    acct: Accounting  # the direction's Accounting
    buf: bytearray  # the frame in progress, size field included
    synced: bool  # frame starts are known
    first: bool  # no byte seen yet
    disabled: bool  # not Kafka: every byte is skipped
    f_ts: int  # time of the frame in progress
    f_num: int  # packet number of the frame in progress
    f_off: int  # stream offset of the frame in progress

