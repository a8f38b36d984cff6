"""What a connection's row says of each direction, as one typed record: the TCP stage's, the
framer's, the TCP health's and the TLS session's counts of that direction, gathered here so that
the row builders read a :class:`DirectionSummary` and not the stages' objects. Its fields are the
per-direction columns of rows=connections (rows/columns.py declares their types and meanings; a
check there holds the two together)."""

from __future__ import annotations

from typing import Any, NamedTuple


class DirectionSummary(NamedTuple):
    """One direction of a connection (the column ``client_<field>`` or ``broker_<field>``)."""

    bytes: int
    frames: int
    frame_bytes: int
    partial_frames: int
    partial_bytes: int
    skipped_bytes: int
    gap_bytes: int
    gaps: int
    resyncs: int
    retransmitted_segments: int
    retransmitted_bytes: int
    data_segments: int
    out_of_order: int
    lost_segments: int
    lost_bytes: int
    zero_windows: int
    zero_window_ms: float
    rtt_min_ms: float | None
    rtt_p50_ms: float | None
    tls_read_bytes: int | None
    tls_undecrypted_bytes: int | None
    tls_other_bytes: int | None
    tls_gap_bytes: int | None


def summarize(conn: Any, framers: list | None, tls: Any, d: int) -> DirectionSummary:
    """Direction ``d`` of a TCP connection (wire/tcp.py) whose directions were framed by ``framers``
    (None: it never carried payload) and read through the TLS session ``tls`` (None: not TLS)."""
    health = conn.health
    sent = health.side(d)
    if framers is None:
        captured = frames = frame_bytes = partial_frames = partial_bytes = skipped = gap_bytes = gaps = resyncs = 0
        resent = resent_bytes = 0
    else:
        f = framers[d]
        a = f.acct
        captured, frames, frame_bytes = conn.halves[d].captured, a.frames, a.frame_bytes
        partial_frames, partial_bytes, skipped = a.partial_frames, a.partial_bytes, a.skipped_bytes
        gap_bytes, gaps, resyncs = a.gap_bytes, a.gaps, f.resyncs
        resent, resent_bytes = sent.resent, sent.resent_bytes
    rtt_min, rtt_p50 = health.round_trip_ms(d)
    if tls is not None:
        read, undecrypted, other, lost = tls.direction_counts(d)  # (tls/session.py's order)
    else:
        read = undecrypted = other = lost = None
    return DirectionSummary(
        bytes=captured, frames=frames, frame_bytes=frame_bytes, partial_frames=partial_frames,
        partial_bytes=partial_bytes, skipped_bytes=skipped, gap_bytes=gap_bytes, gaps=gaps, resyncs=resyncs,
        retransmitted_segments=resent, retransmitted_bytes=resent_bytes, data_segments=sent.data_segments,
        out_of_order=sent.out_of_order, lost_segments=sent.lost, lost_bytes=sent.lost_bytes,
        zero_windows=sent.zero_windows, zero_window_ms=health.zero_window_ms(d), rtt_min_ms=rtt_min,
        rtt_p50_ms=rtt_p50, tls_read_bytes=read, tls_undecrypted_bytes=undecrypted, tls_other_bytes=other,
        tls_gap_bytes=lost)
