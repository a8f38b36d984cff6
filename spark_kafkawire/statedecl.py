"""What a carried state holds: each carried stage's fields declared once (their names and types),
the callbacks a state may name, the fields that are another record's own, and how a blank record of
each type is made. statefile.py writes and reads states by these declarations; docs/state.md's
tables are made from them (``markdown``); their digest names them in every state.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Final

FORMAT: Final = 2


def package_version() -> str:
    """The version of spark-kafkawire that writes a state (its installed metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spark-kafkawire")
    except PackageNotFoundError:
        return "(not installed)"


class StateError(Exception):
    """A state that cannot be written or read, and why."""


# -- the declarations ------------------------------------------------------------------------------
#: record type -> its fields and their types. Types: int bool str bytes bytearray float none plain
#: (JSON-like values with bytes), call (a declared method, see METHODS), options (the records
#: options: an int and two bools), linked (the same object as another record's field, written as nil
#: and linked again on reading: see LINKS), dir (a direction: 0 or 1); T? (T or nil); A|B (either);
#: list[T] (list[T]#N: of N items) set[T] frozenset[T] deque[T] tuple[A, B] tuple[T, ...] dict[K, V]
#: odict[K, V]; @Name (a
#: reference to a record of type Name; @A/B: of type A or B).
RECORDS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "Reassembler": (
        ("listener", "@Decoder"), ("max_pending", "int"), ("ports", "frozenset[int]?"),
        ("max_connections", "int"), ("table", "dict[tuple[bytes, int, bytes, int], tuple[@Connection, dir]]"),
        ("live", "odict[@Connection, none]"), ("ended", "deque[@Connection]"), ("forget_at", "int"),
        ("newest", "@Connection?"), ("found", "@Found"), ("held", "@Held")),
    "Found": (("table", "linked"), ("a", "@Recent"), ("b", "@Recent")),
    "Recent": (("src", "bytes"), ("sport", "int"), ("dst", "bytes"), ("dport", "int"),
               ("hit", "tuple[@Connection, dir]?")),
    "Held": (("entries", "dict[tuple[bytes, int, bytes, int], tuple[@Connection, dir]]"),),
    "Connection": (
        ("a", "tuple[bytes, int]"), ("b", "tuple[bytes, int]"), ("client", "dir?"), ("first_ts", "int"),
        ("last_ts", "int"), ("first_number", "int"), ("halves", "list[@HalfStream]#2"), ("isn", "list[int?]#2"),
        ("rst", "bool"), ("reset_by", "dir?"), ("done", "bool"), ("state", "@ConnState?"), ("opened", "bool"),
        ("evicted", "bool"), ("keys", "tuple[tuple[bytes, int, bytes, int], ...]"), ("self_connected", "bool"),
        ("syn_ts", "int?"), ("synack_ts", "int?"), ("ack_ts", "int?"), ("shake_unclear", "str?"),
        ("health", "@Health")),
    "HalfStream": (
        ("sink", "@Framer/TlsDirection?"), ("max_pending", "int"), ("base", "int?"), ("captured", "int"),
        ("fin", "bool"), ("fin_off", "int?"), ("holes", "list[list[int|bool]]"), ("last_ts", "int"),
        ("nxt", "int"), ("pending", "list[none]"), ("pending_bytes", "int"), ("started", "bool")),
    "Health": (("a", "@Side"), ("b", "@Side"), ("syn_ts", "int"), ("first_rtt", "int"), ("last_ts", "int")),
    "Side": (
        ("nextseq", "int"), ("nextseq_ts", "int"), ("seen", "bool"), ("lastack", "int"), ("lastack_ts", "int"),
        ("acked", "bool"), ("window", "int"), ("dupacks", "int"), ("ends", "list[int]?"), ("sent", "list[int]?"),
        ("samples", "list[int]?"), ("resent_at", "list[tuple[int, int, int, int]]?"), ("holes", "@Holes?"),
        ("ids", "@Numbering"), ("data_segments", "int"), ("out_of_order", "int"), ("lost_after", "int"),
        ("lost_before", "int"), ("lost_bytes", "int"), ("prev_min", "int"), ("prev_n", "int"), ("resent", "int"),
        ("resent_bytes", "int"), ("skip", "int"), ("stride", "int"), ("win_min", "int"), ("win_n", "int"),
        ("win_start", "int"), ("zero_ns", "int"), ("zero_since", "int"), ("zero_windows", "int")),
    "Holes": (("ranges", "list[int]?"),),
    "Numbering": (("last", "int"), ("free", "bool"), ("steps", "int"), ("ones", "int"), ("far", "int"),
                  ("gaps", "int"), ("suspects", "int"), ("at", "list[tuple[int, int]]?")),
    "Framer": (
        ("on_first", "call?"), ("on_frame", "call"), ("plausible", "call?"), ("acct", "@Accounting"),
        ("at_start", "bool"), ("buf", "bytearray"), ("disabled", "bool"), ("f_last", "int"), ("f_num", "int"),
        ("f_off", "int"), ("f_ts", "int"), ("first", "bool"), ("max_frame", "int"), ("pos", "int"),
        ("rest_to", "int"), ("resyncs", "int"), ("scan", "bytearray"), ("scan_base", "int"), ("scan_from", "int"),
        ("scan_marks", "list[int]"), ("synced", "bool"), ("target", "int")),
    "Accounting": (("frames", "int"), ("frame_bytes", "int"), ("partial_frames", "int"), ("partial_bytes", "int"),
                   ("skipped_bytes", "int"), ("gap_bytes", "int"), ("gaps", "int")),
    "Frame": (("ts_ns", "int"), ("number", "int"), ("offset", "int"), ("size", "int"), ("data", "bytes"),
              ("complete", "bool"), ("last_ts", "int")),
    "Decoder": (
        ("sink", "none"), ("connection_row", "none"), ("keylog", "none"), ("share", "tuple[int, int]?"),
        ("predicate", "none"), ("seq", "int"), ("decode_bodies", "bool"), ("record_options", "options"),
        ("roles", "@Roles"), ("topics", "@TopicIds"), ("max_frame", "int"), ("ending", "bool"),
        ("trial_budget", "@TrialBudget")),
    "Side_": (("decoder", "@Decoder"), ("st", "@ConnState"), ("d", "dir")),
    "Roles": (("brokers", "set[tuple[bytes, int]]"),),
    "TopicIds": (("names", "dict[str, str]"), ("_learned", "dict[tuple[int, int, bytes?], dict[str, str]]")),
    "TrialBudget": (("per_connection", "int"), ("task_left", "int")),
    "ConnState": (
        ("conn", "@Connection"), ("framers", "list[@Framer]"), ("client_dir", "dir?"),
        ("queue", "list[tuple[dir, @Frame]]"), ("queued_counts", "list[int]#2"), ("pending", "dict[int, @Request]"),
        ("endpoints", "@Endpoints?"), ("software", "tuple[str?, str?]"), ("tls", "str?"), ("framed", "bool"),
        ("sasl_raw", "bool"), ("secrets", "none"), ("sasl", "tuple[str?, str?]"), ("tls_session", "@TlsSession?"),
        ("tls_guess", "@TlsGuess?"), ("tested", "none"), ("spoken", "set[tuple[int, int]]"),
        ("first_client_id", "str?"), ("api_versions", "int?"), ("named", "tuple[str?]?"),
        ("reported", "dict[str, plain]?"), ("shown", "set[tuple[str, bool]]"), ("trait_requests", "dict[int, int]")),
    "Endpoints": (
        ("client_ip", "str"), ("client_port", "int"), ("broker_ip", "str"), ("broker_port", "int"),
        ("community_id", "str"), ("rtt_ns", "int?"), ("broker_rtt_ns", "int?"), ("tcp", "@Connection?"),
        ("client_dir", "dir"), ("first_ns", "int?")),
    "Request": (("frame", "@Frame"), ("header", "@RequestHeader?"), ("acks", "int?"), ("body", "plain"),
                ("error", "str?"), ("skip", "bool"), ("facts", "@Facts?")),
    "RequestHeader": (("api_key", "int"), ("api_version", "int"), ("correlation_id", "int"),
                      ("client_id", "str?"), ("header_version", "int"), ("body_offset", "int")),
    "Facts": (("error", "int"), ("error_level", "int"), ("in_partitions", "int"), ("partitions", "int?"),
              ("record_bytes", "int"), ("records", "int"), ("text", "bytes|bool?"),
              ("topic_ids", "list[tuple[str, str]]"), ("topics", "list[str|tuple[str, str]]")),
    "TlsGuess": (("decided", "bool"), ("on_decide", "none"), ("sides", "list[none]")),
    "TlsSession": (
        ("keylog", "none"), ("outputs", "linked"), ("client_dir", "dir?"), ("on_client", "call?"),
        ("budget", "@TrialBudget"), ("choice", "int"), ("counts", "list[tuple[int, int, int, int]]?"),
        ("decrypted", "int"), ("dirs", "list[@TlsDirection]#2"), ("problem", "str?"), ("refused", "set[bytes]"),
        ("before_trial", "int?"), ("trial_work", "int"), ("trialled", "bool"), ("trials", "int"),
        ("unconfirmed", "bool"), ("start_captured", "bool"), ("client_random", "bytes?"),
        ("server_random", "bytes?"), ("version", "int?"), ("suite", "int?"), ("server_name", "str?"),
        ("alpn", "list[str]?"), ("_cert", "tuple[str, str, str]?"), ("_cert_der", "bytes?"),
        ("handshake_seen", "bool"), ("notes", "list[str]"), ("etm", "bool"), ("ja3", "str?"), ("ja4", "str?")),
    "TlsDirection": (
        ("session", "@TlsSession"), ("d", "dir"), ("keys", "none"), ("secret", "none"),
        ("held", "tuple[int, bytes, int, int, int]?"), ("after_gap", "bool"), ("buf", "bytearray"),
        ("carried_seq", "int"), ("choice", "int"), ("dead", "bool"), ("encrypted", "bool"), ("gap_bytes", "int"),
        ("hs", "bytearray"), ("key_updates", "int"), ("lost", "bool"), ("missing", "int"), ("other", "int"),
        ("phase", "str"), ("read", "int"), ("rec_num", "int"), ("rec_ts", "int"), ("scan_from", "int"),
        ("suspect", "int"), ("tried", "int"), ("undecrypted", "int"), ("verified", "bool")),
}

