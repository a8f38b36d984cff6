"""The audit job's output directory: one run at a time, and nothing that looks complete unless it is.

* **One run at a time**: a run takes ``OUT/.lock`` (created exclusively: pid, host, start time) and
  gives it back at the end. A second run into the same directory fails at once, in one line naming
  the run that holds it. A lock whose process is gone (same host) is stale and taken over.
* **Nothing half-written looks complete**: the run first moves ``report.html`` aside (as
  ``report.previous.html``: a run never deletes what an earlier run found) and marks ``run.json`` as
  running; each audit table is written under a temporary name and put in place when
  whole, then the report the same way, and ``run.json`` says ``complete`` last (and the previous
  report is removed). A run that fails (disk full, a killed job) leaves no ``report.html``, the
  previous one as ``report.previous.html``, and a ``run.json`` that says it did not finish. A run that
  finds nothing new keeps the previous report as the report, saying so on top (``keep_previous``).
* **A directory that cannot be written** (read-only, missing permission, full) is one line naming
  it, before Spark starts where that can be known, and from the root cause of the failure after.

Local directories get all of this. On object storage (``s3://``...) renames are copies and there is
no exclusive create: the lock is checked and then written (two runs started within the same second
may both take it) and a table's swap is a copy; the report is still written last.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

from ..wire.fs import local_path, resolve

LOCK = ".lock"
REPORT = "report.html"
PREVIOUS = "report.previous.html"  # the last complete run's report, while a run makes its own
RUN = "run.json"
#: what the root cause of a failed write says, in the words of the operating system
_CAUSES = re.compile(r"No space left on device|Disk quota exceeded|Read-only file system|Permission denied|"
                     r"Access Denied|AccessDenied")


class OutputError(OSError):
    """The output directory cannot be used: says which, and why, in one line."""


def _now(t: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def root_cause(e: BaseException) -> str:
    """One line for an exception from a write, however deep (a Java stack trace) it was raised."""
    text = str(e)
    m = _CAUSES.search(text)
    if m:
        return m.group()
    causes = re.findall(r"Caused by: [\w.$]+: ([^\n]+)", text)
    if causes:
        return causes[-1].strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(e).__name__)
    return first[:300]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Files:
    """The output directory's files: read, written whole under a temporary name then renamed into
    place, moved aside, removed; local or on object storage (a URI)."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        self.local = local_path(self.uri)
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"

    def read_text(self, name: str) -> str | None:
        """A file of the directory, or None where there is none."""
        try:
            if self.local is not None:
                return Path(self.local, name).read_text()
            fs, base = resolve(self.uri)
            with fs.open_input_stream(f"{base}/{name}") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, FileNotFoundError):
            return None

    def _move(self, name: str, to: str) -> None:
        """``name`` renamed ``to`` (replacing it), where there is one."""
        if self.local is not None:
            try:
                os.replace(os.path.join(self.local, name), os.path.join(self.local, to))
            except FileNotFoundError:
                pass
            return
        import pyarrow.fs as pafs

        fs, base = resolve(self.uri)
        if fs.get_file_info(f"{base}/{name}").type != pafs.FileType.NotFound:
            fs.move(f"{base}/{name}", f"{base}/{to}")

    def _remove(self, name: str) -> None:
        if self.local is not None:
            try:
                os.unlink(os.path.join(self.local, name))
            except FileNotFoundError:
                pass
            return
        import pyarrow.fs as pafs

        fs, base = resolve(self.uri)
        if fs.get_file_info(f"{base}/{name}").type != pafs.FileType.NotFound:
            fs.delete_file(f"{base}/{name}")

    def write_text(self, name: str, text: str) -> str:
        """A file written whole under a temporary name, then renamed into place."""
        if self.local is not None:
            final = os.path.join(self.local, name)
            tmp = os.path.join(self.local, f".{name}.{self.run_id}.tmp")
            try:
                with open(tmp, "w") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, final)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            return final
        fs, base = resolve(self.uri)
        tmp = f"{base}/.{name}.{self.run_id}.tmp"
        with fs.open_output_stream(tmp) as f:
            f.write(text.encode())
        fs.move(tmp, f"{base}/{name}")
        return f"{self.uri}/{name}"

    def write_table(self, table, rel: str, partitioned: bool = True) -> None:
        """A table as Parquet under ``rel``, partitioned by capture_date (Hive-style directories, as
        Spark's partitionBy writes them; ``partitioned=False``: one directory, as the rows the
        driver decoded), replacing the table a run before wrote whole: written beside it under a
        temporary name, then swapped in (nothing half-written is left where a write fails)."""
        import pyarrow.dataset as ds

        part = ds.partitioning(table.select(["capture_date"]).schema, flavor="hive") if partitioned else None
        parent, leaf = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        if self.local is not None:
            final = os.path.join(self.local, rel)
            staged = os.path.join(self.local, parent, f".{leaf}.{self.run_id}.tmp")
            old = os.path.join(self.local, parent, f".{leaf}.{self.run_id}.old")
            try:
                ds.write_dataset(table, staged, format="parquet", partitioning=part,
                                 basename_template="part-{i}.parquet")
            except BaseException:
                shutil.rmtree(staged, ignore_errors=True)
                raise
            os.makedirs(staged, exist_ok=True)  # an empty result writes no file: an empty table
            if os.path.exists(final):
                os.replace(final, old)
            os.replace(staged, final)
            shutil.rmtree(old, ignore_errors=True)
            return
        fs, base = resolve(self.uri)
        staged = f"{base}/{parent}/.{leaf}.{self.run_id}.tmp".replace("//", "/")
        final = f"{base}/{rel}"
        ds.write_dataset(table, staged, format="parquet", partitioning=part, filesystem=fs,
                         basename_template="part-{i}.parquet")
        fs.create_dir(staged)
        try:
            fs.delete_dir(final)
        except (FileNotFoundError, OSError):
            pass
        fs.move(staged, final)


