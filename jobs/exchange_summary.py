"""Exchange summary: decode captures, keep the exchanges as Parquet, print a summary.

    python jobs/exchange_summary.py CAPTURES... [--out DIR] [--ports 9092,9093] [--option KEY=VALUE ...]
    spark-submit jobs/exchange_summary.py CAPTURES... [--out DIR]

For each api_name and client_id: exchanges, errors, p50 and p99 latency (ms, where at least 20
exchanges were timed), unanswered requests, the busiest first: the exchange_summary audit of
jobs/audit.py, which runs it with all the others.
"""

from __future__ import annotations

import argparse
import sys

import spark_kafkawire
from spark_kafkawire.cli import print_table
from spark_kafkawire.reader import job_options


def summarize(df):
    from spark_kafkawire.audits import Policy, Rows
    from spark_kafkawire.audits.exchange_summary import exchange_summary

    return exchange_summary(Rows(df, None, None), Policy())["exchange_summary"]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", help="capture files, directories or globs")
    ap.add_argument("--out", default="out/exchanges", help="Parquet output directory (overwritten)")
    ap.add_argument("--ports", help="only connections on these TCP ports (comma-separated)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a reader option (repeat), e.g. minPartitions=8 (see README, Options)")
    args = ap.parse_args(argv)
    # paths and options are checked before Spark starts: one line, not a Java stack trace
    try:
        options = job_options(args.option, ports=args.ports)
        spark_kafkawire.list_files(args.captures, spark_kafkawire.Options.parse(options).path_glob_filter)
    except (ValueError, OSError, spark_kafkawire.CaptureError) as e:
        print(f"exchange_summary: {str(e).removeprefix('kafkawire: ')}", file=sys.stderr)
        return 1

    spark = spark_kafkawire.spark_session("kafkawire-exchange-summary")
    df = spark.read.format("kafkawire").options(**options).load(args.captures)
    df.write.mode("overwrite").parquet(args.out)
    exchanges = spark.read.parquet(args.out)
    total = exchanges.count()
    by_status = {r["status"]: r["count"] for r in exchanges.groupBy("status").count().collect()}
    print(f"\n{total} exchanges written to {args.out}; by status: {by_status}\n")
    # printed by the command line's table printer: client ids escaped for the terminal
    print_table(summarize(exchanges).limit(1000).toArrow(), width=200)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