#: fields that are another record's field itself (not a copy): the reassembler's table is its
#: finder's; a TLS session writes its plaintext to its connection state's framers
LINKS: Final = (("Reassembler", "table", "found", "table"), ("ConnState", "framers", "tls_session", "outputs"))


def linked(kind: str, obj: Any) -> None:
    """A record's links made again after reading (LINKS), and the shared constant a fresh half
    stream's holes are (copied at its first gap)."""
    for owner, field, part, name in LINKS:
        if kind == owner:
            held = getattr(obj, part)
            if held is not None:
                setattr(held, name, getattr(obj, field))
    if kind == "HalfStream":
        from .wire.halfstream import BEFORE_START

        if obj.holes == BEFORE_START:
            obj.holes = BEFORE_START


def check_links(kind: str, obj: Any) -> None:
    for owner, field, part, name in LINKS:
        if kind == owner:
            held = getattr(obj, part)
            if held is not None and getattr(held, name) is not getattr(obj, field):
                raise StateError(f"{kind}.{part}.{name} is not {kind}.{field}")


#: the callbacks a state may hold: (record type, method name) -> the types of a partial's arguments
METHODS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("Side_", "first_bytes"): (), ("Side_", "frame"): (), ("Side_", "plausible"): (),
    ("Decoder", "_tls_client"): ("ConnState",), ("Decoder", "_settle"): ("ConnState",),
}


