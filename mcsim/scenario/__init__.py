"""Input: what a user writes, validated (layer 1, above ``kernels``, ``io`` and ``errors``).

- ``schema``: every TOML key of a scenario and a plan, its type, bounds, default and unit;
  the one validator and error format.
- ``catalog``: GPU types and their datasheet figures.
- ``config``: scenario files to :class:`~mcsim.scenario.config.Scenario`, a sweep of
  :class:`~mcsim.scenario.config.Config`; overrides; TOML out.
- ``uncertain``: the ``[uncertain]`` table: distributions, designs, draws.
- ``limits``: the memory and time budgets checked before anything runs.
"""

from mcsim.scenario.config import Config, Scenario, load_scenario, reference_scenario_path

__all__ = ["Config", "Scenario", "load_scenario", "reference_scenario_path"]
