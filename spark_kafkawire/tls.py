"""TLS: recognising a connection that carries it, reading its handshake, decrypting its records.

A TLS record starts with a content type (20-23), a protocol version 3.x and a length no larger than
a record may be. A connection whose first bytes in a direction are such a header is *guessed* to be
TLS, and its bytes are held (:class:`TlsGuess`) until the guess is confirmed (two records chained,
or both directions starting with a whole record) or refuted (what follows the first record is not a
record header): a plaintext Kafka stream that merely starts like a record header stays Kafka.

A confirmed connection's two directions go to a :class:`TlsSession` (in place of the Kafka
framers): it reads the handshake in clear (version, suite, server name, ALPN, JA3, certificate) and,
with the session's secrets from a key log, decrypts the records into two new framers
(``outputs``). Record protection itself is tlscrypto.py's.

What the stage promises, whatever the bytes:

* progress: every step consumes bytes or ends the direction, and what is held waiting is bounded
  (one record and the next header), so a read takes time linear in its input;
* every captured byte of a direction is counted once: in a record read (``read``: in clear or
  decrypted), in a record not decrypted (``undecrypted``), or in no record read (``other``: passed
  over while finding a record boundary, before the connection was known to be TLS, late copies); the
  bytes the capture lost are ``gap``;
* a decrypted frame belongs to its connection: keys come from this connection's handshake, or from
  a trial that verified on this connection with a session no other connection has claimed;
* handshake and certificate bytes that do not parse give a detail, never an exception.
"""

from __future__ import annotations

from struct import Struct
from typing import Any, Callable, Iterator

from .tlscrypto import SUITES, TLS13, Keys, next_secret, suite_fits, tls12_keys, tls13_keys

CONTENT_TYPES = {0x14: "TLS change_cipher_spec", 0x15: "TLS alert", 0x16: "TLS handshake",
                 0x17: "TLS application data"}
MAX_RECORD = 18432  # 2^14 plus the expansion TLS allows
RECORD_VERSIONS = {0: "SSL 3.0", 1: "TLS 1.0", 2: "TLS 1.1", 3: "TLS 1.2 or 1.3", 4: "TLS 1.3"}
VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA = 22, 20, 21, 23
CLIENT_HELLO, SERVER_HELLO, CERTIFICATE, FINISHED, KEY_UPDATE = 1, 2, 11, 20, 24
#: the random of a HelloRetryRequest (RFC 8446 4.1.3): not a ServerHello that settles the session
HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
MAX_HANDSHAKE_BUFFER = 1 << 18  # a certificate chain larger than this is not read
RESYNC_RECORDS = 4096  # after a gap: record sequence numbers tried per candidate record
RESYNC_CANDIDATES = 8  # after a gap: record headers tried before giving the direction up
RESYNC_BUDGET = 1 << 16  # trial decryptions per connection, all gaps together
MIN_PROTECTED = 22  # the smallest protected record: header, tag and (TLS 1.3) the inner content type
SUSPECT_WINDOW = 4  # after records that did not verify: later sequence numbers tried for the next one
TRIAL_RECORDS = 2048  # without the handshake: record sequence numbers tried (TLS 1.3), from 0
TRIAL_BUDGET = 1 << 16  # without the handshake: trial decryptions per connection (option tlsTrialBudget)
TRIAL_TASK_BUDGET = 1 << 22  # ... and per task, all connections together (option tlsTrialTaskBudget)
NO_KEY_LOG = "no key log given (option tlsKeyLog, or a pcapng Decryption Secrets Block)"

_U16 = Struct("!H")
_U24 = Struct("!I")


def record_header(chunk: bytes | bytearray, pos: int = 0) -> str | None:
    """What a TLS record header at ``pos`` of ``chunk`` says (for a row's detail), or None when
    the bytes are not one."""
    if _record_length(chunk, pos) < 0:
        return None
    return f"{CONTENT_TYPES[chunk[pos]]} record, {RECORD_VERSIONS[chunk[pos + 2]]}: the connection is encrypted"


def _record_length(b: bytes | bytearray, pos: int) -> int:
    """The length of the record whose header is at ``pos``, or -1 where there is none (or fewer
    than five bytes)."""
    if len(b) - pos < 5 or b[pos] not in CONTENT_TYPES or b[pos + 1] != 3 or b[pos + 2] not in RECORD_VERSIONS:
        return -1
    n = _U16.unpack_from(b, pos + 3)[0]
    return n if n <= MAX_RECORD else -1


def _header_prefix(b: bytes | bytearray, pos: int) -> bool:
    """Could the (fewer than five) bytes from ``pos`` begin a record header?"""
    rest = b[pos:pos + 3]
    return (len(rest) < 1 or rest[0] in CONTENT_TYPES) and (len(rest) < 2 or rest[1] == 3) and \
        (len(rest) < 3 or rest[2] in RECORD_VERSIONS)