def declared_classes() -> dict[str, type]:
    """Record type -> the class it is made of (imported here, not named by any file)."""
    from .decode.connstate import ConnState, Endpoints, Request
    from .decode.exchanges import Decoder, _Side
    from .decode.roles import Roles
    from .kafka.body import Facts
    from .kafka.headers import RequestHeader
    from .kafka.topicids import TopicIds
    from .tls.budget import TrialBudget
    from .tls.direction import TlsDirection
    from .tls.guess import TlsGuess
    from .tls.session import TlsSession
    from .wire.frames import Accounting, Frame, Framer
    from .wire.halfstream import HalfStream
    from .wire.health import Health, Side
    from .wire.loss import Holes, Numbering
    from .wire.tcp import Connection, Found, Held, Reassembler, Recent

    return {"Reassembler": Reassembler, "Found": Found, "Recent": Recent, "Held": Held, "Connection": Connection,
            "HalfStream": HalfStream, "Health": Health, "Side": Side, "Holes": Holes, "Numbering": Numbering,
            "Framer": Framer, "Accounting": Accounting, "Frame": Frame, "Decoder": Decoder, "Side_": _Side,
            "Roles": Roles, "TopicIds": TopicIds, "TrialBudget": TrialBudget,
            "ConnState": ConnState, "Endpoints": Endpoints, "Request": Request, "RequestHeader": RequestHeader,
            "Facts": Facts, "TlsGuess": TlsGuess, "TlsSession": TlsSession, "TlsDirection": TlsDirection}


