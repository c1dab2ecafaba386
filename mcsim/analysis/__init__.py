"""Decisions on results: summaries, comparisons, sensitivity (layer 4, above ``engine``).

- ``summary``: ``summarize(ds)``, per-variable statistics over runs, and ``check_results``.
- ``configurations``: which configurations of a result may be ranked, their values and statistics.
- ``ranking``: the best configuration, the Pareto front, and P(best) and expected regret over draws.
- ``compare``: paired comparisons of two configurations (``ds.mcsim.prob_better``, ``paired_difference``).
- ``deadline``: the probability of finishing within a deadline, and the cheapest configuration that does.
- ``decisions``: the estimators of decisions under uncertain inputs, on plain arrays.
- ``pareto``: the non-dominated sort that ``ranking`` and the planner use.
- ``robustness``: the robust choice over parameter draws, and the input that would change it.
- ``sensitivity``: Sobol and delta indices of the uncertain inputs (SALib).
- ``validation``: published figures of real training runs against simulation (``mcsim validate``).
- ``rsc1_figures``: Meta's RSC-1 study (queued downtime in the ETTR) as rows of ``mcsim validate``.
- ``steptime_validation``: published iteration times against the step-time model.
- ``calibration``: ``calibrate``, the efficiency that fits a user's measured iteration times (``mcsim calibrate``).
- ``calibration_data``: the CSV file of measured layouts and iteration times that ``calibrate`` reads.
- ``memory_validation``: published memory per GPU and out-of-memory layouts against the memory model.
- ``moe_cases``: published mixture-of-experts step times (shapes, layouts, machines, sources) as data.
- ``moe_validation``: those step times against the step-time model, efficiency fitted leave-one-out.
"""
