"""Presentation: figures, tables and Markdown reports (layer 6, above ``planning``).

- ``plots``: the result figures, gathered from ``scaling``, ``distributions`` (CDF, breakdown)
  and ``tradeoff`` (Pareto front), drawn with the shared pieces of ``style``; ``tornado``:
  sensitivity; ``failures``: failure-rate fits.
- ``markdown``: the report of a result file; ``plan``: of a plan file; ``writer``: either,
  as ``mcsim report`` writes it.

The package is also the function ``mcsim.report(source, folder, deadline=..., ...)``
(:func:`mcsim.report.writer.report`): calling it writes a report folder, and its
submodules stay reachable as ``mcsim.report.plots`` and so on.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    """``mcsim.report``: the package, callable as :func:`mcsim.report.writer.report`."""

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204 (the signature of writer.report)
        from mcsim.report.writer import report

        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
