"""``python -m mcsim``: the command line, as the ``mcsim`` console script."""

from __future__ import annotations

from mcsim.cli import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
