"""The software profile of a configuration, for the models (docs/model.md §2b, "Software profiles").

The records live with the scenario's other defaults (:mod:`mcsim.scenario.software`, where
``compute.software`` fills in the keys a scenario leaves out); this module gives the model layer
the same names: :class:`SoftwareProfile`, :data:`SOFTWARE_PROFILES` (keyed by
``"megatron-lm-2021"``, ``"megatron-lm-2022"``, ``"megatron-deepspeed-2022"``,
``"megatron-core-2024"``) and :func:`profile_of`, the profile a :class:`~mcsim.scenario.config.Config`
names. What a profile sets is already in the configuration's keys; what the keys do not hold
(the pipeline engine, the bucket sizes) is read from the profile.
"""

from __future__ import annotations

from mcsim.scenario.config import Config
from mcsim.scenario.software import DEFAULT_SOFTWARE, PIPELINE_ENGINES, SOFTWARE_PROFILES, SoftwareProfile

__all__ = ["SoftwareProfile", "SOFTWARE_PROFILES", "DEFAULT_SOFTWARE", "PIPELINE_ENGINES", "profile_of"]


def profile_of(cfg: Config) -> SoftwareProfile:
    """The :class:`SoftwareProfile` that ``cfg``'s ``compute.software`` names."""
    return SOFTWARE_PROFILES[cfg.compute.software]
