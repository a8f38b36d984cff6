"""A read's open connections carried into a later read of the same rotation series.

A stream reads a rotating capture directory file by file as the files complete, and the audit job's
``--incremental`` runs read each night's new files: a connection open at the end of one read goes on
in the next read's first file. Where a read is given a place to leave its state (a :class:`Carry`),
it does not end its open connections at its last file: it holds them as at a file boundary of a
series (tcp.Held), writes the decoder's and the reassembler's state there, and the read of the
series' next file takes it and goes on, as if the files had been read in one go. The rows of the
connections carried come once, from the read in which they end.

What is written, and what is not:

* The stages' objects as they are (pickled; compiled ones through their attribute dicts, see
  ``_Pickler``), without the row builder (the later read brings its own), the TLS key log and every
  key made from it: a TLS direction keeps only its record sequence number and the KeyUpdates since its
  traffic secret, and the later read makes the keys again from its key log (TlsSession.rekey). A
  state that would still hold a key log or record keys is refused whole (``_NEVER``).
* No secret: a connection whose bytes in flight may belong to a message with a secret field (SASL
  tokens, delegation-token HMACs, SCRAM credentials) is not carried (ConnState.uncarried says why);
  it ends at the cut, as at a capture's end. Carried connections drop the texts of their earlier
  secrets, which sealed later bodies that repeat them.
* A connection silent for more than IDLE_NS at the cut ends there: brokers close idle connections
  after 10 minutes (``connections.max.idle.ms``), so one silent longer has ended unseen.

A state file is read back only by this module's unpickler, which builds nothing but the stages'
own classes (``_Unpickler.find_class``); it lives in the user's own state directory, beside the
stream's checkpoint.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sys
from functools import partial
from typing import Any, Callable, Final

FORMAT: Final = 1
MAGIC: Final = b"kafkawire carried state 1\n"
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
            _warn(f"{e}; the files after it are read without it (their connections as begun before the capture)")
            return None
        if carried.shapes != shapes:
            _warn(f"state {self.take} was left for rows {', '.join(carried.shapes)}, not {', '.join(shapes)}: "
                  "not used")
            return None
        return carried

    def save(self, carried: Carried, last_ns: int | None) -> None:
        """The state, then its index entry (a state is found by its entry: written last)."""
        if self.leave is None:
            return
        write_bytes(self.leave, dumps(carried), self.endpoint)
        entry = {"v": FORMAT, "last_file": carried.files[-1], "files": len(carried.files), "began": carried.began,
                 "last": last_ns, "template": list(self.template) if self.template else None,
                 "continues": self.continues}
        write_bytes(index_path(self.leave), json.dumps(entry).encode(), self.endpoint)


def _warn(text: str) -> None:
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
        if isinstance(entry, dict) and entry.get("v") == FORMAT:
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
            return f.read()
    fs, p = resolve(path, endpoint)
    with fs.open_input_stream(p) as f:
        return f.read()


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
    """The state as bytes: the row sink, key log and keys let go first (see the module's docstring)."""
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
        buf = io.BytesIO()
        buf.write(MAGIC)
        try:
            _Pickler(buf, protocol=5).dump(carried)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as e:
            raise CarryError(f"the open connections could not be written ({e})") from e
        return buf.getvalue()
    finally:
        d.sink, d.connection_row, d.keylog = kept


def loads(data: bytes, name: str = "state") -> Carried:
    if not data.startswith(MAGIC):
        raise CarryError(f"state {name}: not a kafkawire state of this version")
    try:
        carried = _Unpickler(io.BytesIO(data[len(MAGIC):])).load()
    except CarryError as e:
        raise CarryError(f"state {name}: {e}") from e
    except Exception as e:  # (a damaged file: any error of the unpickler)
        raise CarryError(f"state {name} could not be read ({type(e).__name__}: {e})") from e
    if not isinstance(carried, Carried):
        raise CarryError(f"state {name}: not a kafkawire state")
    return carried


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _Pickler(pickle.Pickler):
    """Compiled (native) classes are not made by pickle's own means (their constructor runs
    ``__init__``): each is written as its attributes (``__getstate__``, which the compiler gives
    them) and made again blank by :func:`_blank`, then given them. Bound methods are written as
    their object and name (:func:`_method`)."""

    def reducer_override(self, obj):
        cls = type(obj)
        if _name(cls) in _NEVER:
            raise CarryError(f"{_name(cls)} holds key material: never written")
        if hasattr(cls, "__mypyc_attrs__"):
            name = _name(cls)
            if name not in _blanks():
                raise CarryError(f"{name} is not carried")
            return _blank, (name,), obj.__getstate__()
        owner = getattr(obj, "__self__", None)
        if owner is not None and callable(obj) and not isinstance(obj, type) and \
                type(owner).__module__.startswith("spark_kafkawire."):
            return _method, (owner, obj.__name__)
        return NotImplemented


#: what a state may never hold: a key log, record keys (stash() lets them go first; this is the guard)
_NEVER: Final = frozenset({"spark_kafkawire.tls.keylog.KeyLog", "spark_kafkawire.tls.keys.RecordKeys",
                           "spark_kafkawire.tls.keys.CbcKeys"})
_ALLOWED: Final = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
                   ("collections", "deque"), ("collections", "OrderedDict"), ("functools", "partial")}


