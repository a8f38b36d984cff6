"""The TLS record layer of one direction: records (cut by recordstream.py) decrypted, and their
content (application data, handshake messages, key updates) handed on."""

from __future__ import annotations

from .guess import APPLICATION_DATA, ALERT, CHANGE_CIPHER_SPEC, HANDSHAKE
from .handshake import U24, CERTIFICATE, CLIENT_HELLO, FINISHED, KEY_UPDATE, MAX_HANDSHAKE_BUFFER, SERVER_HELLO
from .keys import TLS13, Keys, Payload, next_secret, suite_fits, tls13_keys
from .recordstream import SUSPECT_WINDOW, TRIAL_RECORDS, RecordStream
from .suites import SUITES


class Records(RecordStream):
    """What a direction's records hold: handshake messages read in clear, protected records
    decrypted with the keys the session's secrets give (or its trial found), the plaintext handed
    to the direction's Kafka framer."""

    __slots__ = ()

    def _record(self, header: bytes, payload: Payload, ts: int, number: int) -> None:
        s = self.session
        ctype = header[0]
        size = 5 + len(payload)
        if not self.encrypted and not self._in_clear(header, payload, ts, number):
            return
        keys = self.keys
        if keys is None:
            self.undecrypted += size
            s.fail("no keys for its records")
            return
        seq, plain = self._open(keys, header, payload)
        keys = self.keys if self.keys is not None else keys
        if plain is None:
            if s.unconfirmed:  # the record the trial verified was not this connection's
                s.refute()
                self._record(header, payload, ts, number)  # tried again, without that session
                return
            self.undecrypted += size
            self.suspect = min(SUSPECT_WINDOW, self.suspect + 1)
            s.fail("a record's tag does not verify")
            return
        self.suspect = 0
        keys.seq = seq + 1
        self.read += size
        if s.unconfirmed:
            if not self.verified and self.held is None and not any(x.held for x in s.dirs):
                self.verified = True
                self.held = (ctype, bytes(plain), ts, number, size)  # the trial's record: held
                return
            s.confirm()
        self.verified = True
        self._plaintext(ctype, plain, ts, number)

    def _in_clear(self, header: bytes, payload: Payload, ts: int, number: int) -> bool:
        """A record before this direction's records are protected: read here (False), or the first
        protected one, with the keys for it found (True: decrypt it)."""
        s = self.session
        ctype = header[0]
        size = 5 + len(payload)
        if ctype in (HANDSHAKE, CHANGE_CIPHER_SPEC, ALERT):
            self.read += size
            if ctype == HANDSHAKE:
                self._handshake(payload, ts, number)
            elif ctype == CHANGE_CIPHER_SPEC and s.version is not None and s.version != TLS13:
                self.encrypted = True  # TLS 1.2: protected from the next record on
                self._tls12_keys()
            return False
        if not s.handshake_seen and not s.trialled and s.start_captured and not self.after_gap:
            # a protected record where this connection's handshake must come first: not this
            # connection's (spliced, or injected); its own handshake may follow
            self.undecrypted += size
            s.fail("a protected record before the handshake of a connection whose start was captured (not "
                   "tried with the key log)")
            return False
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
        return True

    def _open(self, keys: Keys, header: bytes, payload: Payload) -> tuple[int, bytes | None]:
        """(sequence number, plaintext or None) of a protected record: at the next sequence number;
        where the first record under keys from one set of the session's secrets does not verify,
        with the other set (the key log's, the capture's own: see TlsSession.other_secrets); where
        records before it did not verify, at the sequence numbers of up to ``suspect`` lost ones."""
        seq = keys.seq
        plain = keys.open(header, payload, seq)
        if plain is None and not self.verified and self.session.other_secrets(self.choice):
            if keys.tls13:
                self._traffic_keys()
            else:
                self._tls12_keys()
            if self.keys is not None:
                keys = self.keys
                keys.seq = seq
                plain = keys.open(header, payload, seq)
        if plain is None and self.suspect:  # records before this one did not verify: damaged, or lost
            found_seq = keys.find(header, payload, seq + 1, self.suspect)
            if found_seq is not None:
                seq = found_seq
                plain = keys.open(header, payload, seq)
        return seq, plain

    def _plaintext(self, ctype: int, plain: bytes, ts: int, number: int) -> None:
        size = len(plain)
        if self.keys is not None and self.keys.tls13:  # the inner content type ends the zero padding
            size = len(plain.rstrip(b"\x00"))  # (no copy where nothing is stripped)
            if not size:
                return
            size -= 1
            ctype = plain[size]
        if ctype == APPLICATION_DATA:
            self.session.decrypted += size
            if size:
                self.out.data(plain, ts, number, size)  # (the framer takes plain[:size], uncopied where it can)
        elif ctype == HANDSHAKE:
            self._handshake(plain[:size], ts, number)

    def _traffic_keys(self) -> None:
        found = self.session.tls13(self._label())
        self.keys, self.secret = found if found is not None else (None, None)
        self.choice = self.session.choice
        self.verified = False

    def _tls12_keys(self) -> None:
        self.keys = self.session.tls12(self.d)
        self.choice = self.session.choice
        self.verified = False

    def _sequenced(self, header: bytes, payload: Payload) -> None:
        """This direction's keys, once the other direction's trial found the session (see
        TlsSession.trial), with the sequence number that verifies this record."""
        self._traffic_keys()
        keys = self.keys
        if keys is not None:
            seq = keys.find(header, payload, 0, self.session.spend(TRIAL_RECORDS))
            if seq is None:
                self.session.fail("no record sequence number verified (trial)")
                if not self.session.unconfirmed:
                    self.keys = None
            else:
                keys.seq = seq

    def _label(self) -> str:
        side = "CLIENT" if self.d == self.session.client_dir else "SERVER"
        return f"{side}_HANDSHAKE_TRAFFIC_SECRET" if self.phase == "handshake" else f"{side}_TRAFFIC_SECRET_0"

    def _handshake(self, data: Payload, ts: int, number: int) -> None:
        hs = self.hs
        hs += data
        pos = 0
        while len(hs) - pos >= 4:
            n = U24.unpack(b"\x00" + hs[pos + 1:pos + 4])[0]
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
            s.hello(self.d, msg_type, body)
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
        self.key_updates += 1


