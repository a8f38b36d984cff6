"""A read's open connections carried into a later read of the same rotation series.

A stream reads a rotating capture directory file by file as the files complete, and the audit job's
``--incremental`` runs read each night's new files: a connection open at the end of one read goes on
in the next read's first file. Where a read is given a place to leave its state (a :class:`Carry`),
it does not end its open connections at its last file: it holds them as at a file boundary of a
series (tcp.Held), writes the decoder's and the reassembler's state there, and the read of the
series' next file takes it and goes on, as if the files had been read in one go. The rows of the
connections carried come once, from the read in which they end.

What is written, and what is not:

* The stages' declared fields (statefile.py: records of plain values, never objects), without the
  row builder (the later read brings its own), the TLS key log and every
  key made from it: a TLS direction keeps only its record sequence number and the KeyUpdates since its
  traffic secret, and the later read makes the keys again from its key log (TlsSession.rekey). A
  state that would still hold a key log or record keys is refused whole (``_NEVER``).
* No secret: a connection whose bytes in flight may belong to a message with a secret field (SASL
  tokens, delegation-token HMACs, SCRAM credentials) is not carried (ConnState.uncarried says why);
  it ends at the cut, as at a capture's end. Carried connections drop the texts of their earlier
  secrets, which sealed later bodies that repeat them.
* A connection silent for more than IDLE_NS at the cut ends there: brokers close idle connections
  after 10 minutes (``connections.max.idle.ms``), so one silent longer has ended unseen.

A state file is read back only through statefile.load, which builds nothing but the declared
records and refuses, by name, a state of another format or other declarations (its connections
then end at the cut, as uncarried ones do); it lives in the user's own state directory, beside the
stream's checkpoint. ``kafkawire state DIR`` says what a state directory holds.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Final

from . import statefile

FORMAT: Final = statefile.FORMAT
MAGIC: Final = statefile.MAGIC
#: the version of a state's index entry (its .json beside the state file)
INDEX_FORMAT: Final = 1
#: a connection silent this long at a cut ends there (brokers close idle ones after 10 minutes)
IDLE_NS: Final = 3600 * 10**9


class CarryError(Exception):
    """A state could not be written or read (the message says which file and why)."""


class Carried:
    """What a read of a series' files leaves for the read of its next files: the files read so far
    (their rows name them by their index), the first packet time of the last one (series.overlaps),
    the row shapes it was made for, and the stages."""

    def __init__(self, files: list[str], began: int | None, shapes: tuple[str, ...], decoder, reasm):
        self.files = files
        self.began = began
        self.shapes = shapes
        self.decoder = decoder
        self.reasm = reasm

    def counts(self) -> dict[str, int]:
        """What waits in this state for the series' next file: open connections, requests without
        their response yet, bytes of frames in progress (the index entry's, for the audit report)."""
        conns = requests = held = 0
        for conn in self.reasm.live:
            conns += 1
            st = conn.state
            if st is not None:
                requests += len(st.pending)
                held += sum(len(f.buf) for f in getattr(st, "framers", []))
        return {"connections": conns, "requests": requests, "frame_bytes": held}

    def attach(self, sink, keylog) -> None:
        """After loading: the later read's row sink and key log in place of those let go."""
        d = self.decoder
        d.sink = sink
        d.connection_row = getattr(sink, "connection", None)
        d.keylog = keylog
        for conn in self.reasm.live:
            st = conn.state
            if st is not None and st.tls_session is not None:
                st.tls_session.rekey(keylog)


class Carry:
    """Where a read takes the state of its series from (``take``: a state file; None: from scratch)
    and where it leaves its own (``leave``; None: its open connections end at its last file, as at a
    capture's end). Paths are local or URIs (``endpoint`` as option endpointUrl)."""

    def __init__(self, take: str | None, leave: str | None, endpoint: str | None = None,
                 continues: str | None = None, template: tuple[str, str] | None = None):
        self.take = take
        self.leave = leave
        self.endpoint = endpoint
        self.continues = continues  # the key of the state taken (written in the new state's index)
        self.template = template

    def load(self, shapes: tuple[str, ...]) -> Carried | None:
        """The state to go on from, or None (none given; or one that cannot be used: said on stderr,
        and the read begins from scratch, its connections' starts not seen)."""
        if self.take is None:
            return None
        try:
            carried = loads(read_bytes(self.take, self.endpoint), self.take)
        except (CarryError, OSError) as e:
            warn_user(f"{e}; the files after it are read without it (their connections as begun before the capture)")
            return None
        if carried.shapes != shapes:
            warn_user(f"state {self.take} was left for rows {', '.join(carried.shapes)}, not {', '.join(shapes)}: "
                  "not used")
            return None
        return carried

    def save(self, carried: Carried, last_ns: int | None) -> None:
        """The state, then its index entry (a state is found by its entry: written last)."""
        if self.leave is None:
            return
        write_bytes(self.leave, dumps(carried), self.endpoint)
        entry = {"v": INDEX_FORMAT, "format": FORMAT, "last_file": carried.files[-1], "files": len(carried.files),
                 "began": carried.began,
                 "last": last_ns, "template": list(self.template) if self.template else None,
                 "continues": self.continues, **carried.counts()}
        write_bytes(index_path(self.leave), json.dumps(entry).encode(), self.endpoint)


def warn_user(text: str) -> None:
    from .escape import printable

    print(f"kafkawire: {printable(text)}", file=sys.stderr, flush=True)


# -- state files in a state directory -----------------------------------------------------------
def key_of(last_file: str) -> str:
    """A state's name: from the path of the last file read into it."""
    import hashlib

    return hashlib.sha256(last_file.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def state_path(folder: str, key: str) -> str:
    return f"{folder.rstrip('/')}/{key}.carry"


def index_path(state: str) -> str:
    return state[: -len(".carry")] + ".json" if state.endswith(".carry") else state + ".json"


def entries(folder: str, endpoint: str | None = None) -> dict[str, dict]:
    """key -> index entry of every state in a state directory (none: an empty dict)."""
    from .wire.fs import local_path, resolve

    out: dict[str, dict] = {}
    local = local_path(folder)
    if local is not None:
        try:
            names = [n for n in os.listdir(local) if n.endswith(".json")]
        except FileNotFoundError:
            return out
        texts = {n[:-5]: _read_local(os.path.join(local, n)) for n in names}
    else:
        import pyarrow.fs as pafs

        fs, base = resolve(folder, endpoint)
        try:
            infos = fs.get_file_info(pafs.FileSelector(base.rstrip("/"), allow_not_found=True))
        except OSError:
            return out
        texts = {}
        for info in infos:
            if info.base_name.endswith(".json"):
                with fs.open_input_stream(info.path) as f:
                    texts[info.base_name[:-5]] = f.read()
    for key, text in texts.items():
        try:
            entry = json.loads(text) if text is not None else None
        except ValueError:
            entry = None
        if isinstance(entry, dict) and entry.get("v") == INDEX_FORMAT:
            out[key] = entry
    return out


def _read_local(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read_bytes(path: str, endpoint: str | None = None) -> bytes:
    from .wire.fs import local_path, resolve

    local = local_path(path)
    if local is not None:
        with open(local, "rb") as f:
            return _bounded(f.read(statefile.MAX_STATE_BYTES + 1), path)
    fs, p = resolve(path, endpoint)
    with fs.open_input_stream(p) as f:
        return _bounded(f.read(statefile.MAX_STATE_BYTES + 1), path)


def _bounded(data: bytes, path: str) -> bytes:
    if len(data) > statefile.MAX_STATE_BYTES:
        raise CarryError(f"state {path} is larger than {statefile.MAX_STATE_BYTES} bytes: not read")
    return data


def write_bytes(path: str, data: bytes, endpoint: str | None = None) -> None:
    """Written whole or not at all: a local file through a temporary beside it, renamed; on object
    storage one put."""
    from .wire.fs import local_path, resolve

    local = local_path(path)
    if local is not None:
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
        tmp = f"{local}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, local)
        return
    fs, p = resolve(path, endpoint)
    with fs.open_output_stream(p) as f:
        f.write(data)


def delete(folder: str, key: str, endpoint: str | None = None) -> None:
    """A state and its index entry, gone (one not there: nothing to do)."""
    from .wire.fs import local_path, resolve

    for path in (state_path(folder, key), index_path(state_path(folder, key))):
        local = local_path(path)
        try:
            if local is not None:
                os.remove(local)
            else:
                fs, p = resolve(path, endpoint)
                fs.delete_file(p)
        except (FileNotFoundError, OSError):
            pass


# -- the stages as bytes and back ------------------------------------------------------------------
def prepare(decoder, reasm, newest: int | None) -> list:
    """The open connections that may not be carried (ConnState.uncarried; silent for IDLE_NS before
    ``newest``): each to be ended at the cut by the caller."""
    out = []
    for conn in list(reasm.live):
        st = conn.state
        if st is not None and st.uncarried() is not None or \
                newest is not None and newest - conn.last_ts > IDLE_NS:
            out.append(conn)
    return out


def dumps(carried: Carried) -> bytes:
    """The state as bytes (statefile.py): the row sink, key log and keys let go first (see the
    module's docstring)."""
    d = carried.decoder
    kept = (d.sink, d.connection_row, d.keylog)
    d.sink = d.connection_row = d.keylog = None
    try:
        for conn in carried.reasm.live:
            st = conn.state
            if st is not None:
                st.secrets = None
                st.tested = None
                if st.tls_session is not None:
                    st.tls_session.stash()
        try:
            return statefile.dump({"files": list(carried.files), "began": carried.began,
                                   "shapes": list(carried.shapes)}, {"decoder": d, "reasm": carried.reasm})
        except (statefile.StateError, RecursionError) as e:
            raise CarryError(f"the open connections could not be written ({e})") from e
    finally:
        d.sink, d.connection_row, d.keylog = kept


def loads(data: bytes, name: str = "state") -> Carried:
    """A state file's stages, built from its declared records only (statefile.load); any state this
    version cannot read is refused by name (CarryError)."""
    try:
        body, roots = statefile.load(data, name, ("decoder", "reasm"))
    except statefile.StateError as e:
        raise CarryError(str(e)) from e
    except RecursionError as e:
        raise CarryError(f"state {name} could not be read (nested too deep)") from e
    files, began, shapes = body.get("files"), body.get("began"), body.get("shapes")
    if not (isinstance(files, list) and files and all(isinstance(f, str) for f in files)
            and (began is None or type(began) is int)
            and isinstance(shapes, list) and all(isinstance(x, str) for x in shapes)):
        raise CarryError(f"state {name}: its files, first time or row shapes are not as declared")
    reasm = roots["reasm"]
    if reasm.listener is not roots["decoder"]:  # type: ignore[attr-defined]
        raise CarryError(f"state {name}: its reassembler does not feed its decoder")
    return Carried(files, began, tuple(shapes), roots["decoder"], reasm)


def waiting(folder: str, endpoint: str | None = None) -> dict[str, int]:
    """What the states of a state directory hold for their series' next files, summed over them:
    states, open connections, requests waiting for a response, bytes of frames in progress (from
    the index entries; a state written before they were counted counts as none)."""
    out = {"states": 0, "connections": 0, "requests": 0, "frame_bytes": 0}
    for entry in entries(folder, endpoint).values():
        out["states"] += 1
        for k in ("connections", "requests", "frame_bytes"):
            v = entry.get(k)
            out[k] += v if type(v) is int and v >= 0 else 0
    return out


# -- what a state directory holds (kafkawire state DIR) ---------------------------------------------
def describe(folder: str, endpoint: str | None = None) -> list[str]:
    """What a state directory holds, as lines a person reads: each series' state, the last file read
    into it, whether this version reads it (and why not), and the connections it carries with the
    bytes they hold in flight. Names from captures are escaped for the terminal."""
    import datetime

    from .escape import printable

    def when(ns: object) -> str:
        if type(ns) is not int:
            return "unknown"
        return datetime.datetime.fromtimestamp(ns / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")

    found = entries(folder, endpoint)
    lines = [f"{printable(folder)}: {len(found)} series state{'s' if len(found) != 1 else ''}"]
    for key, entry in sorted(found.items(), key=lambda kv: str(kv[1].get("last_file"))):
        path = state_path(folder, key)
        lines.append(f"series {key}: {entry.get('files')} files read, the last {printable(str(entry.get('last_file')))}"
                     f" (its first packet {when(entry.get('began'))}; last packet seen {when(entry.get('last'))})")
        try:
            data = read_bytes(path, endpoint)
            carried = loads(data, path)
        except (CarryError, OSError) as e:
            lines.append(f"  not readable by this version: {printable(str(e))}")
            continue
        try:
            head = statefile.header_of(data, path)
        except statefile.StateError:
            head = {}
        live = list(carried.reasm.live)
        lines.append(f"  {len(data)} bytes, state format {head.get('format')}, written by spark-kafkawire "
                     f"{printable(str(head.get('package')))}, left for rows {', '.join(carried.shapes)}; "
                     f"{len(live)} open connection{'s' if len(live) != 1 else ''} carried")
        for conn in live:
            st = conn.state
            ends = [f"{_address(x)}" for x in (conn.a, conn.b)]
            if conn.client == 1:
                ends.reverse()
            framers = getattr(st, "framers", []) if st is not None else []
            held = sum(len(f.buf) for f in framers)
            waiting = len(st.pending) if st is not None else 0
            tls = " TLS," if st is not None and st.tls_session is not None else ""
            lines.append(f"    {ends[0]} -> {ends[1]}:{tls} since {when(conn.first_ts)}, last packet "
                         f"{when(conn.last_ts)}, {held} bytes of a frame in progress, {waiting} "
                         f"request{'s' if waiting != 1 else ''} waiting for a response")
    return lines


def _address(end: tuple) -> str:
    import ipaddress

    addr, port = end
    try:
        ip = str(ipaddress.ip_address(addr))
    except ValueError:
        ip = addr.hex()
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