# -- the guess -------------------------------------------------------------------------------------

class TlsGuess:
    """A connection one of whose directions began with a TLS record header: that direction's
    bytes (and the other's, if it begins with one too) are held until the guess is settled, then
    handed, in order, to ``on_decide(tls)``'s choice of sinks (see :meth:`replay`).

    Confirmed: a whole record followed by another record's header in one direction, or a whole
    record at the start of each direction. Refuted: a whole record followed by bytes that are not a
    record header. When a direction has a gap or ends first, what it holds decides: a whole first
    record, followed by nothing or the start of a header, confirms. At most a record and a header
    (18,442 bytes) are held per direction before the guess is settled."""

    __slots__ = ("on_decide", "sides", "decided")

    def __init__(self, on_decide: Callable[[bool], None]):
        self.on_decide: Callable[[bool], None] | None = on_decide
        self.sides: list[_GuessSide | None] = [None, None]
        self.decided: bool | None = None

    def side(self, d: int) -> "_GuessSide":
        s = self.sides[d]
        if s is None:
            s = self.sides[d] = _GuessSide(self, d)
        return s

    def check(self) -> None:
        if self.decided is not None:
            return
        verdicts = [s.verdict() for s in self.sides if s is not None]
        if False in verdicts:
            self._decide(False)
        elif True in verdicts:
            self._decide(True)
        elif all(s is not None and s.whole_records() for s in self.sides):
            self._decide(True)

    def _decide(self, tls: bool) -> None:
        self.decided = tls
        on_decide = self.on_decide
        if on_decide is not None:
            on_decide(tls)  # (it replays what the sides hold)
        # no reference cycle is left (sides and guess link each other, on_decide the connection)
        self.on_decide = None
        self.sides = [None, None]

    def replay(self, d: int, sink) -> None:
        """Hand direction d's held events to ``sink`` (the TLS direction or the Kafka framer)."""
        s = self.sides[d]
        if s is None:
            return
        events, s.events = s.events, []
        for ev in events:
            if ev[0] == 0:
                sink.data(ev[1], ev[2], ev[3])
            elif ev[0] == 1:
                sink.gap(ev[1], ev[2], ev[3])
            elif ev[0] == 2:
                sink.late(ev[1], ev[4], ev[2], ev[3])
        if s.ended:
            sink.end()


class _GuessSide:
    """The sink of one direction while the guess is open: its events, held in order."""

    __slots__ = ("guess", "d", "events", "head", "ended", "stopped")

    def __init__(self, guess: TlsGuess, d: int):
        self.guess = guess
        self.d = d
        self.events: list[tuple] = []
        self.head = bytearray()  # the direction's bytes before its first gap, late copy or end
        self.ended = False
        self.stopped = False  # a gap, a late copy or the end came after head

    def verdict(self) -> bool | None:
        """True: this direction is TLS; False: it is not; None: not known yet."""
        b = self.head
        n = _record_length(b, 0)
        if n < 0:
            return False if len(b) >= 5 or not _header_prefix(b, 0) else (None if not self.stopped else False)
        end = 5 + n
        if len(b) < end:
            return False if self.stopped else None
        if len(b) >= end + 5:
            return _record_length(b, end) >= 0
        if not _header_prefix(b, end):
            return False
        return True if self.stopped else None

    def whole_records(self) -> bool:
        n = _record_length(self.head, 0)
        return n >= 0 and len(self.head) >= 5 + n

    # -- sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        pass

    def data(self, chunk: bytes, ts: int, number: int) -> None:
        self.events.append((0, bytes(chunk), ts, number))
        if not self.stopped:
            self.head += chunk
        self.guess.check()

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        self.events.append((1, nbytes, ts, number))
        self.stopped = True
        self.guess.check()

    def late(self, nbytes: int, reported: int, ts: int, number: int) -> None:
        self.events.append((2, nbytes, ts, number, reported))
        self.stopped = True
        self.guess.check()

    def end(self) -> None:
        self.ended = True
        self.stopped = True
        self.guess.check()
        if self.guess.decided is None:  # the other direction has not settled it: this one does
            self.guess._decide(self.verdict() is True)


# -- sessions --------------------------------------------------------------------------------------

class TrialBudget:
    """What the handshake-less trial may still spend: per connection (``per_connection``) and for
    the whole task (``task_left``, shared by every session of a read)."""

    __slots__ = ("per_connection", "task_left")

    def __init__(self, per_connection: int = TRIAL_BUDGET, task: int = TRIAL_TASK_BUDGET):
        self.per_connection = per_connection
        self.task_left = task


