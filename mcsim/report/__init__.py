"""Presentation: figures, tables and Markdown reports (layer 6, above ``planning``).

- ``plots``: the result figures, gathered from ``scaling``, ``distributions`` (CDF, breakdown)
  and ``tradeoff`` (Pareto front), drawn with the shared pieces of ``style``; ``tornado``:
  sensitivity; ``failures``: failure-rate fits.
- ``markdown``: ``mcsim report`` of a result file; ``plan``: of a plan file.
"""

from mcsim import _moved

__getattr__ = _moved.forwarder(__name__, "mcsim.report", "mcsim.report.markdown")
