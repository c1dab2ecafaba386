"""Failure-log fitting: from a log of unit lifetimes to the ``[[failures]]`` table a scenario takes.

A layer of its own above ``model`` (whose renewal function says how the simulator will use a
fitted law) and beside ``engine``; only the command line, the reports and ``mcsim.fit_failures``
use it.

- ``failure_log``: the CSV log of unit lifetimes, read and checked.
- ``weibull``: the Weibull maximum likelihood fit of censored, truncated lifetimes.
- ``failure_table``: :func:`~mcsim.fitting.failure_table.fit_failures`, from a log to the TOML table.
- ``priors``: the ``[uncertain]`` entry of a fitted class's MTBF and shape.
"""