class TlsDirection(Records):
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
        pos = 0
        if not self.buf:
            self.rec_ts, self.rec_num = ts, number
            if not self.lost:
                pos = self._whole_records(chunk, 0, ts, number)
                if pos == len(chunk):
                    return
        self.buf += memoryview(chunk)[pos:] if pos else chunk
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
        self._settle_held()
        if self.lost and not self.dead and self.keys is not None and self.encrypted and self.missing:
            self.out.gap(self.missing, self.rec_ts, self.rec_num)  # decryption never resumed after a gap
        if self.buf:
            self._pass_over(len(self.buf))
            self.session.fail("the capture ends inside a record")
            self.buf.clear()
        self.out.end()

    # -- the trial's record, held until a second record confirms its session ----------------------
    def release_held(self) -> None:
        held = self.held
        if held is not None:
            self.held = None
            self._plaintext(held[0], held[1], held[2], held[3])

    def drop_held(self) -> None:
        """The trial's session was refuted: the held record was not this connection's, and this
        direction's keys (the refuted session's) are dropped, so that its next record is tried again."""
        held = self.held
        if held is not None:
            self.held = None
            self.read -= held[4]
            self.undecrypted += held[4]
        if self.keys is not None and self.session.client_random is None:
            self.keys = None
            self.secret = None
            self.encrypted = False
            self.verified = False

    def _settle_held(self) -> None:
        """The direction ends with the trial's record held, nothing after it having confirmed or
        refuted it: it stands, unless a handshake of this file has since shown the session on its own
        connection."""
        s = self.session
        if self.held is not None and s.unconfirmed:
            log = s.keylog
            if log is not None and s.client_random in log.shaken:
                s.refute()
            else:
                s.confirm()

    # -- carried to a later read (carry.py) -------------------------------------------------------
    def stash(self) -> None:
        """Before the connection's state is written for a later read: the keys and the secret are
        dropped (key material never leaves the decoder); what it takes to make them again from the key
        log is kept: the sequence number, and the KeyUpdates since the traffic secret."""
        keys = self.keys
        self.carried_seq = keys.seq if keys is not None else -1
        self.keys = None
        self.secret = None

    def rekey(self) -> None:
        """After a later read took the state: the keys made again from the key log, as they were."""
        seq, self.carried_seq = self.carried_seq, -1
        if seq < 0:
            return
        verified, s = self.verified, self.session
        if s.version == TLS13:
            self._traffic_keys()
            for _ in range(self.key_updates):
                if self.secret is None or s.suite is None:
                    break
                self.secret = next_secret(self.secret, s.suite)
                self.keys = tls13_keys(self.secret, s.suite)
        else:
            self._tls12_keys()
        if self.keys is not None:
            self.keys.seq = seq
        self.verified = verified
