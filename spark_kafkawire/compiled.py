"""The compiled parts, and the one place that decides whether they are used.

Two optional parts are built when the package is installed (setup.py), each only where a C
compiler is there:

- ``_lane``, the fast lane (hand-written C, see lane.py: capture records to TCP segments):
  ``lane_module`` below, or None; used together with the compiled stages, never alone;
- the per-exchange stages (``NATIVE`` in setup.py: body decoding, facts, pairing, row and column
  building) compiled by mypyc from their own ``.py`` sources, which stay the reference. The build writes
  ``_native.json``: the compiled modules and the CRC-32 of the sources they were built from.

The boundary is the modules' own Python interface: a compiled module is imported in place of its
source and offers the same functions and classes; nothing else of it is reached into.

``KAFKAWIRE_PURE_PYTHON=1`` in the environment when the package is imported means no compiled code
at all (the stages, and the reader's lane, run as Python), as msgpack's fallback does. The compiled
stages are also left aside, all of them, when any of their sources differs from the one they were
built from (a checkout edited since ``make setup``): ``native_reason`` says why. Whenever they are
not used, every module with a compiled module beside its source is imported from the source
(whether or not _native.json names it). The same rows come
out either way (the decoding tests run in both modes).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import zlib
from types import ModuleType


def plain_hash(name: str):
    """The constructor of hash ``name`` (sha1: the Community ID) from CPython's own module, without
    hashlib's OpenSSL (2 ms of every start); hashlib's where CPython was built without it."""
    try:
        return getattr(importlib.import_module("_" + name), name)
    except ImportError:
        import hashlib

        return getattr(hashlib, name)


PURE = bool(os.environ.get("KAFKAWIRE_PURE_PYTHON"))
_HERE = os.path.dirname(os.path.realpath(__file__))  # (os.path: pathlib costs 3 ms of every start)


def require(module: str, package: str):
    """Import a dependency the decoder cannot do without (crc32c, the codecs, orjson), or fail
    naming it: without it CRCs and records would silently go missing (a Spark executor whose Python
    lacks it must fail its task, not give other data)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"kafkawire needs the Python package {package!r} (pip install {package}), which "
                          f"{sys.executable} cannot import: {e}") from None


def require_extension(package: str, module: str) -> ModuleType:
    """A dependency's compiled module by itself (``crc32c._crc32c``), without running its package's
    ``__init__``: crc32c's reads its own version from the installed metadata, which imports
    importlib.metadata and argparse and scans site-packages, 35 ms of every read's start. Where the
    module cannot be found that way (a package laid out otherwise), the package is imported as usual;
    without it the error names it (see require)."""
    name = f"{package}.{module}"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec(package)  # (a top-level package is found, not run)
        locations = spec.submodule_search_locations if spec is not None else None
        sub = importlib.machinery.PathFinder.find_spec(name, list(locations)) if locations else None
        if sub is not None and isinstance(sub.loader, importlib.machinery.ExtensionFileLoader):
            ext = importlib.util.module_from_spec(sub)
            sub.loader.exec_module(ext)
            sys.modules[name] = ext  # the package's own import takes this one
            return ext
    except (ImportError, ValueError):
        pass
    require(package, package)
    return require(name, package)


def _load() -> ModuleType | None:
    if PURE:
        return None
    try:
        return importlib.import_module("spark_kafkawire.wire._lane")
    except ImportError:  # built without a compiler: everything runs in Python
        return None


class _Sources:
    """Imports these modules of the package from their ``.py`` sources, never a compiled module
    beside them. (A meta path finder by its ``find_spec``: importlib.abc, its base class, would
    import importlib.resources and tempfile, 30 ms of every process's start.)"""

    def __init__(self, names: set[str]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname.partition(".")[2]))


def _source(name: str) -> str:
    """The ``.py`` source of a module of the package, named relative to it (``kafka.body``)."""
    return os.path.join(_HERE, *name.split(".")) + ".py"


def _native() -> tuple[list[str], str | None]:
    """(the compiled stage modules, why they are not used: None when they are)."""
    try:
        with open(os.path.join(_HERE, "_native.json"), "rb") as f:
            built = json.loads(f.read())
    except (OSError, ValueError):
        return [], "not built (no _native.json: installed without a compiler, or run from a checkout before make setup)"
    modules = sorted(built.get("modules", {}))
    if PURE:
        return modules, "KAFKAWIRE_PURE_PYTHON is set"
    for name in modules:
        shown = name.replace(".", "/") + ".py"
        try:
            with open(_source(name), "rb") as f:
                digest = f"{zlib.crc32(f.read()):08x}"
        except OSError:
            return modules, f"{shown} is missing"
        if digest != built["modules"][name]:
            return modules, f"{shown} changed since the compiled modules were built (make setup rebuilds them)"
    if importlib.util.find_spec(f"{built['group']}__mypyc") is None:
        why = "; ".join(built.get("failed") or []) or "no C compiler at install time?"
        return modules, f"the compiled modules did not build ({why})"
    return modules, None


def _beside_sources() -> set[str]:
    """The package's modules with a compiled module beside their ``.py`` source (whatever
    _native.json says: a build by hand may leave them without one)."""
    found = set()
    for folder, _dirs, files in os.walk(_HERE):
        for file in files:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                if file.endswith(suffix):
                    rel = os.path.relpath(os.path.join(folder, file), _HERE)
                    name = ".".join(rel.split(os.sep))[: -len(suffix)]
                    if os.path.exists(_source(name)):
                        found.add(name)
    return found


#: the stage modules compiled by mypyc, and why they are not in use (None: they are)
native_modules, native_reason = _native()
native: bool = bool(native_modules) and native_reason is None
#: the C extension's module (Lane, see lane.py), or None: the compiled parts are used all together
#: or not at all
lane_module: ModuleType | None = _load() if native else None
_shadowed = set() if native else set(native_modules) | _beside_sources()
if _shadowed and not any(isinstance(f, _Sources) for f in sys.meta_path):
    sys.meta_path.insert(0, _Sources({f"spark_kafkawire.{m}" for m in _shadowed}))
