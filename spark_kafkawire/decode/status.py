"""The status words of a row: what became of an exchange (column ``status``), one source for every
stage, figure and audit that names one.

Statuses (column ``status``; ``detail`` says more):

=================  ===============================================================================
complete           request and response both decoded
no_response        a request with no response in the capture (detail: acks=0, connection closed,
                   capture ended, correlation id reused)
request_missing    a response whose request is not in the capture: without the request's api key
                   and version nothing past the correlation id can be decoded
undecoded          headers decoded, but a body does not fit its schema (detail: field and offset)
truncated          a frame of the exchange was cut short by a gap in the capture or its end
malformed          a frame whose header does not parse (detail says why)
unknown_api        a request for an api key or version no Kafka release defines
capture_damaged    the capture file is damaged from here on (detail: packet number, byte offset)
capture_changed    streaming source only: a file already read changed or vanished (detail says how);
                   it is not read again
tls                the connection carries TLS records: encrypted, nothing to decode (one row)
sasl_token         a raw SASL token: after a SaslHandshake v0 the client and broker exchange tokens
                   without Kafka headers; nothing of their bytes is shown (only the frame size)
=================  ===============================================================================
"""

from __future__ import annotations

from typing import Final

COMPLETE: Final = "complete"
NO_RESPONSE: Final = "no_response"
REQUEST_MISSING: Final = "request_missing"
TRUNCATED: Final = "truncated"
MALFORMED: Final = "malformed"
UNKNOWN_API: Final = "unknown_api"
CAPTURE_DAMAGED: Final = "capture_damaged"
CAPTURE_CHANGED: Final = "capture_changed"
UNDECODED: Final = "undecoded"
TLS: Final = "tls"
SASL_TOKEN: Final = "sasl_token"
STATUSES: Final = (COMPLETE, NO_RESPONSE, REQUEST_MISSING, TRUNCATED, MALFORMED, UNKNOWN_API, UNDECODED,
                   CAPTURE_DAMAGED, TLS, SASL_TOKEN, CAPTURE_CHANGED)
SASL_TOKEN_DETAIL: Final = "raw SASL token after SaslHandshake v0: contents withheld"
#: statuses that mean damage (option mode: DROPMALFORMED drops them, FAILFAST raises)
DAMAGE: Final = frozenset({TRUNCATED, MALFORMED, UNDECODED, CAPTURE_DAMAGED})
