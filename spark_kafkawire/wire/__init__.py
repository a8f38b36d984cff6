"""The wire: capture files -> packets -> TCP byte streams -> frames.

* fs.py: paths and URIs (local, s3://, gs://, ...) opened and listed;
* capture.py: pcap and pcapng files (gzip too) read record by record, damage reported not raised;
* packets.py: link, IP and TCP headers -> segments (endpoints, sequence numbers, flags, payload);
* tcp.py: segments -> the two byte streams of each connection (reassembly, holes, retransmissions,
  idle and closed connections, the handshake's times); flow.py: its Community ID;
* frames.py: a byte stream -> Kafka's size-prefixed frames (the cut, and the resync scan that finds
  a frame boundary again after a hole); TLS plaintext (tls/) is cut by the same Framer;
* lane.py, _lane.c, cores.py: the fast lane, the common packet taken from record to frame in C on
  the same objects (cores.py is the one list of the fields C and Python share).

Imports: the standard library, pyarrow.fs (on first use) and compiled.py; nothing of tls/, kafka/
or later. What a frame means is kafka/'s.
"""
