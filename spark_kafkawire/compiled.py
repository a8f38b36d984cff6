"""The compiled part, or None: the one place that decides whether it is used.

``_lane`` (a C extension built when the package is installed, see lane.py) is used when it was
built, unless ``KAFKAWIRE_PURE_PYTHON=1`` was in the environment when the package was imported:
then no compiled code at all runs (the reader's stages, and the C bases of HalfStream and Framer,
are Python), as msgpack's fallback does. The same rows come out either way (the test suite runs
the decoding tests in both modes).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE = bool(os.environ.get("KAFKAWIRE_PURE_PYTHON"))


def _load() -> ModuleType | None:
    if PURE:
        return None
    try:
        return importlib.import_module("spark_kafkawire._lane")
    except ImportError:  # built without a compiler: everything runs in Python
        return None


#: the C extension's module (classes HalfCore, FramerCore, Lane, Pairing), or None
lane_module: ModuleType | None = _load()