class OutputDir(Files):
    def __init__(self, uri: str):
        Files.__init__(self, uri)
        self.locked = False
        self.started = time.time()
        self.previous: dict = {}  # the run.json a run before left (see begin)

    # -- the lock ----------------------------------------------------------------------------------
    def lock(self) -> None:
        me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "run": self.run_id,
                         "started": _now(self.started)})
        if self.local is None:
            return self._lock_uri(me)
        try:
            os.makedirs(self.local, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{self.uri}: cannot create the output directory: {e.strerror}") from None
        path = os.path.join(self.local, LOCK)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale(path):
                    os.unlink(path)
                    continue
                raise OutputError(self._busy(path)) from None
            except OSError as e:
                raise OutputError(f"{self.uri}: cannot write there: {e.strerror}") from None
            try:
                os.write(fd, me.encode())
            except OSError as e:
                os.close(fd)
                os.unlink(path)
                raise OutputError(f"{self.uri}: cannot write there: {e.strerror}") from None
            os.close(fd)
            self.locked = True
            return
        raise OutputError(self._busy(path))

    def _holder(self, text: str) -> dict:
        try:
            return json.loads(text)
        except ValueError:
            return {}

    def _stale(self, path: str) -> bool:
        try:
            h = self._holder(Path(path).read_text())
        except OSError:
            return False
        return h.get("host") == socket.gethostname() and isinstance(h.get("pid"), int) and not _alive(h["pid"])

    def _busy(self, path: str) -> str:
        try:
            text = Path(path).read_text()
        except OSError:
            text = ""
        return self._busy_text(text)

    def _lock_uri(self, me: str) -> None:
        import pyarrow.fs as pafs

        fs, base = resolve(self.uri)
        path = f"{base}/{LOCK}"
        try:
            info = fs.get_file_info(path)
            if info.type != pafs.FileType.NotFound:
                with fs.open_input_stream(path) as f:
                    raise OutputError(self._busy_text(f.read().decode("utf-8", "replace")))
            with fs.open_output_stream(path) as f:
                f.write(me.encode())
        except OutputError:
            raise
        except Exception as e:
            raise OutputError(f"{self.uri}: cannot write there: {root_cause(e)}") from None
        self.locked = True

    def _busy_text(self, text: str) -> str:
        h = self._holder(text)
        who = f"pid {h.get('pid')} on {h.get('host')} since {h.get('started')}" if h else "another run"
        return f"{self.uri} is in use by another audit run ({who}); if none is running, remove {self.uri}/{LOCK}"

    def release(self) -> None:
        if not self.locked:
            return
        self.locked = False
        try:
            if self.local is not None:
                os.unlink(os.path.join(self.local, LOCK))
            else:
                fs, base = resolve(self.uri)
                fs.delete_file(f"{base}/{LOCK}")
        except (OSError, Exception):  # noqa: BLE001 - a lock left behind is stale next time
            pass

    # -- the run -----------------------------------------------------------------------------------
    def begin(self, what: dict) -> None:
        """Before anything is written: no report from an earlier run stays to be taken for this one's.
        The last complete run's report is kept as ``report.previous.html`` (and its run.json read),
        until this run writes its own: a run never deletes what an earlier run found."""
        self.previous = self._read_run()
        self._move(REPORT, PREVIOUS)
        self.write_text(RUN, json.dumps({"state": "running", "run": self.run_id, **what}, default=str, indent=1))

    def finish(self, what: dict) -> None:
        self.write_text(RUN, json.dumps({"state": "complete", "run": self.run_id, "finished": _now(), **what},
                                        default=str, indent=1))
        self._remove(PREVIOUS)

    def keep_previous(self, what: dict, why: str) -> str | None:
        """A run that found nothing new: the last complete run's report stays the report, with ``why``
        on top of it, and its verdicts stay in run.json (``nothing_new``, ``since``: when that run
        finished). Returns the report's path, or None where no run before left one."""
        prev = self.previous if self.previous.get("state") == "complete" else {}
        if prev.get("nothing_new"):  # quiet again: the findings are still those of the run before it
            prev = {**prev, "finished": prev.get("since"), "run": prev.get("verdicts_from_run")}
        report = None
        text = self.read_text(PREVIOUS)
        if text is not None:
            import html

            text = re.sub(r"<p class='nothing-new'.*?</p>", "", text, count=1, flags=re.S)  # (a quiet night before)
            since = prev.get("finished") or "an earlier run"
            banner = (f"<p class='nothing-new' style='background:#fff3cd;border:1px solid #c9a227;padding:8px 12px;"
                      f"margin:8px 0'><b>{html.escape(why)}</b> These are the findings of run "
                      f"{html.escape(str(prev.get('run', '?')))}, finished {html.escape(str(since))}; checked again "
                      f"{_now()}.</p>")
            at = text.find(">", text.find("<body")) + 1 if "<body" in text else 0
            report = self.write_text(REPORT, text[:at] + banner + text[at:])
            self._remove(PREVIOUS)
        self.write_text(RUN, json.dumps(
            {"state": "complete", "run": self.run_id, "finished": _now(), **what, "nothing_new": True,
             "since": prev.get("finished"), "verdicts_from_run": prev.get("run"),
             "verdicts": prev.get("verdicts", [])}, default=str, indent=1))
        return report

    def _read_run(self) -> dict:
        text = self.read_text(RUN)
        try:
            got = json.loads(text) if text else {}
        except ValueError:
            return {}
        return got if isinstance(got, dict) else {}

    def failed(self, cause: str) -> None:
        try:
            self.write_text(RUN, json.dumps({"state": "failed", "run": self.run_id, "cause": cause}, indent=1))
        except (OSError, Exception):  # noqa: BLE001 - a full disk may refuse this too: "running" stays
            pass
