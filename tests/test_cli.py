"""The command line, run through the installed `kafkawire` script, checked against tshark's
decoding of the same captures and against read_capture's own files."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from conftest import SAMPLES, text_table
from spark_kafkawire import read_capture
from test_tshark import MANIFEST, tshark_pdus

SCRIPT = Path(sys.executable).parent / "kafkawire"
CAPTURE = SAMPLES / "tansu-admin-txn.pcap"
PORTS = tuple(MANIFEST[CAPTURE.name]["broker_ports"])


def run(*args, check=True):
    assert SCRIPT.exists(), "the package installs the kafkawire script"
    r = subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_show_json_counts_the_requests_tshark_decodes():
    """Every request tshark finds (by client port and correlation id) is one row of `show`, with
    the same api key and version."""
    pdus = tshark_pdus(CAPTURE, PORTS)
    theirs = {(c, corr): (k, v) for (c, _b, d, corr), (k, v, _cid) in pdus.items() if d == "request" and k is not None}
    rows = [json.loads(line) for line in run("show", CAPTURE, "--format", "json").stdout.splitlines()]
    ours = {(r["client_port"], r["correlation_id"]): (r["api_key"], r["api_version"]) for r in rows}
    assert len(theirs) > 50
    assert {k: ours.get(k) for k in theirs} == theirs


def test_where_columns_limit_and_csv():
    pdus = tshark_pdus(CAPTURE, PORTS)
    produce = sum(1 for (_c, _b, d, _corr), (k, _v, _cid) in pdus.items() if d == "request" and k == 0)
    out = run("show", CAPTURE, "--where", "api_name = 'Produce'", "--columns", "api_key,client_id",
              "--format", "csv").stdout.splitlines()
    assert out[0] == '"api_key","client_id"' and len(out) - 1 == produce > 0
    assert len(run("show", CAPTURE, "--limit", "3", "--format", "json").stdout.splitlines()) == 3
    table = run("show", CAPTURE, "--rows", "connections", "--columns", "client_port,broker_port").stdout
    assert table.splitlines()[0].split() == ["client_port", "broker_port"]


def test_summary_counts_per_api_equal_tshark():
    pdus = tshark_pdus(CAPTURE, PORTS)
    names = {r["api_key"]: r["api_name"] for r in read_capture(CAPTURE).to_pylist() if r["api_key"] is not None}
    theirs = Counter(names[k] for (_c, _b, d, _corr), (k, _v, _cid) in pdus.items() if d == "request" and k in names)
    out = run("summary", CAPTURE).stdout
    section = out.split("exchanges by api, client and broker\n")[1].split("\n\nclients")[0].splitlines()
    header = section[0]
    at = header.index("exchanges")  # columns are padded to the header's positions
    ours = Counter()
    for line in section[2:]:
        ours[line.split()[0]] += int(line[at:].split()[0])
    assert ours == theirs
    assert "capture health" in out and CAPTURE.name in out


def test_convert_writes_what_read_capture_reads(tmp_path):
    run("convert", SAMPLES, "--to", tmp_path / "x.parquet")
    assert pq.read_table(tmp_path / "x.parquet").to_pylist() == read_capture(SAMPLES).to_pylist()
    run("convert", CAPTURE, "--rows", "partitions", "--to", tmp_path / "p.csv")
    assert pacsv.read_csv(tmp_path / "p.csv").num_rows == read_capture(CAPTURE, rows="partitions").num_rows


def test_errors_are_one_line_naming_the_problem(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    for args, needle in ((("show", tmp_path / "missing.pcap"), "missing.pcap"),
                         (("show", tmp_path / "notes.txt"), "notes.txt"),
                         (("show", CAPTURE, "-o", "mode=LENIENT"), "mode"),
                         (("show", CAPTURE, "--where", "no_such_column = 1"), "no_such_column"),
                         (("convert", CAPTURE, "--to", tmp_path / "x.xlsx"), "x.xlsx")):
        r = run(*args, check=False)
        assert r.returncode == 1 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "spark_kafkawire", "show", CAPTURE, "--limit", "1", "--format", "json"],
                       capture_output=True, text=True, check=True)
    assert json.loads(r.stdout)["capture_file"] == str(CAPTURE)


def test_read_pandas_keeps_integers_nullable():
    pdf = __import__("spark_kafkawire").read_pandas(SAMPLES / "mock-kcat.pcap")
    assert str(pdf["api_version"].dtype) == "Int16" and str(pdf["correlation_id"].dtype) == "Int32"
    assert pdf["api_version"].dropna().tolist() == [int(v) for v in pdf["api_version"].dropna()]


def _tshark_apiversions_answers():
    """(negotiations, other errors) of ApiVersions responses in the samples, as tshark reads them:
    response api key 18 with error 35 (UNSUPPORTED_VERSION), and with any other non-zero error."""
    from test_tshark import CASES, tshark_fields

    negotiated = other = 0
    for path, ports in CASES:
        for keys, errs in tshark_fields(path, ports, ("kafka.response_key", "kafka.error")):
            keys, errs = keys.split(";") if keys else [], errs.split(";") if errs else []
            if len(keys) == 1 and keys[0] == "18" and errs:
                negotiated += errs[0] == "35"
                other += errs[0] not in ("0", "35")
    return negotiated, other


def test_summary_counts_version_negotiation_apart_and_claims_no_percentile_from_few():
    """ApiVersions answered UNSUPPORTED_VERSION is the client's version negotiation (it asks again
    lower): counted in ``negotiated`` as tshark sees them, never in ``errors``. p50/p99 only where
    at least 20 exchanges were timed (--min-latency-n)."""
    negotiated, other = _tshark_apiversions_answers()
    assert negotiated > 0
    out = run("summary", SAMPLES, "--max-rows", "1000").stdout
    table = text_table(out, "exchanges by api, client and broker")
    head, rows = table[0], [dict(zip(table[0], r)) for r in table[1:]]
    assert head[-1] == "negotiated"
    api = [r for r in rows if r["api_name"] == "ApiVersions"]
    assert sum(int(r["negotiated"]) for r in api) == negotiated
    assert sum(int(r["errors"]) for r in api) == other
    assert all((r["p50_ms"] == "") == (int(r["timed"]) < 20) for r in rows)
    few = text_table(run("summary", SAMPLES, "--min-latency-n", "1", "--max-rows", "1000").stdout, "exchanges by api, client and broker")
    assert all(r[head.index("p50_ms")] for r in few[1:] if int(r[head.index("timed")]) >= 1)
    health = text_table(out, "capture health")
    assert health[0][-2:] == ["damaged_exchanges", "file_damage"]
    assert all(r[-2] == "0" and r[-1] == "none" for r in health[1:])  # clean samples: 0, not blank


# -- the command line as a user types it -----------------------------------------------------------
TLS_DIR = Path(__file__).parent / "tls"


def _syns(pcap: Path, port: int) -> int:
    """Connections to ``port`` (their SYNs), counted with dpkt."""
    import dpkt

    n = 0
    with open(pcap, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            tcp = dpkt.ethernet.Ethernet(buf).data.data
            if isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == port and tcp.flags & dpkt.tcp.TH_SYN and \
                    not tcp.flags & dpkt.tcp.TH_ACK:
                n += 1
    return n


def test_the_row_shape_is_chosen_once_and_checked():
    bad = run("show", SAMPLES, "-o", "rows=bogus", check=False)
    assert bad.returncode == 1 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1
    assert "rows" in bad.stderr and "bogus" in bad.stderr
    conns = run("show", CAPTURE, "-o", "rows=connections").stdout.splitlines()
    assert conns[0].split()[:2] == ["first_time", "client_ip"]
    assert len(conns) - 2 == sum(_syns(CAPTURE, p) for p in PORTS)
    twice = run("show", CAPTURE, "--rows", "messages", "-o", "rows=connections", check=False)
    assert twice.returncode == 1 and "given twice" in twice.stderr
    assert run("summary", CAPTURE, "-o", "rows=messages", check=False).returncode == 1
    neg = run("show", CAPTURE, "--limit", "-5", check=False)
    assert neg.returncode == 1 and neg.stderr.strip() == "kafkawire: --limit -5: give 0 or more"


def test_tls_not_decrypted_is_said_and_the_key_log_flag_decrypts():
    info = json.loads((TLS_DIR / "manifest.json").read_text())["tls13-aes256gcm"]
    pcap, keylog = TLS_DIR / "tls13-aes256gcm.pcap", TLS_DIR / "tls13-aes256gcm.keylog"
    n = _syns(pcap, info["tls_port"])
    for command in (("show", pcap), ("summary", pcap)):
        r = run(*command)
        assert r.stderr.strip().splitlines()[-1].startswith(f"kafkawire: {n} TLS connections") and \
            r.stderr.strip().endswith("were not decrypted: --tls-keylog FILE decrypts them"), r.stderr
        r = run(*command, "--tls-keylog", keylog)
        assert "not decrypted" not in r.stderr
    rows = [json.loads(ln) for ln in run("show", pcap, "--tls-keylog", keylog, "--format", "json").stdout.splitlines()]
    assert sum(r["broker_port"] == info["tls_port"] and r["status"] == "complete" for r in rows) >= 10
    assert "-o NAME=VALUE" in run("show", "--help").stdout and "tlsKeyLog" in run("show", "--help").stdout


def test_cut_cells_end_with_an_ellipsis_and_summaries_count_what_they_leave_out():
    out = run("show", CAPTURE, "--columns", "request", "--limit", "5").stdout.splitlines()[2:]
    assert out and all(len(ln) <= 60 for ln in out) and any(ln.endswith("\u2026") for ln in out)
    whole = run("summary", SAMPLES, "--max-rows", "1000").stdout
    groups = whole.split("\nclients\n")[0].strip().splitlines()[3:]  # title, header and rule first
    cut = run("summary", SAMPLES, "--max-rows", "2").stdout
    assert f"... {len(groups) - 2} more rows" in cut


def test_a_closed_pipe_ends_quietly_and_the_version_is_known():
    from importlib.metadata import version

    r = subprocess.run(f"'{SCRIPT}' show '{SAMPLES}' --format json | head -1", shell=True, capture_output=True,
                       text=True, timeout=300)
    # (besides the one line naming the files of sample_pcaps/ that are not captures)
    said = [ln for ln in r.stderr.splitlines() if not ln.startswith("kafkawire: skipped ")]
    assert said == [] and len(r.stdout.splitlines()) == 1
    assert run("--version").stdout.strip() == f"kafkawire {version('spark-kafkawire')}"


def test_summary_lists_the_versions_each_client_sends_as_tshark_decodes_them():
    """`summary`'s "api versions by client": per client id and api, the request versions, as tshark's
    Kafka dissector reads them from the same capture (the upgrade question, without Spark)."""
    pdus = tshark_pdus(CAPTURE, PORTS)
    names = {r["api_key"]: r["api_name"] for r in read_capture(CAPTURE).to_pylist() if r["api_key"] is not None}
    theirs: dict = {}
    for (_c, _b, d, _corr), (k, v, cid) in pdus.items():
        if d == "request" and k in names and v is not None:
            theirs.setdefault((cid or "", names[k]), set()).add(v)
    out = run("summary", CAPTURE).stdout
    section = out.split("api versions by client\n")[1].split("\n\n")[0].splitlines()
    header = section[0]
    cut = [header.index(c) for c in ("client_software", "api_name", "versions", "exchanges")]
    ours = {}
    for line in section[2:]:
        cid, api, versions = line[:cut[0]].strip(), line[cut[1]:cut[2]].strip(), line[cut[2]:cut[3]].strip()
        ours.setdefault((cid, api), set()).update(int(v) for v in versions.replace("v", "").split(", "))
    assert theirs and {k: ours.get(k) for k in theirs} == theirs


def test_a_rotation_series_reads_as_the_whole_capture(tmp_path):
    """A capture cut by editcap into a directory: show, convert and summary read it as the one
    capture (every exchange as the whole capture's status, one connection row per connection);
    -o stitch=false reads each file apart (as many connection rows as a file holds a part)."""
    import shutil

    import pytest

    if shutil.which("editcap") is None:
        pytest.skip("editcap (Wireshark) not installed")
    capture = SAMPLES / "mock-confluent-group.pcapng"
    folder = tmp_path / "rotated"
    folder.mkdir()
    subprocess.run(["editcap", "-c", "20", str(capture), str(folder / "part.pcapng")], check=True)
    assert len(list(folder.iterdir())) > 2
    whole = read_capture(str(capture))
    run("convert", folder, "--to", tmp_path / "x.parquet")
    got = pq.read_table(tmp_path / "x.parquet")
    assert Counter(got.column("status").to_pylist()) == Counter(whole.column("status").to_pylist())
    run("convert", folder, "--rows", "connections", "--to", tmp_path / "c.parquet")
    conns = read_capture(str(capture), rows="connections").num_rows
    assert pq.read_table(tmp_path / "c.parquet").num_rows == conns
    run("convert", folder, "--rows", "connections", "-o", "stitch=false", "--to", tmp_path / "apart.parquet")
    assert pq.read_table(tmp_path / "apart.parquet").num_rows > conns
    # (the tables before capture health, which is per file)
    summary = run("summary", folder).stdout.split("\ncapture health")[0]
    assert summary == run("summary", capture).stdout.split("\ncapture health")[0]


def _midstream(pcap: Path) -> int:
    """Connections whose first packet in the capture is not a SYN (begun before it), with dpkt."""
    import dpkt

    first: dict[frozenset, bool] = {}
    with open(pcap, "rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = getattr(ip, "data", None)
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            key = frozenset({(ip.src, tcp.sport), (ip.dst, tcp.dport)})
            first.setdefault(key, bool(tcp.flags & dpkt.tcp.TH_SYN))
    return sum(1 for syn in first.values() if not syn)


def test_the_first_look_says_how_files_were_joined_and_shows_the_split(tmp_path):
    """A capture cut a third of the way in, then rotated into files: summary says once on stderr
    that the files were read as one rotation series and how many connections began before the
    capture (as many as dpkt finds whose first packet is no SYN); show's table has the broker's
    address and the latency split, a reason is never cut, a rotated file's name keeps its time."""
    import shutil

    import pytest

    import damage

    if shutil.which("editcap") is None:
        pytest.skip("editcap (Wireshark) not installed")
    packets, linktype = damage.read(CAPTURE)
    late = damage.write(tmp_path / "late.pcap", packets[len(packets) // 3:], linktype)
    folder = tmp_path / ("a-long-directory-name-" * 3)
    folder.mkdir()
    subprocess.run(["editcap", "-c", str(len(packets) // 5), str(late), str(folder / "kafka.pcap")], check=True)
    files = sorted(folder.iterdir())
    assert len(files) >= 3
    began = _midstream(late)
    assert began >= 1
    r = run("summary", folder)
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("kafkawire: ")]
    assert said == [f"kafkawire: {len(files)} files read as one capture, a rotation series ({files[0].name} to "
                    f"{files[-1].name}: its connections go on from file to file; -o stitch=false reads them apart); "
                    f"{began} connection{'s' if began != 1 else ''} began before the capture (their first requests "
                    "and the facts they carried are not in it)"], r.stderr
    header = r.stdout.split("\nclients\n")[1].splitlines()[0].split()
    assert header[:5] == ["client_id", "library", "exchanges", "connections", "network_p50_ms"], header
    assert "read as one capture" not in run("summary", folder, "-o", "stitch=false").stderr
    head = run("show", folder, "--limit", "1").stdout.splitlines()[0].split()
    assert {"broker_ip", "network_ms", "broker_ms"} <= set(head)
    shown = run("show", folder, "--columns", "capture_file,detail", "--where", "detail is not null").stdout
    whole = [r["detail"] for r in read_capture(str(folder)).to_pylist() if r["detail"]]
    assert whole and all(d in shown for d in set(whole))  # (every reason whole)
    cells = [ln.split()[0] for ln in shown.splitlines()[2:] if ln.strip()]
    assert cells and all(c.startswith("\u2026") and c.endswith(tuple(f.name for f in files)) for c in cells), cells


def _drained(pipe: int) -> None:
    """Until its reader has taken every byte written to a pipe (then a moment to decode them)."""
    import fcntl
    import termios
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = fcntl.ioctl(pipe, termios.FIONREAD, b"\0\0\0\0")
        if int.from_bytes(pending, sys.byteorder) == 0:
            break
        time.sleep(0.05)
    time.sleep(0.5)


def test_a_capture_on_standard_input_is_read_as_it_comes_and_ended_by_ctrl_c(tmp_path):
    """``kafkawire show -``: a pcap stream on standard input (tcpdump's own output, ``tcpdump -r
    FILE -U -w -``) gives the rows the file gives; a stream that stops half way and stays open gives
    its first rows before it ends (printed as they complete), and Ctrl-C ends it as a file's end
    does: the rows of the half read, as read_capture gives them for that half written to a file."""
    import os
    import shutil
    import signal

    import pytest

    import damage

    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump not installed")
    piped = subprocess.run(f"tcpdump -r '{CAPTURE}' -U -w - 2>/dev/null | '{SCRIPT}' show - --format json",
                           shell=True, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    rows = [json.loads(ln) for ln in piped.stdout.splitlines()]
    whole = read_capture(str(CAPTURE)).to_pylist()
    assert [(r["correlation_id"], r["status"]) for r in rows] == [(r["correlation_id"], r["status"]) for r in whole]
    assert f"standard input ended: {len(whole)} rows shown" in piped.stderr
    # half the packets, then the writer waits with the pipe open; Ctrl-C ends the read
    packets, linktype = damage.read(CAPTURE)
    half = damage.write(tmp_path / "half.pcap", packets[: len(packets) // 2], linktype)
    expected = read_capture(str(half)).to_pylist()
    read_end, write_end = os.pipe()
    show = subprocess.Popen([str(SCRIPT), "show", "-", "--format", "json"], stdin=read_end, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(read_end)
    os.write(write_end, half.read_bytes())
    first = show.stdout.readline()  # (printed while the stream is still open)
    assert json.loads(first)["correlation_id"] == expected[0]["correlation_id"]
    _drained(write_end)
    show.send_signal(signal.SIGINT)
    out, err = show.stdout.read(), show.stderr.read()  # (not communicate: readline's buffer holds rows)
    show.wait(60)
    os.close(write_end)
    got = [json.loads(first)] + [json.loads(ln) for ln in out.splitlines()]
    assert show.returncode == 0, err
    assert sorted((r["correlation_id"], r["client_port"], r["status"]) for r in got) == \
        sorted((r["correlation_id"], r["client_port"], r["status"]) for r in expected)
    # summary - : its tables at Ctrl-C
    read_end, write_end = os.pipe()
    summ = subprocess.Popen([str(SCRIPT), "summary", "-"], stdin=read_end, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(read_end)
    os.write(write_end, half.read_bytes())
    _drained(write_end)
    summ.send_signal(signal.SIGINT)
    out, err = summ.communicate(timeout=60)
    os.close(write_end)
    assert summ.returncode == 0 and "exchanges by api, client and broker" in out, err
    statuses = out.split("\nstatuses\n")[1].split("\n\n")[0].splitlines()[2:]
    assert sum(int(ln.split()[-1]) for ln in statuses) == len(expected)
