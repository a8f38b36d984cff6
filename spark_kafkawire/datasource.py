"""The Spark adapter: ``spark.read.format("kafkawire").load(paths)``.

A thin layer over :mod:`spark_kafkawire.reader`: the driver lists the capture files, each file is
one input partition, and each partition streams that file's record batches.
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from .reader import Options, _paths_option, iter_batches, list_files
from .table import ddl


class CaptureFilePartition(InputPartition):
    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class KafkaWireDataSource(DataSource):
    """Kafka traffic in pcap/pcapng capture files: one row per exchange (or message)."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    def schema(self) -> str:
        return ddl(Options.parse(dict(self.options)).rows)

    def reader(self, schema) -> "KafkaWireReader":
        return KafkaWireReader(dict(self.options))


class KafkaWireReader(DataSourceReader):
    def __init__(self, options: dict):
        self.options = Options.parse(options)
        paths = _paths_option(options)
        if not paths:
            raise ValueError("kafkawire: give the capture files to load(), e.g. load('captures/')")
        self.files = list_files(paths, self.options.path_glob_filter)

    def partitions(self) -> list[InputPartition]:
        return [CaptureFilePartition(f) for f in self.files] or [CaptureFilePartition("")]

    def read(self, partition: CaptureFilePartition) -> Iterator:
        if partition.path:
            yield from iter_batches(partition.path, self.options)
