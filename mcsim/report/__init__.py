"""Presentation: figures, tables and Markdown reports (layer 6, above ``planning``).

- ``plots``, ``tornado``: matplotlib figures of results and of sensitivity.
- ``markdown``: ``mcsim report`` of a result file; ``plan``: of a plan file.
"""

from mcsim import _moved

__getattr__ = _moved.forwarder(__name__, "mcsim.report", "mcsim.report.markdown")
