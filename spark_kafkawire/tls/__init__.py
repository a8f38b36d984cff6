"""TLS: between the TCP byte streams (wire/) and the Kafka framers (kafka/... see wire/frames.py).

A connection whose bytes start like TLS records is recognised (guess.py); its handshake is read in
clear (handshake.py: version, suite, server name, ALPN, certificate; fingerprints.py: JA3, JA4) and, with
the session's secrets from a key log (keylog.py), its records are cut (recordstream.py) and
decrypted (direction.py; keys.py: key schedule and record ciphers; suites.py: the cipher suites as
data) into the same framers a plaintext connection feeds (session.py: one connection; trial.py: where its handshake
was not captured).

What the stage promises, whatever the bytes:

* progress: every step consumes bytes or ends the direction, and what is held waiting is bounded
  (one record and the next header), so a read takes time linear in its input;
* every captured byte of a direction is counted once: in a record read (``read``: in clear or
  decrypted), in a record not decrypted (``undecrypted``), or in no record read (``other``: passed
  over while finding a record boundary, before the connection was known to be TLS, late copies); the
  bytes the capture lost are ``gap``;
* a decrypted frame belongs to its connection: keys come from this connection's handshake, or from
  a trial that verified on this connection with a session no other connection has claimed, held
  until a second record confirms it (at the connection's end, unless a handshake of the file showed
  the session elsewhere) (trial.py); a connection that opened with a ClientHello is never read as plaintext Kafka,
  and only the client's hello describes the client;
* handshake and certificate bytes that do not parse give a detail, never an exception.

Imports: the standard library, ``cryptography`` (on first use), wire/fs.py (key log files) and
escape.py; nothing of kafka/, decode/ or later.
"""
