"""The ``mcsim`` command line (top layer): argument parsing, commands, output files.

- ``main``: the parser and the commands ``run``, ``summary``, ``validate``,
  ``sensitivity``, ``fit-failures``, ``plot`` and ``report``.
- ``plan``: ``mcsim plan``.
"""

from mcsim import _moved
from mcsim.cli.main import main

__all__ = ["main"]
__getattr__ = _moved.forwarder(__name__, "mcsim.cli", "mcsim.cli.main")
