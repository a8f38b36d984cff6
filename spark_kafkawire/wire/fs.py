"""Paths and URIs -> file systems: listing on the driver, streaming reads on executors.

Local paths are read with Python's own files. URIs (``s3://``, ``gs://``, ``abfs://``,
``hdfs://``, ``file://``) go through ``pyarrow.fs``, which takes credentials and endpoints from
each store's standard chain (for S3: the ``AWS_*`` environment variables including
``AWS_ENDPOINT_URL``, profiles, instance roles); option ``endpointUrl`` overrides the S3 endpoint.
No Hadoop jars are involved: Spark executors open the files themselves.

Every failure names the path: a missing bucket, a missing key, credentials refused.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import stat
from functools import lru_cache
from typing import BinaryIO

READ_BUFFER = 1 << 20  # remote reads are buffered: one ranged request per MiB, not per record
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


class StorageError(OSError):
    """A path or URI that cannot be listed or read: says which, and why."""


def is_uri(path: str) -> bool:
    return bool(_URI.match(path))


def local_path(path: str) -> str | None:
    """The local path a plain path or a ``file:`` URI names (``file://localhost/...`` too), else None."""
    if path.startswith("file:"):
        rest = path[5:]
        if rest.startswith("//"):
            host, _, rest = rest[2:].partition("/")
            if host not in ("", "localhost"):
                raise StorageError(f"{path}: file URIs on another host ({host}) cannot be read")
            rest = "/" + rest
        return "/" + rest.lstrip("/")
    return None if is_uri(path) else path


@lru_cache(maxsize=16)
def _filesystem(scheme_and_host: str, endpoint: str | None):
    import pyarrow.fs as pafs

    try:
        if scheme_and_host.startswith(("s3://", "s3a://")):
            kwargs = {}
            url = endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            if url:
                scheme, _, host = url.partition("://")
                kwargs["endpoint_override"] = host or url
                kwargs["scheme"] = scheme if host else "https"
            region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            if region:
                kwargs["region"] = region
            return pafs.S3FileSystem(**kwargs)
        fs, _ = pafs.FileSystem.from_uri(scheme_and_host + "/")
        return fs
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError with the store's own words
        raise StorageError(f"{scheme_and_host}: cannot open this file system ({e})") from None


def resolve(uri: str, endpoint: str | None = None):
    """(pyarrow file system, path inside it) for a URI."""
    m = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://([^/]*)(.*)$", uri)
    if not m:
        raise StorageError(f"{uri}: not a URI")
    scheme, host, rest = m.group(1).lower(), m.group(2), m.group(3)
    if scheme in ("s3", "s3a", "gs", "gcs"):
        scheme = "s3" if scheme == "s3a" else scheme
        return _filesystem(f"{scheme}://", endpoint), f"{host}{rest}"
    return _filesystem(f"{scheme}://{host}", endpoint), rest or "/"


def _explain(uri: str, e: Exception) -> StorageError:
    text = str(e)
    if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
        why = "the bucket does not exist"
    elif any(w in text for w in ("AccessDenied", "ACCESS_DENIED", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                                 "403")):
        why = "access denied: check the credentials (AWS_ACCESS_KEY_ID, profile) and endpoint"
    elif "NoSuchKey" in text or "Path does not exist" in text or isinstance(e, FileNotFoundError):
        why = "no such file"
    else:
        why = text.splitlines()[0] if text else type(e).__name__
    return StorageError(f"kafkawire: {uri}: {why}")


def list_uri(uri: str, patterns: list[str], endpoint: str | None = None,
             stats: dict[str, tuple[int, int]] | None = None, unmatched: list[str] | None = None) -> list[str]:
    """Files under a URI: the file itself, a directory's files matching ``patterns`` (recursively,
    skipping names that start with '.' or '_'), or a glob's matches. ``stats``: filled with each
    file's (size, modification time in ns) from the same listing; ``unmatched``: a directory's
    files whose names match no pattern (for the caller to name)."""
    import pyarrow.fs as pafs

    fs, path = resolve(uri, endpoint)
    prefix = uri[: len(uri) - len(path)] if uri.endswith(path) else uri.split("://")[0] + "://"
    has_glob = any(ch in path for ch in "*?[")
    base = path
    if has_glob:
        base = path[: min(path.index(ch) for ch in "*?[" if ch in path)].rsplit("/", 1)[0]
    try:
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(base)
        if info.type == pafs.FileType.File and not has_glob:
            if stats is not None:
                stats[uri] = (int(info.size or 0), int(info.mtime_ns or 0))
            return [uri]
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except StorageError:
        raise
    except Exception as e:
        raise _explain(uri, e) from None
    out = []
    for i in infos:
        if i.type != pafs.FileType.File:
            continue
        rel = i.path[len(base):].lstrip("/")
        if any(part.startswith((".", "_")) for part in rel.split("/")):
            continue
        name = rel.rsplit("/", 1)[-1]
        if has_glob and fnmatch.fnmatchcase(i.path, path.rstrip("/")) or \
                not has_glob and any(fnmatch.fnmatch(name, p) for p in patterns):
            out.append(prefix + i.path)
            if stats is not None:
                stats[prefix + i.path] = (int(i.size or 0), int(i.mtime_ns or 0))
        elif not has_glob and unmatched is not None:
            unmatched.append(prefix + i.path)
    if has_glob and not out:
        raise StorageError(f"kafkawire: path does not exist: {uri}")
    return sorted(out)


def file_size(path: str, endpoint: str | None = None) -> int:
    """Size in bytes of a local path or URI."""
    local = local_path(path)
    if local is not None:
        return os.path.getsize(local)
    fs, p = resolve(path, endpoint)
    try:
        return int(fs.get_file_info(p).size or 0)
    except Exception as e:
        raise _explain(path, e) from None


def file_kind(mode: int) -> str | None:
    """What a file that is not a regular one is (``a FIFO``, ``a socket``, ...), by its st_mode;
    None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "not a regular file"


class NotRegularFile(StorageError):
    """A path that is a FIFO, socket, device or directory: never opened for reading (a FIFO with no
    writer would block the read forever, a device never ends)."""


#: the path that names standard input (``tcpdump -U -w - | kafkawire show -``)
STDIN = "-"


class Stdin:
    """The capture on standard input, read as its bytes come: each read gives what the pipe holds
    (at least a byte, or none at its end), never waiting to fill a buffer, so that rows leave as
    their packets arrive. ``stop()`` (from a signal handler: Ctrl-C) ends it as a file ends: a read
    waiting is given the end, and every later one too."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.ahead = b""  # bytes peek() read and no read has taken yet
        self.stopped = False
        self.waiting = False  # inside os.read (where stop() interrupts it)

    def stop(self) -> None:
        self.stopped = True
        if self.waiting:
            raise _Stopped

    def _read(self, n: int) -> bytes:
        if self.stopped:
            return b""
        self.waiting = True
        try:
            return os.read(self.fd, n)
        except _Stopped:
            return b""
        finally:
            self.waiting = False

    def peek(self, n: int = 1) -> bytes:
        while len(self.ahead) < n:
            chunk = self._read(1 << 16)
            if not chunk:
                break
            self.ahead += chunk
        return self.ahead

    def readinto(self, into) -> int:
        if self.ahead:
            n = min(len(into), len(self.ahead))
            into[:n] = self.ahead[:n]
            self.ahead = self.ahead[n:]
            return n
        data = self._read(len(into))
        into[:len(data)] = data
        return len(data)

    def read(self, n: int = -1) -> bytes:
        buf = bytearray(n if n >= 0 else 1 << 20)
        got = self.readinto(memoryview(buf))
        return bytes(buf[:got])

    def close(self) -> None:
        pass

    def __enter__(self) -> "Stdin":
        return self

    def __exit__(self, *exc) -> None:
        pass


class _Stopped(Exception):
    """Raised in a read of standard input waiting when Stdin.stop() is called (see Stdin)."""


#: the standard input stream a read of path "-" takes (one per process)
STDIN_STREAM = Stdin()


def open_binary(path: str, endpoint: str | None = None) -> BinaryIO:
    """A buffered binary stream of a local path or URI (``-``: standard input, see Stdin). A local
    path that is not a regular file raises NotRegularFile without blocking (it is opened without
    waiting, then looked at)."""
    if path == STDIN:
        return STDIN_STREAM  # type: ignore[return-value]  # (what the capture reader uses of a stream)
    local = local_path(path)
    if local is not None:
        fd = os.open(local, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            kind = file_kind(os.fstat(fd).st_mode)
            if kind is not None:
                raise NotRegularFile(f"kafkawire: {local}: {kind}, not a regular file: not read")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
    fs, p = resolve(path, endpoint)
    try:
        f = fs.open_input_stream(p, buffer_size=READ_BUFFER)
    except Exception as e:
        raise _explain(path, e) from None
    return io.BufferedReader(_Raw(f), READ_BUFFER)


class _Raw(io.RawIOBase):
    """A pyarrow input stream as a Python raw stream (for gzip and BufferedReader)."""

    def __init__(self, f):
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.f.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        self.f.close()
        super().close()