class Handshake:
    """What a TLS handshake says in clear (hellos, certificate): the negotiated version and suite,
    the randoms the key log is looked up by, server name, ALPN, the client's JA3 fingerprint, the
    certificate; ``notes`` for what could not be read. A TlsSession is a Handshake with the keys and
    the two directions' records."""

    keylog: Any  # the KeyLog (claimed by a ClientHello's random), or None
    client_dir: int | None
    on_client: Callable[[int], None] | None

    def __init__(self) -> None:
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        self.version: int | None = None  # negotiated
        self.suite: int | None = None
        self.server_name: str | None = None
        self.alpn: list[str] | None = None
        self.offered_versions: list[int] = []
        self.cert: tuple[str, str, str] | None = None  # subject, issuer, not after (ISO date)
        self.ja3: str | None = None  # the client's fingerprint (see ja3)
        self.handshake_seen = False  # the ClientHello is in the capture
        self.notes: list[str] = []  # handshake facts that could not be read
        self.etm = False  # encrypt-then-MAC agreed (CBC suites)

    # -- what the handshake says ---------------------------------------------------------------
    @property
    def version_name(self) -> str | None:
        return VERSIONS.get(self.version) if self.version is not None else None

    @property
    def suite_name(self) -> str | None:
        if self.suite is None:
            return None
        return SUITES.get(self.suite, (f"0x{self.suite:04X}",))[0]

    def _hello(self, d: int, msg_type: int, body: bytes) -> None:
        what = {CLIENT_HELLO: "ClientHello", SERVER_HELLO: "ServerHello", CERTIFICATE: "certificate"}[msg_type]
        try:
            if msg_type == CLIENT_HELLO:
                self._client_hello(d, body)
            elif msg_type == SERVER_HELLO:
                self._server_hello(body)
            elif msg_type == CERTIFICATE and self.cert is None:
                # TLS 1.3 (decrypted): a request context first; TLS 1.2: in clear
                self._certificate(body[1 + body[0]:] if self.version == TLS13 else body)
        except Exception as e:  # noqa: BLE001 - capture bytes (and cryptography's parser) may raise anything
            note = f"{what} not read ({type(e).__name__})"
            if note not in self.notes and len(self.notes) < 4:
                self.notes.append(note)

    def _client_hello(self, d: int, b: bytes) -> None:
        self.handshake_seen = True
        if self.client_dir is None:
            self.client_dir = d
            if self.on_client is not None:
                self.on_client(d)
        self.client_random = b[2:34]
        if self.keylog is not None:
            self.keylog.claim(self.client_random)
        pos = 34
        pos += 1 + b[pos]  # session id
        n = int.from_bytes(b[pos:pos + 2], "big")
        ciphers = [int.from_bytes(b[i:i + 2], "big") for i in range(pos + 2, pos + 2 + n - 1, 2)]
        pos += 2 + n
        pos += 1 + b[pos]  # compression methods
        types, groups, formats = [], [], []
        for ext, data in _extensions(b, pos):
            types.append(ext)
            if ext == 0 and len(data) > 5 and data[2] == 0:  # server_name: host_name
                n = int.from_bytes(data[3:5], "big")
                self.server_name = data[5:5 + n].decode("ascii", "replace")
            elif ext == 16 and len(data) > 2:  # application_layer_protocol_negotiation
                names, i = [], 2
                while i < len(data):
                    n = data[i]
                    names.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
                    i += 1 + n
                self.alpn = names
            elif ext == 43 and data:  # supported_versions
                self.offered_versions = [int.from_bytes(data[i:i + 2], "big") for i in range(1, 1 + data[0], 2)]
            elif ext == 10 and len(data) >= 2:  # supported_groups
                end = 2 + int.from_bytes(data[:2], "big")
                groups = [int.from_bytes(data[i:i + 2], "big") for i in range(2, end, 2)]
            elif ext == 11 and data:  # ec_point_formats
                formats = list(data[1:1 + data[0]])
        self.ja3 = ja3(int.from_bytes(b[0:2], "big"), ciphers, types, groups, formats)

    def _server_hello(self, b: bytes) -> None:
        random = b[2:34]
        if random == HRR_RANDOM:
            return
        self.server_random = random
        self.version = int.from_bytes(b[0:2], "big")
        pos = 34
        pos += 1 + b[pos]
        suite = int.from_bytes(b[pos:pos + 2], "big")
        pos += 3
        for ext, data in _extensions(b, pos):
            if ext == 43 and len(data) == 2:  # supported_versions: the version chosen
                self.version = int.from_bytes(data, "big")
            elif ext == 16 and len(data) > 3:  # ALPN chosen
                self.alpn = [data[3:3 + data[2]].decode("ascii", "replace")]
            elif ext == 22:  # encrypt_then_mac (RFC 7366): agreed for CBC suites
                self.etm = True
        self.suite = suite

    def _certificate(self, b: bytes) -> None:
        from cryptography import x509

        if len(b) < 6:
            return
        n = _U24.unpack(b"\x00" + b[3:6])[0]
        der = b[6:6 + n]
        cert = x509.load_der_x509_certificate(der)
        self.cert = (cert.subject.rfc4514_string(), cert.issuer.rfc4514_string(),
                     cert.not_valid_after_utc.date().isoformat())