def _nothing(*_args: object) -> None:
    return None


def blank_makers() -> dict[str, Callable[[], object]]:
    """How to make a blank record of each type: its constructor with placeholder arguments (every
    declared field is set after)."""
    c = declared_classes()

    def conn():
        return c["Connection"]((b"", 0), (b"", 0), 0, 0)

    def frame():
        return c["Frame"](0, 0, 0, 0, b"", False)

    made: dict[str, Callable[[], object]] = {
        "Reassembler": lambda: c["Reassembler"](None), "Found": lambda: c["Found"]({}), "Recent": c["Recent"],
        "Held": c["Held"], "Connection": conn, "HalfStream": lambda: c["HalfStream"](None, 0),
        "Health": c["Health"], "Side": c["Side"], "Holes": c["Holes"], "Numbering": c["Numbering"],
        "Framer": lambda: c["Framer"](_nothing), "Accounting": c["Accounting"], "Frame": frame,
        "Decoder": lambda: c["Decoder"](None),
        "Side_": lambda: c["Side_"](c["Decoder"](None), c["ConnState"](conn()), 0),
        "Roles": c["Roles"], "TopicIds": c["TopicIds"], "TrialBudget": lambda: c["TrialBudget"](0, 0),
        "ConnState": lambda: c["ConnState"](conn()),
        "Endpoints": lambda: c["Endpoints"]("", 0, "", 0, ""), "Request": lambda: c["Request"](frame(), None, None),
        "RequestHeader": lambda: c["RequestHeader"](0, 0, 0, None, None, 0), "Facts": c["Facts"],
        "TlsGuess": lambda: c["TlsGuess"](_nothing), "TlsSession": lambda: c["TlsSession"](None, [], None),
        "TlsDirection": lambda: c["TlsDirection"](None, 0)}
    return made


def declarations() -> dict[str, tuple[tuple[str, str], ...]]:
    return RECORDS


@functools.lru_cache(maxsize=1)
def digest() -> str:
    """sha256 of the declarations: a state written under other declarations is refused."""
    import hashlib
    import json

    text = json.dumps({"format": FORMAT, "records": declarations(),
                       "methods": sorted([*k, *v] for k, v in METHODS.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()




def markdown() -> str:
    """The declarations as docs/state.md's tables (a test holds the doc to them)."""
    lines = ["| record | field | type |", "|---|---|---|"]
    for name, fields in RECORDS.items():
        for i, (field, t) in enumerate(fields):
            lines.append(f"| {name if i == 0 else ''} | `{field}` | `{t}` |")
    lines += ["", "| callback (record, method) | its partial's arguments |", "|---|---|"]
    lines += [f"| `{k[0]}.{k[1]}` | {', '.join(v) or '(none)'} |" for k, v in METHODS.items()]
    return "\n".join(lines) + "\n"
