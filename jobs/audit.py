"""The audit job: decode captures, run every audit, write Parquet and report.html, check policies.

    python jobs/audit.py CAPTURES... [--out DIR] [--config audit.toml] [--target-release 4.0]
    spark-submit jobs/audit.py CAPTURES... --out s3://bucket/audits
    python jobs/audit.py DIR --incremental --checkpoint CKPT --out DIR   (only files not seen before)

The entry point only: the job is spark_kafkawire/audits/job.py (``--help`` says all it does).
"""

import sys

from spark_kafkawire.audits.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