class TlsSession(Handshake):
    """One TLS connection: what its handshake says in clear, and, with its secrets from a key log,
    its two byte streams decrypted into the Kafka framers (``outputs``, by direction).

    ``start_captured``: the connection's first bytes are in the capture (its SYN was), so a record
    before any handshake is not tried with the key log's sessions. Counts: ``decrypted`` (plaintext
    bytes handed on); each direction's ``read``, ``undecrypted``, ``other`` and ``gap`` (see the
    module's docstring); ``problem`` says why bytes were not decrypted."""

    def __init__(self, keylog, outputs: list, client_dir: int | None, on_client: Callable[[int], None] | None = None,
                 start_captured: bool = False, budget: TrialBudget | None = None):
        self.keylog = keylog
        self.outputs = outputs
        self.client_dir = client_dir
        self.on_client = on_client
        self.start_captured = start_captured
        self.budget = budget if budget is not None else TrialBudget()
        self.dirs = [TlsDirection(self, 0), TlsDirection(self, 1)]
        self.counts: list[tuple[int, int, int, int]] | None = None  # the directions' counts, once released
        Handshake.__init__(self)
        self.decrypted = 0
        self.problem: str | None = None
        self.trials = 0  # trial decryptions after gaps so far (at most RESYNC_BUDGET)
        self.trial_work = 0  # trial decryptions without the handshake so far (see trial)
        self.trialled = False  # decrypted without its handshake (see trial)

    def release(self) -> None:
        """The connection has ended: keep the directions' counts, drop the links to the directions,
        the framers and the listener (the directions link back here), so that no reference cycle is
        left."""
        if self.counts is None:
            self.counts = [x.counts() for x in self.dirs]
        self.dirs = []
        self.outputs = []
        self.on_client = None

    def direction_counts(self, d: int) -> tuple[int, int, int, int]:
        """(read, undecrypted, other, gap) bytes of direction d."""
        return self.counts[d] if self.counts is not None else self.dirs[d].counts()

    @property
    def undecrypted(self) -> int:
        """Captured bytes of the connection that were not read: records not decrypted and bytes in
        no record read."""
        return sum(c[1] + c[2] for c in (self.direction_counts(0), self.direction_counts(1)))

    def describe(self) -> str:
        """A row's detail: the negotiated version and suite, server name, ALPN, and what became of
        the encrypted bytes."""
        from .escape import printable

        parts = [self.version_name or "TLS (version not captured)"]
        if self.suite is not None:
            parts.append(str(self.suite_name))
        if self.server_name:
            parts.append(f"server name {printable(self.server_name)}")
        if self.alpn:
            parts.append("ALPN " + ",".join(printable(a) for a in self.alpn))
        parts.extend(self.notes)
        undecrypted = self.undecrypted
        if self.decrypted and not undecrypted:
            state = f"decrypted ({self.decrypted} bytes)"
        elif self.decrypted:
            state = f"{self.decrypted} bytes decrypted, {undecrypted} not: {self.problem}"
        else:
            state = f"encrypted, not decrypted: {self.problem or self._no_keys()}"
        return ", ".join(parts) + ": " + state

    def _no_keys(self) -> str:
        return NO_KEY_LOG if self.keylog is None or not self.keylog.given else "no record to decrypt"

    def fail(self, why: str) -> None:
        """Bytes were not decrypted: the first reason is the one shown."""
        if self.problem is None:
            self.problem = why

    # -- keys ----------------------------------------------------------------------------------
    def _suite_ok(self) -> bool:
        """Are the version and suite known, decrypted here, and do they fit each other? (The problem
        says why not.)"""
        if self.suite is None or self.version is None:
            self.fail("the handshake is not in the capture")
            return False
        name, kind = SUITES.get(self.suite, (f"0x{self.suite:04X}", None))[:2]
        if kind is None:
            self.fail(f"cipher suite {name} is not decrypted")
            return False
        if not suite_fits(self.suite, self.version):
            self.fail(f"cipher suite {name} does not fit {self.version_name or f'version 0x{self.version:04X}'}")
            return False
        return True

    def _session_secrets(self) -> dict[str, bytes] | None:
        if self.keylog is None or not self.keylog.given:
            self.fail(NO_KEY_LOG)
            return None
        secrets = self.keylog.secrets(self.client_random) if self.client_random is not None else None
        if secrets is None:
            self.fail("the key log has no secret for this session" if self.client_random is not None
                      else "the handshake is not in the capture")
        return secrets

    def tls13(self, label: str) -> tuple[Keys, bytes] | None:
        """TLS 1.3 record keys from the key log's traffic secret ``label``, with that secret."""
        if not self._suite_ok():
            return None
        secrets = self._session_secrets()
        secret = secrets.get(label) if secrets else None
        if secret is None:
            if secrets is not None:
                self.fail("the key log has no secret for this session")
            return None
        keys = tls13_keys(secret, self.suite)  # type: ignore[arg-type]
        if keys is None:
            self.fail("the key log's secret does not fit the cipher suite")
            return None
        return keys, secret

    def tls12(self, d: int) -> Keys | None:
        """TLS 1.1/1.2 record keys of direction d from the master secret."""
        if not self._suite_ok():
            return None
        secrets = self._session_secrets()
        master = secrets.get("CLIENT_RANDOM") if secrets else None
        if master is None or self.server_random is None or self.client_random is None:
            if secrets is not None:
                self.fail("the key log has no secret for this session")
            return None
        try:
            return tls12_keys(self.suite, self.version, master, self.server_random,  # type: ignore[arg-type]
                              self.client_random, d == self.client_dir, self.etm)
        except ValueError as e:
            self.fail(str(e))
            return None

    def spend(self, count: int) -> int:
        """Trial decryptions granted of ``count`` asked (0 when a budget is spent: the problem says
        which)."""
        b = self.budget
        grant = max(0, min(count, b.per_connection - self.trial_work, b.task_left))
        if grant <= 0:
            self.fail("the handshake is not in the capture, and the trial budget ran out before a secret of the key "
                      "log verified its records (" + ("option tlsTrialTaskBudget, for all connections of the file)"
                                                      if b.task_left <= 0 else "option tlsTrialBudget)"))
        self.trial_work += grant
        b.task_left -= grant
        return grant

    def trial(self, d: int, header: bytes, payload: bytes) -> tuple[Keys, bytes] | None:
        """A connection whose handshake is not in the capture (a rotated file, a capture started
        late): its first whole protected record is tried with the TLS 1.3 application secrets of
        the key log's sessions that no connection of this file has claimed, nearest in the log to
        the sessions this file's handshakes claimed first (a rotated file's cut connections began
        just before them), AES-GCM suites before ChaCha20, record sequence numbers 0 to
        TRIAL_RECORDS, within the budgets. Keys that verify it are this direction's, and the session
        is claimed by this connection: no other connection tries it."""
        log = self.keylog
        if log is None or not log.given:
            self.fail(NO_KEY_LOG)
            return None
        labels = ("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0") if self.client_dir is None else \
            ("CLIENT_TRAFFIC_SECRET_0" if d == self.client_dir else "SERVER_TRAFFIC_SECRET_0",)
        for suites in ((0x1301, 0x1302), (0x1303,)):
            for random in log.trial_order():
                secrets = log.secrets(random) or {}
                for label in labels:
                    secret = secrets.get(label)
                    for suite in suites if secret is not None else ():
                        keys = tls13_keys(secret, suite)  # type: ignore[arg-type]
                        if keys is None:
                            continue
                        count = self.spend(TRIAL_RECORDS)
                        if not count:
                            return None
                        seq = keys.find(header, payload, 0, count)
                        if seq is None:
                            continue
                        keys.seq = seq
                        self.version, self.suite, self.client_random = TLS13, suite, random
                        log.claim(random)
                        if self.client_dir is None:
                            self.client_dir = d if label.startswith("CLIENT") else 1 - d
                            if self.on_client is not None:
                                self.on_client(self.client_dir)
                        self.trialled = True
                        return keys, secret  # type: ignore[return-value]
        self.fail("the handshake is not in the capture, and no secret of the key log that no other connection "
                  "claimed verified its records")
        return None


