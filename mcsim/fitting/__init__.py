"""Failure-log fitting: from a log of unit lifetimes to the ``[[failures]]`` table a scenario takes.

A layer of its own above ``model`` (whose renewal function says how the simulator will use a
fitted law) and beside ``engine``; only the command line, the reports and ``mcsim.fit_failures``
use it.

- ``failure_log``: the CSV log of unit lifetimes: its format, read and checked.
- ``sacct_log``: Slurm's job records (``sacct --parsable2``) as node lifetimes: node failures, requeues, time-outs.
- ``power_log``: GPU power logs (``nvidia-smi`` CSV, ``dcgmi dmon``) as the power-by-state keys of a scenario
  (``fit_power``).
- ``weibull``: the Weibull maximum likelihood fit of censored, truncated lifetimes; the product-limit estimate.
- ``failure_table``: ``fit_failures`` and the command's options: from a log to the ``[[failures]]`` table
  and the ``[uncertain]`` entry of the fitted MTBF and shape (their joint uncertainty).
"""
