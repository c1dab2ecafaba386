"""The ``mcsim`` command line (top layer): argument parsing, commands, output files.

- ``main``: the parser and the commands ``run``, ``summary``, ``validate``,
  ``sensitivity``, ``fit-failures``, ``plot`` and ``report``.
- ``plan``: ``mcsim plan``.
"""

from mcsim.cli.main import main

__all__ = ["main"]