def _grease(v: int) -> bool:
    """RFC 8701's GREASE values (0x0a0a, 0x1a1a, ... 0xfafa): left out of fingerprints."""
    return v & 0x0F0F == 0x0A0A and v >> 8 == v & 0xFF


def ja3(version: int, ciphers: list[int], extensions: list[int], groups: list[int], formats: list[int]) -> str:
    """The JA3 fingerprint of a ClientHello: MD5 of its version, cipher suites, extension types,
    supported groups and point formats in the order sent, GREASE values left out. It names a
    client's TLS stack (a JVM's, librdkafka's OpenSSL, Python's), not the client."""
    import hashlib

    def join(values: list[int]) -> str:
        return "-".join(str(v) for v in values if not _grease(v))

    text = ",".join([str(version), join(ciphers), join(extensions), join(groups), join(formats)])
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _extensions(b: bytes, pos: int) -> Iterator[tuple[int, bytes]]:
    if pos + 2 > len(b):
        return
    end = min(len(b), pos + 2 + int.from_bytes(b[pos:pos + 2], "big"))
    pos += 2
    while pos + 4 <= end:
        ext, n = int.from_bytes(b[pos:pos + 2], "big"), int.from_bytes(b[pos + 2:pos + 4], "big")
        yield ext, b[pos + 4:pos + 4 + n]
        pos += 4 + n



