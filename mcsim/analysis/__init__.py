"""Decisions on results: summaries, comparisons, sensitivity (layer 4, above ``engine``).

- ``summary``: ``summarize(ds)``, per-variable statistics.
- ``compare``: best, Pareto front, paired comparisons, deadlines (``ds.mcsim``'s engine).
- ``decisions``, ``pareto``: the estimators and the non-dominated sort they use.
- ``robustness``, ``sensitivity``: what changes under uncertain inputs.
- ``validation``: published runs against simulation.
"""
