"""Input: what a user writes, validated (above ``kernels``, ``io`` and ``errors``).

- ``schema``: every TOML key of a scenario, its type, bounds, default and unit (the declarations).
- ``interruptions``: the declarations of ``[[failures]]``, ``[restart]`` and ``[staffing]``: interruptions and
  their recovery.
- ``validation``: how a key is declared and checked: ``param`` fields, field kinds, the one validator.
- ``json_schema``: the JSON Schema of scenario and plan files, generated from the declarations (``mcsim schema``).
- ``consistency``: the rules between keys of one configuration that per-key bounds cannot state.
- ``config``: scenario files to :class:`~mcsim.scenario.config.Scenario`, a sweep of
  :class:`~mcsim.scenario.config.Config`; the configurations of the parameter draws.
- ``provenance``: the ``[provenance]`` table: the values a scenario borrows from another model, fleet
  or software, checked.
- ``overrides``: ``--set KEY=VALUE`` and its Python forms, applied to the raw tables.
- ``toml``: TOML files read (depth-limited) and written back; numbers as text that reads back.
- ``catalog``: GPU types, their datasheet figures and rental prices.
- ``software``: the software profiles, one named set of defaults per training-software generation
  (``compute.software``).
- ``uncertain``: uncertain inputs, their distributions, and the draws of a design.
- ``uncertain_table``: the ``[uncertain]`` table, read and validated.
- ``draws``: the simulated configurations of a scenario, with the draws of its uncertain inputs
  (stage 1 of ``simulate()``).
- ``shard``: one part of a sweep (``mcsim run --shard i/n``): which configurations a job simulates.
- ``limits``: the memory and time budgets checked before anything runs.
- ``shipped``: the scenarios and plans shipped with mcsim, and a name or path to a file.
- ``frozen``: frozen records hashed once (the sections and configurations as cache keys).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcsim.scenario.config import Config, Scenario, load_scenario, reference_scenario_path


def __getattr__(name: str) -> object:
    # The names of `config`, imported at their first use (PEP 562): a module that needs only the schema
    # (the command line's parser) does not load the scenario files' machinery.
    if name in __all__:
        return getattr(importlib.import_module("mcsim.scenario.config"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Config", "Scenario", "load_scenario", "reference_scenario_path"]
