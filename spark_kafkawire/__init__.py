"""spark_kafkawire: Kafka wire-protocol captures as Arrow tables and a Spark data source."""

from . import compiled  # noqa: F401  (first: it decides which modules are compiled ones)
from .wire.capture import CaptureError
from .reader import Options, iter_batches, list_files, read_capture, read_pandas

__version__ = "0.1.0"
__all__ = ["CaptureError", "Options", "iter_batches", "list_files", "read_capture", "read_pandas", "register",
           "spark_session",
           "__version__"]


def register(spark) -> None:
    """Register the 'kafkawire' data source with a SparkSession, after checking that Spark's Python
    workers can import this package and pyarrow (else one line says which interpreter they run)."""
    from .spark.session import register as spark_register

    spark_register(spark)


def spark_session(app_name: str = "kafkawire", master: str | None = None, filter_pushdown: bool = False,
                  small_job: bool = False, jvm_log: str | None = None, quick_jit: bool = False):
    """A SparkSession whose Python workers use this interpreter, with 'kafkawire' registered;
    ``filter_pushdown=True``: filters on header and endpoint columns applied while decoding;
    ``small_job=True``: a driver JVM tuned for a short job (``quick_jit=True``: for a job of minutes);
    ``jvm_log``: a file the JVM started now writes its stderr to (in a notebook, one of its own by
    itself; see session.spark_session)."""
    from .spark.session import spark_session as make

    return make(app_name, master, filter_pushdown=filter_pushdown, small_job=small_job, jvm_log=jvm_log,
                quick_jit=quick_jit)