class RecordStream:
    """The record layer of one direction of a TLS connection: the bytes cut into records, and where
    their boundaries are lost, found again. A TlsDirection is a RecordStream with the sink
    interface and what the records hold (decryption, handshake messages, key updates).

    Where record boundaries are not known (after a gap, after bytes that are not a record header,
    a stream caught mid-record) the direction is ``lost``: it scans for a record header and takes it
    as a boundary once the record verifies under the direction's keys (sequence numbers bounded by
    the bytes lost), or, without keys, once the record is followed by another header. Every step
    consumes bytes or waits for at most one record and a header; after RESYNC_CANDIDATES failed
    candidates (or RESYNC_BUDGET trial decryptions) the direction is given up and its bytes only
    counted."""

    __slots__ = ("session", "d", "buf", "rec_ts", "rec_num", "keys", "secret", "encrypted", "hs", "phase", "lost",
                 "scan_from", "missing", "tried", "suspect", "dead", "after_gap", "read", "undecrypted", "other",
                 "gap_bytes")

    def __init__(self, session: TlsSession, d: int):
        self.session = session
        self.d = d
        self.buf = bytearray()
        self.rec_ts = 0
        self.rec_num = 0
        self.keys: Keys | None = None
        self.secret: bytes | None = None  # TLS 1.3: the traffic secret of the keys (KeyUpdate derives the next)
        self.encrypted = False  # records from here on are protected
        self.hs = bytearray()  # handshake messages being put together
        self.phase = "handshake"  # TLS 1.3: which traffic secret protects this direction's records
        self.lost = False  # record boundaries unknown: scanning (see _resync)
        self.scan_from = 0  # where in buf the scan goes on
        self.missing = 0  # bytes lost or passed over since the last record read (they bound the records lost)
        self.tried = 0  # candidate records tried since boundaries were lost
        self.suspect = 0  # records in a row that did not verify: the next is tried with later sequence numbers too
        self.dead = False  # given up: bytes are counted, not read
        self.after_gap = False  # bytes of the stream were lost or not read as TLS before the records now read
        self.read = 0  # bytes of records read (in clear, or decrypted)
        self.undecrypted = 0  # bytes of protected records not decrypted
        self.other = 0  # captured bytes in no record read
        self.gap_bytes = 0  # bytes the capture lost

    def counts(self) -> tuple[int, int, int, int]:
        return self.read, self.undecrypted, self.other, self.gap_bytes

    @property
    def out(self):
        return self.session.outputs[self.d]

    def begin_after(self, captured: int, lost: int) -> None:
        """This direction's first ``captured`` bytes (and ``lost`` lost ones) were read as something
        else before the connection was known to be TLS: counted as other (and gap), and records are
        found by scanning."""
        self.other += captured
        self.gap_bytes += lost
        if captured or lost:
            self.lost = True
            self.after_gap = True

    def _pass_over(self, n: int) -> None:
        """``n`` captured bytes not read as records: protected ones are undecrypted, others other."""
        if self.encrypted:
            self.undecrypted += n
        else:
            self.other += n

    # -- records -------------------------------------------------------------------------------
    def _run(self, ts: int, number: int) -> None:
        buf = self.buf
        pos = 0
        while not self.dead:
            if self.lost:
                if pos:
                    del buf[:pos]
                    pos = 0
                if not self._resync(ts, number):
                    return
                continue
            n = _record_length(buf, pos)
            if n < 0:
                if len(buf) - pos < 5 and _header_prefix(buf, pos):
                    break  # the next header is not all here yet
                del buf[:pos]  # not a record header where one starts: damage, or not TLS
                pos = 0
                self.session.fail("bytes that are not TLS records")
                self.lost = True
                self.scan_from = 1
                continue
            if len(buf) - pos < 5 + n:
                break
            header, payload = bytes(buf[pos:pos + 5]), bytes(buf[pos + 5:pos + 5 + n])
            pos += 5 + n
            self._record(header, payload, self.rec_ts, self.rec_num)
            self.rec_ts, self.rec_num = ts, number
        if self.dead:
            self._pass_over(len(buf) - pos)
            buf.clear()
        elif pos:
            del buf[:pos]

    def _drop(self, n: int) -> None:
        """Pass over the first n bytes of buf while scanning."""
        if n > 0:
            self._pass_over(n)
            self.missing += n
            del self.buf[:n]

    def _resync(self, ts: int, number: int) -> bool:
        """Find where records start again. True: buf starts at a record now; False: more bytes are
        needed (those ruled out are counted and dropped) or the direction was given up.

        With the keys, a candidate verifies: the bytes lost bound the records lost (at least one
        per MAX_RECORD bytes, at most one per MIN_PROTECTED), and those sequence numbers are tried,
        fewest lost records first (at most RESYNC_RECORDS per candidate). Without them, a candidate
        whose record is followed by another header is taken."""
        buf = self.buf
        s = self.session
        keys = self.keys if self.encrypted else None
        i = self.scan_from
        while True:
            while i + 5 <= len(buf) and _record_length(buf, i) < 0:
                i += 1
            if i + 5 > len(buf):  # no header here: keep only what may begin one
                while i < len(buf) and not _header_prefix(buf, i):
                    i += 1
                self._drop(i)
                self.scan_from = 0
                return False
            self._drop(i)
            i = 0
            self.scan_from = 0
            n = _record_length(buf, 0)
            if keys is None:
                if len(buf) < 5 + n + 5:
                    if len(buf) < 5 + n or _header_prefix(buf, 5 + n):
                        return False  # wait for the record and the next header
                elif _record_length(buf, 5 + n) >= 0:
                    self.lost = False
                    self.missing = 0
                    return True
                i = 1
                continue
            if len(buf) < 5 + n:
                return False  # wait for the whole candidate record
            self.tried += 1
            header, payload = bytes(buf[:5]), bytes(buf[5:5 + n])
            lost = self.missing
            first = keys.seq + lost // (MAX_RECORD + 5)
            last = keys.seq + lost // MIN_PROTECTED + 1
            tries = max(0, min(RESYNC_RECORDS, RESYNC_BUDGET - s.trials, last - first + 1))
            s.trials += tries
            seq = keys.find(header, payload, first, tries)
            if seq is not None:
                # the plaintext lost: every byte lost, less each lost record's overhead
                self.out.gap(max(0, lost - (seq - keys.seq) * keys.overhead), ts, number)
                keys.seq = seq
                self.lost = False
                self.tried = 0
                self.missing = 0
                self.suspect = 0
                return True
            if self.tried >= RESYNC_CANDIDATES or s.trials >= RESYNC_BUDGET:
                s.fail("no record verified after a gap" if self.after_gap else "no record verified after bytes that "
                       "are not TLS records")
                self.out.gap(self.missing, ts, number)
                self.dead = True
                self._pass_over(len(buf))
                buf.clear()
                return False
            i = 1

    def _record(self, header: bytes, payload: bytes, ts: int, number: int) -> None:  # TlsDirection's
        raise NotImplementedError


