"""The Spark adapter: ``spark.read.format("kafkawire").load(paths)``.

A thin layer over :mod:`spark_kafkawire.reader`: the driver lists the capture files and plans the
input partitions (files packed up to about maxPartitionBytes, or a share of a large file: see
listing.plan), and each partition streams the record batches of its files, one after the other.
"""

from __future__ import annotations

import sys
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..decode.predicate import Predicate, from_spark
from ..listing import Unit, list_files, plan
from ..options import STREAM_KEYS, Options, paths_option
from ..reader import iter_batches
from ..rows.table import COLUMNS, ddl


class CaptureFilePartition(InputPartition):
    """Files (or shares of a file: listing.Unit) one task reads, one after the other, each by itself."""

    def __init__(self, units: list[Unit]):
        super().__init__(tuple(units))
        self.units = list(units)


class KafkaWireDataSource(DataSource):
    """Kafka traffic in pcap/pcapng capture files: one row per exchange (or message)."""

    @classmethod
    def name(cls) -> str:
        return "kafkawire"

    def schema(self) -> str:
        o = {k: v for k, v in self.options.items() if k.lower().replace("_", "") not in STREAM_KEYS}
        return ddl(Options.parse(o).rows)

    def reader(self, schema) -> "KafkaWireReader":
        # Spark refuses a reader that has pushFilters when spark.sql.python.filterPushdown.enabled
        # is off, and asks for it only in its filter-pushdown worker: the reader that takes filters
        # is given there, so that sessions without the setting read as before
        cls = FilteringReader if _in_pushdown_worker() else KafkaWireReader
        return cls(dict(self.options))

    def streamReader(self, schema):
        """``spark.readStream.format("kafkawire").load(dir)``: completed files of a rotating
        capture directory (see stream.py)."""
        from .stream import KafkaWireStreamReader

        return KafkaWireStreamReader(dict(self.options))


class KafkaWireReader(DataSourceReader):
    def __init__(self, options: dict):
        self.options = Options.parse(options)
        paths = paths_option(options)
        if not paths:
            raise ValueError("kafkawire: give the capture files to load(), e.g. load('captures/')")
        self.stats: dict[str, tuple[int, int]] = {}  # each file's (size, modification time) from the listing
        self.files = list_files(paths, self.options.path_glob_filter, self.options.endpoint_url, stats=self.stats)
        self.predicate = Predicate()

    def partitions(self) -> list[InputPartition]:
        ok = self.predicate.file_ok  # (a series' files before a kept one are read for its state)
        parts = [[u for u in units if any(ok(f) for f in ((u[0],) if isinstance(u[0], str) else u[0]))]
                 for units in plan(self.files, self.options, self.stats)]
        return [CaptureFilePartition(units) for units in parts if units] or [CaptureFilePartition([])]

    def read(self, partition: CaptureFilePartition) -> Iterator:  # type: ignore[override]  # partitions are ours
        for path, share in partition.units:
            yield from iter_batches(path, self.options, self.predicate, share)


class FilteringReader(KafkaWireReader):
    def pushFilters(self, filters: list) -> Iterator:
        """Take the filters the decoder can apply early (see predicate.py); Spark keeps the rest."""
        self.predicate, left = from_spark(filters, (n for n, _ in COLUMNS[self.options.rows]))
        yield from left


#: the Python worker Spark runs its filter pushdown in (pyspark/sql/worker/data_source_pushdown_filters.py)
PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def _in_pushdown_worker() -> bool:
    """Is this process Spark's filter-pushdown worker? Spark starts one Python process (or daemon)
    per worker module and names the module on its command line: ``python -m pyspark.daemon
    <module>``, or ``python -m <module>`` without the daemon."""
    return any(a == PUSHDOWN_WORKER or a.endswith("data_source_pushdown_filters.py") for a in sys.argv)
