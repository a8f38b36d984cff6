"""Installed as the top-level module ``pyspark_kafkawire``.

Spark looks for installed modules named ``pyspark_*`` with a ``DefaultSource`` and registers them,
so ``spark.read.format("kafkawire")`` works without calling ``spark_kafkawire.register``.
"""

from spark_kafkawire.spark.datasource import KafkaWireDataSource as DefaultSource

__all__ = ["DefaultSource"]
