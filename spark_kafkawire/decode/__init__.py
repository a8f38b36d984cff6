"""Decoding connections: frames -> exchanges. Which side is the client, what each connection has
said so far (its client software, SASL, TLS), requests paired with their responses.

* roles.py: which end of a connection is the client, from what its frames look like;
* connstate.py: one connection's state: endpoints, framers, TLS, in-flight requests, SASL;
* status.py: the status words of a row (what became of an exchange), used by every later layer;
* pairing.py: Pairing: frames in, exchanges (a request and its response, or what is left of them)
  out to a row sink, each with its status;
* exchanges.py: the Decoder, the Pairing that listens to the reassembler: connections opened and
  closed, their framers, the TLS switch, a connection's part row where a read is carried on;
* modes.py: what a damaged capture does (the damage policies);
* predicate.py: row filters that let the decoder skip what no row will keep.

Imports: wire/, tls/, kafka/, protocol/ and the ground modules; nothing of rows/ or later.
"""
