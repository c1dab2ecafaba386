"""The installed version of mcsim (its own module, so that any layer may read it without importing the package)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "mcsim-llm"
"""The name mcsim is installed by (``pip install mcsim-llm``); the import name and the command are ``mcsim``."""

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
