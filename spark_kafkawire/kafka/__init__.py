"""Kafka: what a frame means. A frame's request or response header, its body read by the one
interpreter of protocol/messages.json, and the facts rows and audits use.

* headers.py: request and response headers (their versions from the api key and version, by rule);
* layouts.py: protocol/messages.json read once into the fields every body reader walks;
* body.py: a body -> its values (JSON) and facts (topics, partitions, error codes, group and
  transaction ids, records) by one interpreter of the layouts; codegen.py: readers generated from
  the same layouts for the common path, the interpreter the reference; message.py: the entry
  points (a whole body by its api key and version, one leading field by itself);
* secrets.py, sasl.py: secret fields redacted and sealed; what a SASL token looks like (refused
  wherever a header or field is read);
* records.py: record batches (v0/v1 message sets and v2 batches): CRCs, record summaries, records;
  batchheader.py: the batch headers' layouts; codecs.py: payloads decompressed within a budget;
  carried.py: what a record carries besides its payload (trace context, key and value wire formats);
* headline.py, partitions.py, topicids.py: facts -> a row's headline, its partition rows, and the
  topic ids learnt from Metadata and the like;
* values.py, wiretypes.py: the value and byte types the stage hands on.

Imports: the standard library, the codecs (on first use), protocol/ and compiled.py; nothing of
wire/, tls/ or later: a frame's bytes are all it needs.
"""