class _Unpickler(pickle.Unpickler):
    """Builds the stages' own classes and nothing else."""

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED or module == __name__ and name in ("_blank", "_method", "Carried"):
            return super().find_class(module, name)
        if module.startswith("spark_kafkawire."):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise CarryError(f"{module}.{name} is not a part of a kafkawire state")


def _method(owner: object, name: str):
    if name.startswith("__") or not type(owner).__module__.startswith("spark_kafkawire."):
        raise CarryError(f"method {name} is not a part of a kafkawire state")
    return getattr(owner, name)


def _blank(name: str):
    made = _blanks().get(name)
    if made is None:
        raise CarryError(f"{name} is not a part of a kafkawire state")
    return made()


def _nothing(*_args) -> None:
    return None


_BLANKS: dict[str, Callable[[], object]] = {}
_NO_SINK: Any = None  # (placeholders of the blank objects' arguments)
_NO_SESSION: Any = None


def _blanks() -> dict[str, Callable[[], object]]:
    """How to make a blank object of each compiled class a state holds (its attributes are set
    after: these arguments are placeholders)."""
    if _BLANKS:
        return _BLANKS
    from .decode.connstate import ConnState, Endpoints, Request, Response
    from .decode.exchanges import Decoder, _Side
    from .decode.roles import Roles
    from .kafka.body import Facts
    from .kafka.headers import RequestHeader
    from .kafka.topicids import TopicIds
    from .tls.guess import TlsGuess
    from .tls.direction import TlsDirection
    from .wire.frames import Accounting, Frame, Framer
    from .wire.halfstream import HalfStream
    from .wire.health import Health, Side
    from .wire.loss import Holes, Numbering
    from .wire.tcp import Connection, Found, Held, Reassembler, Recent

    def conn() -> Connection:
        return Connection((b"", 0), (b"", 0), 0, 0)

    def frame() -> Frame:
        return Frame(0, 0, 0, 0, b"", False)

    made: dict[type, Callable[[], object]] = {
        ConnState: lambda: ConnState(conn()), Endpoints: lambda: Endpoints("", 0, "", 0, ""),
        Request: lambda: Request(frame(), None, None), Response: lambda: Response(frame(), None, None),
        Decoder: lambda: Decoder(_NO_SINK), _Side: lambda: _Side(Decoder(_NO_SINK), ConnState(conn()), 0),
        Roles: Roles, Facts: Facts, RequestHeader: lambda: RequestHeader(0, 0, 0, None, None, 0),
        TopicIds: TopicIds, TlsGuess: lambda: TlsGuess(_nothing),
        TlsDirection: lambda: TlsDirection(_NO_SESSION, 0), Accounting: Accounting, Frame: frame,
        Framer: lambda: Framer(_nothing), HalfStream: lambda: HalfStream(None, 0), Health: Health, Side: Side,
        Holes: Holes, Numbering: Numbering, Connection: conn, Found: lambda: Found({}), Held: Held,
        Reassembler: lambda: Reassembler(_NO_SINK), Recent: Recent}
    _BLANKS.update({_name(cls): f for cls, f in made.items() if hasattr(cls, "__mypyc_attrs__")})
    _BLANKS["-"] = partial(_nothing)  # (known, even where nothing is compiled)
    return _BLANKS
