"""The audit job: decode captures, run every audit, write Parquet and report.html, check policies.

    python jobs/audit.py CAPTURES... [--out DIR] [--config audit.toml] [--target-release 4.0]
    spark-submit jobs/audit.py CAPTURES... --out s3://bucket/audits
    python jobs/audit.py DIR --incremental --checkpoint CKPT --out DIR   (only files not seen before)

The entry point only: the job is spark_kafkawire/audits/job.py (``--help`` says all it does).
"""

import os
import sys

from spark_kafkawire.audits.job import main

if __name__ == "__main__":
    status = main(sys.argv[1:])
    # The run is over: its files are written and closed, Spark is stopped, what it says is flushed.
    # Leave without tearing the interpreter down: Arrow's native thread pools, destroyed at exit while
    # a worker is alive (after a write that failed, say), abort the process (SIGABRT, "terminate
    # called without an active exception") and the exit status would no longer say what happened.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
