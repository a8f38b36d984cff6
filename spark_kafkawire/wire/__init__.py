"""The wire: capture files -> packets -> TCP byte streams -> frames.

* fs.py: paths and URIs (local, s3://, gs://, ...) opened and listed;
* capture.py: pcap and pcapng files (gzip too) read record by record, damage reported not raised;
* packets.py: link, IP and TCP headers -> segments (endpoints, sequence numbers, flags, payload);
* tcp.py: segments -> the two byte streams of each connection (reassembly, holes, retransmissions,
  idle and closed connections, the handshake's times); flow.py: its Community ID;
* frames.py: a byte stream -> Kafka's size-prefixed frames (the cut, and the resync scan that finds
  a frame boundary again after a hole); TLS plaintext (tls/) is cut by the same Framer;
* lane.py, _lane.c: the fast lane, capture.py's record walk and packets.dissect in C for the common
  records, each segment handed to tcp.py as the reader hands it (nothing of TCP or framing in C).

Imports: the standard library, pyarrow.fs (on first use) and compiled.py; nothing of tls/, kafka/
or later. What a frame means is kafka/'s.
"""
