"""Installing: with a C compiler the compiled parts are built and used; without one the package
still builds and installs, holds no compiled module, and reads captures to the same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_pcaps" / "mock-confluent-group.pcapng"
#: what the package imported uses, and the rows of each capture named (one fresh process)
PROBE = """
import json, sys
import spark_kafkawire as k
from spark_kafkawire.kafka import body
from spark_kafkawire import compiled
out = {"native": compiled.native, "lane": compiled.lane_module is not None, "reason": compiled.native_reason,
       "file": k.__file__, "body": body.__file__}
for path in sys.argv[1:]:
    out[path] = k.read_capture(path).drop_columns(["capture_file"]).to_pylist()
print(json.dumps(out, default=str))
"""

pytestmark = pytest.mark.skipif(bool(os.environ.get("KAFKAWIRE_PURE_PYTHON")),
                                reason="about installing, not decoding: run once, in the compiled tier")


def _probe(cwd: Path, env: dict | None = None, paths: list[Path] = [SAMPLE]) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE] + [str(p) for p in paths], cwd=cwd, env=env, capture_output=True,
                       text=True, check=True)
    out = json.loads(r.stdout)
    if paths == [SAMPLE]:
        out["rows"] = out.pop(str(SAMPLE))
    return out


def test_the_installed_package_uses_its_compiled_parts(tmp_path):
    """make setup's install (a compiler is there): the lane and the mypyc-compiled stages are in
    use, and KAFKAWIRE_PURE_PYTHON=1 turns all of them off with the same rows."""
    got = _probe(tmp_path)  # not the checkout: the installed package
    assert "site-packages" in got["file"]
    assert got["native"] and got["lane"], got["reason"]
    pure = _probe(tmp_path, {**os.environ, "KAFKAWIRE_PURE_PYTHON": "1"})
    assert not pure["native"] and not pure["lane"] and "KAFKAWIRE_PURE_PYTHON" in pure["reason"]
    assert pure["rows"] == got["rows"] and len(got["rows"]) > 10


@pytest.mark.slow
def test_an_install_without_a_compiler_runs_as_python_with_the_same_rows(tmp_path):
    """The wheel built where the C compiler fails (CC=false): mypyc generates its C, nothing
    compiles, the build still succeeds; the wheel holds no compiled module and, installed, reads
    the sample capture to the rows the compiled install gives."""
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "wheel"), str(ROOT)],
                   env=env, check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "wheel").glob("spark_kafkawire-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "spark_kafkawire/kafka/body.py" in names
    assert not [n for n in names if n.endswith(".so")]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "KAFKAWIRE_PURE_PYTHON"}
    got = _probe(tmp_path, {**env, "PYTHONPATH": str(target)})
    assert got["file"].startswith(str(target))
    assert not got["native"] and not got["lane"] and "did not build" in got["reason"]
    assert got["rows"] == _probe(tmp_path)["rows"]


def _mid_stream_large_frames(path: Path) -> None:
    """A connection caught mid-stream (no SYN, the capture starts inside a request) whose requests
    are Produce requests of 300 KB (more than the framer's scan window) with their answers."""
    from pcapgen import Conversation, produce_request, response, write_pcap

    conv = Conversation()
    for corr in range(1, 6):
        conv.send("c", produce_request(8, corr, "big-producer", bytes(range(256)) * 1200), mss=1460)
        conv.send("b", response(corr, 0, 8))
    write_pcap(path, conv.packets[7:])  # from inside the first request


def test_the_compiled_stages_read_every_capture_as_their_sources_do(tmp_path):
    """The stages mypyc compiled (and the lane) against the same modules run as Python, on every
    sample capture, every public capture and one caught mid-stream with frames larger than the
    scan window (where a compiled int once stood for Python's True): the same rows."""
    from conftest import SHARED

    mid = tmp_path / "mid-stream.pcap"
    _mid_stream_large_frames(mid)
    paths = [mid] + sorted((ROOT / "sample_pcaps").glob("*.pcap*")) + \
        sorted(p for p in (SHARED / "public-captures").glob("*") if p.suffix in (".pcap", ".pcapng", ".cap"))
    env = {k: v for k, v in os.environ.items() if k != "KAFKAWIRE_PURE_PYTHON"}
    compiled = _probe(ROOT, env, paths)
    pure = _probe(ROOT, {**env, "KAFKAWIRE_PURE_PYTHON": "1"}, paths)
    assert compiled["native"] and not pure["native"]
    assert sum(r["status"] == "complete" for r in compiled[str(mid)]) >= 4  # the scan finds the frames
    for p in paths:
        assert compiled[str(p)] == pure[str(p)], p.name


def test_a_compiled_module_without_its_record_never_shadows_its_source(tmp_path):
    """A copy of the package whose compiled modules lie beside their sources but without the
    build's record of them (_native.json: a build by hand, a partial copy): the compiled stages
    are not used, and every stage module is imported from its .py source, with or without
    KAFKAWIRE_PURE_PYTHON, reading the same rows as the real install."""
    import shutil

    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "spark_kafkawire", copy / "spark_kafkawire",
                    ignore=shutil.ignore_patterns("_native.json", "__pycache__"))
    compiled = [p.name for p in (copy / "spark_kafkawire" / "kafka").glob("body.*.so")]
    if not compiled:
        pytest.skip("the checkout holds no compiled modules (make setup copies them there)")
    env = {k: v for k, v in os.environ.items() if k != "KAFKAWIRE_PURE_PYTHON"}
    want = _probe(tmp_path, env)["rows"]
    for more in ({}, {"KAFKAWIRE_PURE_PYTHON": "1"}):
        got = _probe(tmp_path, {**env, **more, "PYTHONPATH": str(copy)})
        assert got["file"].startswith(str(copy)) and not got["native"]
        assert got["body"].endswith("body.py"), (compiled, got["body"])
        assert got["rows"] == want


def test_a_source_edited_since_the_build_runs_instead_of_its_compiled_module(tmp_path):
    """A copy of the installed package, compiled modules and _native.json included, uses them;
    once one compiled module's source is edited, even by one letter (its size unchanged), none is
    used (they call each other directly), ``native_reason`` names the file, and the rows are the
    same."""
    import shutil
    import sysconfig

    installed = Path(sysconfig.get_paths()["platlib"]) / "spark_kafkawire"
    copy = tmp_path / "pkg"
    shutil.copytree(installed, copy / "spark_kafkawire", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "KAFKAWIRE_PURE_PYTHON"}
    env["PYTHONPATH"] = str(copy)
    before = _probe(tmp_path, env)
    assert before["file"].startswith(str(copy)) and before["native"], before["reason"]
    source = copy / "spark_kafkawire" / "kafka" / "body.py"
    text = source.read_text()
    assert "One small interpreter" in text
    source.write_text(text.replace("One small interpreter", "One small Interpreter", 1))
    after = _probe(tmp_path, env)
    assert not after["native"] and after["body"].endswith("body.py")
    assert after["reason"] == "kafka/body.py changed since the compiled modules were built (make setup rebuilds them)"
    assert after["rows"] == before["rows"]
