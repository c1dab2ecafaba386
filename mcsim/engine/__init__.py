"""Execution: ``simulate(scenario)`` as a straight pipeline (above ``model``).

The stages before execution are the layers' below: the simulated configurations with their
draws (:mod:`mcsim.scenario.draws`) and each prepared once (:mod:`mcsim.model.preparation`).
Here:

- ``simulate``: ``simulate()``, the stages in order, and nothing else.
- ``options``: the execution options as one value (progress, runs per task, backend, resume
  store, messages).
- ``tasks``: the units of work, (configuration, run range) tasks, and where their rows go.
- ``optimize``: ``interval = "optimize"`` resolved, its grid points run as tasks.
- ``execution``: tasks through the resume store, a backend and one progress bar.
- ``backends``: local threads or a dask cluster; ``threads``: kernel calls split over threads.
- ``resume``: the store of finished tasks, and its key.
- ``outputs``: the sweep's output arrays, filled as each configuration completes.
- ``dataset``: the xarray Dataset, its coordinates and provenance.
- ``shards``: the parts of a sharded sweep combined into the whole result.
"""
