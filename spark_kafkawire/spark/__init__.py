"""Spark: the thin layer that makes captures a data source. Nothing here decodes.

* datasource.py: format ``kafkawire`` (spark.read / readStream): options, the plan of shares, each
  partition read by reader.iter_batches on an executor, filters pushed into the decoder;
* stream.py: the streaming reader (new capture files in a folder as micro-batches);
* session.py: a SparkSession whose Python workers run this interpreter, the source registered.

Imports: the read layer (reader, options, listing), rows/, decode/ and pyspark; nothing of audits/
or the command line.
"""
