"""The installed version of mcsim and the hash of the code that computes its numbers.

Its own module, so that any layer may read them without importing the package: result
files record both (:func:`mcsim.engine.dataset.provenance_attrs`) and resume pieces are
keyed by the hash (:mod:`mcsim.engine.resume`). Also the versions of the scientific stack
(:func:`show_versions`, ``mcsim --version --verbose``), for reports of problems.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import sys
from pathlib import Path
from typing import TextIO

DISTRIBUTION = "mcsim-llm"
"""The name mcsim is installed by (``pip install mcsim-llm``); the import name and the command are ``mcsim``."""

try:
    __version__ = importlib.metadata.version(DISTRIBUTION)
except importlib.metadata.PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

_PACKAGE = Path(__file__).resolve().parent  # the mcsim package
MODEL_HASH_FORMAT = "mcsim-model-1"
# The subpackages whose sources can change a result's numbers (an allow-list: a module added to
# any of them is covered without a word here; presentation, analysis and planning are not).
RESULT_PACKAGES = ("scenario", "model", "kernels", "engine")
# The libraries that draw or compute the numbers (numba compiles the kernels; scipy's Sobol points
# and SALib's designs draw the uncertain inputs; numpy computes the kernel inputs).
RESULT_LIBRARIES = ("numpy", "scipy", "numba", "salib")


def library_versions() -> str:
    """``name version`` of each of :data:`RESULT_LIBRARIES`, from their installed metadata."""
    versions = []
    for name in RESULT_LIBRARIES:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} absent")
    return ", ".join(versions)


@functools.cache
def model_source_hash(package: Path = _PACKAGE) -> str:
    """SHA-256 of the sources and library versions that determine a result's numbers.

    Every ``.py`` file of the subpackages in :data:`RESULT_PACKAGES` (input, physics,
    kernels, execution), sorted by path, with the versions of :data:`RESULT_LIBRARIES`.
    Independent of ``mcsim.__version__``: a kernel edited under the same version changes
    it; a figure or report module does not.
    """
    digest = hashlib.sha256(f"{MODEL_HASH_FORMAT}\0{library_versions()}\0".encode())
    files = [path for name in RESULT_PACKAGES for path in (package / name).rglob("*.py")]
    for path in sorted(files):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


# The scientific stack a report of a problem names (mcsim --version --verbose, mcsim.show_versions()):
# the installed distributions, required and optional, by the names pip knows them by.
STACK = (
    "numpy",
    "scipy",
    "numba",
    "llvmlite",
    "xarray",
    "pandas",
    "netCDF4",
    "cftime",
    "SALib",
    "tqdm",
    "threadpoolctl",
    "dask",
    "distributed",
    "matplotlib",
    "simpy",
    "jsonschema",
)


def versions() -> dict[str, str]:
    """mcsim's version, Python's, the platform, and the installed version of each of :data:`STACK`
    (``absent`` when not installed), read from the installed metadata: nothing is imported."""
    found = {
        DISTRIBUTION: __version__,
        "python": sys.version.split()[0],
        "platform": f"{sys.platform} ({sys.implementation.name}, {sys.maxsize.bit_length() + 1}-bit)",
    }
    for name in STACK:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def show_versions(file: TextIO | None = None) -> None:
    """Print :func:`versions`, one ``name: version`` a line (to ``file``, default the standard output):
    what a report of a problem should include (``mcsim --version --verbose`` prints the same)."""
    found = versions()
    width = max(len(name) for name in found)
    print("\n".join(f"{name + ':':<{width + 1}} {version}" for name, version in found.items()), file=file)