class TlsDirection(RecordStream):
    """The sink of one TCP direction of a TLS connection (in place of its framer): TLS records in,
    the decrypted application data out to the direction's Kafka framer."""

    __slots__ = ()

    # -- sink interface ------------------------------------------------------------------------
    def start(self) -> None:
        pass

    def data(self, chunk: bytes, ts: int, number: int) -> None:
        if self.dead:
            self._pass_over(len(chunk))
            return
        if not self.buf:
            self.rec_ts, self.rec_num = ts, number
        self.buf += chunk
        self._run(ts, number)

    def gap(self, nbytes: int, ts: int, number: int) -> None:
        """Bytes the capture lost. The Kafka framer is told how many plaintext bytes they held once
        decryption resumes (the records lost are known then: see _resync), so that a frame they
        cut is passed over exactly rather than scanned for."""
        self.gap_bytes += nbytes
        if self.buf:  # the captured part of a record the gap cuts
            self._pass_over(len(self.buf))
            self.missing += len(self.buf)
            self.buf.clear()
        self.session.fail("a gap in the capture")
        if self.dead:
            return
        self.missing += nbytes
        if self.keys is None or not self.encrypted:
            self.out.gap(nbytes, ts, number)  # nothing to resume: the framer hears of it now
        self.lost = True
        self.after_gap = True
        self.tried = 0
        self.scan_from = 0

    def late(self, nbytes: int, reported: int, ts: int, number: int) -> None:
        """Copies of bytes a gap already reported (or before the stream's first byte): in no record."""
        self.other += nbytes
        self.gap_bytes -= reported

    def end(self) -> None:
        if self.lost and not self.dead and self.keys is not None and self.encrypted and self.missing:
            self.out.gap(self.missing, self.rec_ts, self.rec_num)  # decryption never resumed after a gap
        if self.buf:
            self._pass_over(len(self.buf))
            self.session.fail("the capture ends inside a record")
            self.buf.clear()
        self.out.end()

    def _record(self, header: bytes, payload: bytes, ts: int, number: int) -> None:
        s = self.session
        ctype = header[0]
        size = 5 + len(payload)
        if not self.encrypted:
            if ctype == HANDSHAKE:
                self.read += size
                self._handshake(payload, ts, number)
                return
            if ctype == CHANGE_CIPHER_SPEC:
                self.read += size
                if s.version is not None and s.version != TLS13:  # TLS 1.2: protected from the next record on
                    self.encrypted = True
                    self.keys = s.tls12(self.d)
                return
            if ctype == ALERT:
                self.read += size
                return
            if not s.handshake_seen and not s.trialled and s.start_captured and not self.after_gap:
                # a protected record where this connection's handshake must come first: not this
                # connection's (spliced, or injected); its own handshake may follow
                self.undecrypted += size
                s.fail("a protected record before the handshake of a connection whose start was captured (not "
                       "tried with the key log)")
                return
            self.encrypted = True
            if s.handshake_seen:  # TLS 1.3: the handshake traffic secret
                self._traffic_keys()
            else:  # no handshake in the capture: the other direction may have found the session
                self.phase = "application"
                if s.trialled:
                    self._sequenced(header, payload)
                else:
                    found = s.trial(self.d, header, payload)
                    if found is not None:
                        self.keys, self.secret = found
        keys = self.keys
        if keys is None:
            self.undecrypted += size
            s.fail("no keys for its records")
            return
        seq = keys.seq
        plain = keys.open(header, payload, seq)
        if plain is None and self.suspect:  # records before this one did not verify: damaged, or lost
            found_seq = keys.find(header, payload, seq + 1, self.suspect)
            if found_seq is not None:
                seq = found_seq
                plain = keys.open(header, payload, seq)
        if plain is None:
            self.undecrypted += size
            self.suspect = min(SUSPECT_WINDOW, self.suspect + 1)
            s.fail("a record's tag does not verify")
            return
        self.suspect = 0
        keys.seq = seq + 1
        self.read += size
        self._plaintext(ctype, plain, ts, number)

    def _plaintext(self, ctype: int, plain: bytes, ts: int, number: int) -> None:
        if self.keys is not None and self.keys.tls13:  # the inner content type ends the zero padding
            end = len(plain.rstrip(b"\x00"))
            if not end:
                return
            ctype, plain = plain[end - 1], plain[:end - 1]
        if ctype == APPLICATION_DATA:
            self.session.decrypted += len(plain)
            if plain:
                self.out.data(plain, ts, number)
        elif ctype == HANDSHAKE:
            self._handshake(plain, ts, number)

    def _traffic_keys(self) -> None:
        found = self.session.tls13(self._label())
        self.keys, self.secret = found if found is not None else (None, None)

    def _sequenced(self, header: bytes, payload: bytes) -> None:
        """This direction's keys, once the other direction's trial found the session (see
        TlsSession.trial), with the sequence number that verifies this record."""
        self._traffic_keys()
        keys = self.keys
        if keys is not None:
            seq = keys.find(header, payload, 0, self.session.spend(TRIAL_RECORDS))
            if seq is None:
                self.session.fail("no record sequence number verified (trial)")
                self.keys = None
            else:
                keys.seq = seq

    def _label(self) -> str:
        side = "CLIENT" if self.d == self.session.client_dir else "SERVER"
        return f"{side}_HANDSHAKE_TRAFFIC_SECRET" if self.phase == "handshake" else f"{side}_TRAFFIC_SECRET_0"

    def _handshake(self, data: bytes, ts: int, number: int) -> None:
        hs = self.hs
        hs += data
        pos = 0
        while len(hs) - pos >= 4:
            n = _U24.unpack(b"\x00" + hs[pos + 1:pos + 4])[0]
            if len(hs) - pos < 4 + n:
                break
            msg_type, body = hs[pos], bytes(hs[pos + 4:pos + 4 + n])
            pos += 4 + n
            self._message(msg_type, body)
        del hs[:pos]
        if len(hs) > MAX_HANDSHAKE_BUFFER:
            hs.clear()

    def _message(self, msg_type: int, body: bytes) -> None:
        s = self.session
        if msg_type in (CLIENT_HELLO, SERVER_HELLO, CERTIFICATE):
            s._hello(self.d, msg_type, body)
            if msg_type == CLIENT_HELLO and s.handshake_seen:
                self.out.start()  # the application data starts with a Kafka frame
                s.outputs[1 - self.d].start()
            return
        if self.keys is None or not self.keys.tls13:
            return
        if msg_type == FINISHED and self.phase == "handshake":
            self.phase = "application"
            self._traffic_keys()
        elif msg_type == KEY_UPDATE:
            self._key_update()

    def _key_update(self) -> None:
        """TLS 1.3 KeyUpdate: this direction's next traffic secret, derived from its current one
        (RFC 8446 7.2). The key log's secrets are never changed: the same session seen on another
        connection starts from them again."""
        s = self.session
        if self.secret is None or s.suite is None or s.suite not in SUITES or not suite_fits(s.suite, TLS13):
            self.keys = None
            s.fail("a KeyUpdate without the current traffic secret")
            return
        self.secret = next_secret(self.secret, s.suite)
        self.keys = tls13_keys(self.secret, s.suite)
