"""The ``mcsim`` command line (top layer): argument parsing, commands, output files.

- ``main``: ``main()``, the entry point: runs the command named, reports a refused standard output
  and an interrupt.
- ``parser``: the command line as a table (commands, options, help texts) and the argparse parser
  built from it.
- ``declarations``: how the table is declared (``Command``, ``Option``), the parser made of it, the exit
  statuses and the one-line usage error.
- ``commands``: ``summary``, ``validate``, ``sensitivity``, ``fit-failures``, ``calibrate``, ``fit-power``,
  ``plot``, ``report`` and ``scenarios``.
- ``run``: ``mcsim run`` and ``mcsim combine``.
- ``plan``: ``mcsim plan``.
- ``tools``: ``mcsim schema`` and ``mcsim completion``, the commands that describe mcsim to editors and shells.
- ``output``: the output files of the commands: which paths may be written, the writer lock, the
  write and what a failed write says.
"""

from mcsim.cli.main import main

__all__ = ["main"]
