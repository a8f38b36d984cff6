"""A SparkSession ready for the kafkawire source, for jobs, notebooks and tests."""

from __future__ import annotations

import os
import sys


def spark_session(app_name: str = "kafkawire", master: str | None = None):
    """Get or create a SparkSession whose Python workers run this interpreter.

    Spark's workers otherwise start ``python3`` from PATH, which may lack pyarrow and this
    package. Under spark-submit the master comes from spark-submit; otherwise it is local[*].
    """
    submitted = _submitted()
    if not submitted:  # under spark-submit, its settings (--conf spark.pyspark.python, --archives) decide
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not submitted:
        builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    builder = (
        builder
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # filters on headers and endpoints are applied while decoding (DataSourceReader.pushFilters)
        .config("spark.sql.python.filterPushdown.enabled", "true")
    )
    if master or not submitted:
        builder = builder.master(master or "local[*]")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from . import register

    register(spark)  # explicit, in case the installed auto-registration is not visible
    return spark


def _submitted() -> bool:
    """Is this driver started by spark-submit (whose settings then decide)?"""
    return bool(os.environ.get("SPARK_ENV_LOADED") or os.environ.get("PYSPARK_GATEWAY_PORT"))
