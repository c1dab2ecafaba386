"""The installed version of mcsim (its own module, so that any layer may read it without importing the package)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
