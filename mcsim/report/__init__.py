"""Presentation: figures, tables and Markdown reports (layer 6, above ``planning``).

- ``plots``: the result figures' public names, gathered from the modules that draw them.
- ``scaling``: wall time, energy, cost and ETTR against a sweep dimension.
- ``distributions``: the distribution of a variable over runs (CDF), and where wall time and energy go.
- ``tradeoff``: every configuration at its mean of two outputs, the Pareto front labelled.
- ``tornado``: the sensitivity indices of the uncertain inputs at one configuration.
- ``failures``: the probability plot of a failure log against its fitted Weibull law.
- ``style``: the pieces every figure shares: pyplot, the house style, units and labels, saving.
- ``tables``: the text tables the command line prints (summary, sensitivity indices).
- ``frames``: tables for programs (``--format json|csv``): the validation's comparisons, the plan's
  finalists, and how a table is written as JSON or CSV.
- ``markdown``: Markdown pieces of a result report, and its section "What was simulated".
- ``picks``: the sections on the best configurations, the Pareto front and a deadline.
- ``uncertainty``: the sections of a result with parameter draws (decision, sensitivity).
- ``result_report``: the report of a result file: ``README.md`` and its figures.
- ``writer``: ``mcsim report``: the report of a result or a plan file, written into a folder.
- ``plan``: the report of a plan file (a package: ``files``, ``explain``, ``table``,
  ``finalists``, ``calibration``, ``steptime``).

The package is also the function ``mcsim.report(source, folder, deadline=..., ...)``
(:func:`mcsim.report.writer.report`): calling it writes a report folder, and its
submodules stay reachable as ``mcsim.report.plots`` and so on.
"""

import sys
import types
from typing import TYPE_CHECKING

from mcsim._lazy import lazy_module

if TYPE_CHECKING:
    from mcsim.report import writer as _writer
else:
    # imported at the first call: `import mcsim` imports this package, and most commands write no report
    _writer = lazy_module("mcsim.report.writer")


class _CallablePackage(types.ModuleType):
    """``mcsim.report``: the package, callable as :func:`mcsim.report.writer.report`."""

    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204 (the signature of writer.report)
        return _writer.report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
