"""What the audit job checks before Spark starts: every policy's type and range, from a config file
or a flag, in one line naming it and its value (exit status 1); Spark never starts for a bad
setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT, SAMPLES


def _job(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(SAMPLES / "mock-kcat.pcap"),
                           "--out", str(tmp_path / "out"), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))


@pytest.mark.parametrize("config,said", [
    ('max_error_rate = "abc"', "max_error_rate = 'abc': want a number"),
    ("max_error_rate = 5", "max_error_rate = 5: want a fraction from 0 to 1"),
    ("max_undecoded_fraction = -0.5", "max_undecoded_fraction = -0.5: want a fraction from 0 to 1"),
    ("max_retransmission_rate = 1.5", "max_retransmission_rate = 1.5: want a fraction from 0 to 1"),
    ("max_broker_p99_ms = -1", "max_broker_p99_ms = -1: want 0 or more"),
    ("min_latency_n = 2.5", "min_latency_n = 2.5: want a whole number"),
    ('allow_weak_tls = "yes"', "allow_weak_tls = 'yes': want true or false"),
    ('max_p99_ms = {Produce = "x"}', "max_p99_ms = {'Produce': 'x'}: want API names and milliseconds"),
    ("max_lag_seconds = nan", "max_lag_seconds = nan: want a number"),
])
def test_a_bad_policy_in_a_config_file_is_one_line_before_spark(tmp_path, config, said):
    cfg = tmp_path / "audit.toml"
    cfg.write_text(config + "\n")
    r = _job(tmp_path, "--config", cfg)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == f"audit: {cfg}: {said}" or r.stderr.strip().startswith(f"audit: {cfg}: {said}"), \
        r.stderr
    assert "starting Spark" not in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag,said", [
    (["--max-error-rate", "5"], "--max-error-rate 5.0: want a fraction from 0 to 1"),
    (["--max-error-rate", "-1"], "--max-error-rate -1.0: want a fraction from 0 to 1"),
    (["--max-gap-fraction", "2"], "--max-gap-fraction 2.0: want a fraction from 0 to 1"),
    (["--min-latency-n", "-3"], "--min-latency-n -3: want 0 or more"),
    (["--min-exchanges", "-1"], "--min-exchanges -1: want 0 or more"),
    (["--target-release", "9.9"], "target release '9.9' is not one of"),
])
def test_a_bad_flag_is_one_line_before_spark(tmp_path, flag, said):
    r = _job(tmp_path, *flag)
    assert r.returncode == 1 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "starting Spark" not in r.stderr


def test_help_names_every_audit_and_has_a_flag_for_every_policy():
    from dataclasses import fields

    from spark_kafkawire.audits import AUDITS, Policy

    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), "--help"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for name in AUDITS:
        assert name in text.split("--audits", 1)[1], name
    for f in fields(Policy):
        flag = "--max-p99" if f.name == "max_p99_ms" else "--" + f.name.replace("_", "-")
        assert flag + " " in text, flag
    # --target-release lists the releases the release table holds, patch release and 4.1/4.2 included
    assert "3.9, 4.0, 4.0.1, 4.1, 4.2, 4.3" in text.split("--target-release VALUE", 1)[1]


def test_every_policy_flag_reaches_the_policy(tmp_path):
    """A flag that was missing before (--max-lag-records, --allow-weak-tls, --hygiene-fail-on) is
    checked like the others: a bad one is refused naming it."""
    r = _job(tmp_path, "--max-lag-seconds", "-2")
    assert r.returncode == 1 and "--max-lag-seconds -2.0: want 0 or more" in r.stderr
    r = _job(tmp_path, "--max-empty-fetch-fraction", "3")
    assert r.returncode == 1 and "--max-empty-fetch-fraction 3.0: want a fraction from 0 to 1" in r.stderr
    r = _job(tmp_path, "--hygiene-fail-on", "acks0,nonsense")
    assert r.returncode == 1 and "'nonsense' is not a finding" in r.stderr


@pytest.mark.spark
def test_a_failed_decode_task_is_one_escaped_line(tmp_path):
    """A task of the job's own decode that fails (FAILFAST on a capture cut short, read by the
    processes that decode local captures while Spark starts) ends the job with one line naming the
    file, exit 1, no report; the file's name (a terminal escape in it) is shown escaped."""
    src = SAMPLES / "tansu-confluent-codecs.pcap"
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "cut\x1b[31m.pcap").write_bytes(src.read_bytes()[: src.stat().st_size // 2 + 11])
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(captures), "--out", str(tmp_path / "out"),
                        "--option", "mode=FAILFAST", "--driver-decode-max", "0", "--quiet"], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert r.returncode == 1 and "\x1b" not in r.stderr, r.stderr
    assert "cut\\x1b[31m.pcap: capture_damaged: packet" in r.stderr and "no report was written" in r.stderr
    assert not (tmp_path / "out" / "report.html").exists()


@pytest.mark.spark
@pytest.mark.parametrize("where", [[], ["--driver-decode-max", "0"]], ids=["by the driver", "by processes here"])
def test_a_job_that_decodes_here_starts_no_python_worker(tmp_path, where):
    """Where the job decodes the captures itself (small ones in the driver, larger ones in processes
    of this machine), nothing runs Python on Spark's workers: with a worker interpreter that only
    leaves a mark and fails, the job still ends with its verdicts and report, and no worker started."""
    mark = tmp_path / "worker-started"
    worker = tmp_path / "python-worker"
    worker.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    worker.chmod(0o755)
    r = subprocess.run([sys.executable, str(ROOT / "jobs" / "audit.py"), str(SAMPLES / "mock-kcat.pcap"),
                        "--out", str(tmp_path / "out"), *where], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYSPARK_PYTHON=str(worker)))
    assert r.returncode in (0, 2, 3), r.stderr[-2000:]
    assert (tmp_path / "out" / "report.html").exists() and not mark.exists()


@pytest.mark.parametrize("argv,said", [
    (["--incremntal"], "audit: unrecognized arguments: --incremntal (did you mean --incremental?); "
                       "audit.py --help lists the options"),
    (["--max-eror-rate=0.1"], "audit: unrecognized arguments: --max-eror-rate=0.1 (did you mean --max-error-rate?); "
                              "audit.py --help lists the options"),
    (["--max-error-rate", "abc"], "audit: argument --max-error-rate: invalid float value: 'abc'; "
                                  "audit.py --help lists the options"),
])
def test_a_mistyped_option_is_one_line_and_exit_status_1(tmp_path, argv, said):
    """An option argparse refuses is one line naming it (and the flag it was likely meant to be),
    with exit status 1, the job's status for an error: not 22 lines of usage and status 2, which
    means "a policy failed" to the scheduler."""
    r = _job(tmp_path, *argv)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.strip() == said, r.stderr
    assert not (tmp_path / "out").exists()


def test_the_command_line_says_a_mistyped_option_in_one_line():
    """The same for ``kafkawire``: a sub-command's unknown flag names the nearest of its flags."""
    r = subprocess.run([sys.executable, "-m", "spark_kafkawire", "show", str(SAMPLES / "mock-kcat.pcap"), "--limt", "3"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "kafkawire: unrecognized arguments: --limt 3 (did you mean --limit?); " \
                               "kafkawire --help lists the options", r.stderr
