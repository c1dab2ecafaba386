"""Execution: ``simulate(scenario)`` as a straight pipeline (layer 3, above ``model``).

Stages, each the input of the next, none calling back into an earlier one:
``draws`` (configurations x uncertain draws) -> ``tasks`` (prepared kernel inputs,
units of work) -> ``optimize`` (interval = "optimize" grid points as tasks) ->
``backends`` with ``resume`` (local threads or dask; saved pieces) -> ``simulate``
(output derivation and dataset).
"""
