"""``mcsim plan``: enumerate, screen, select by simulation (layer 5, above ``analysis``).

- ``plan``: plan files (``[search]``, ``[constraints]``, ``[plan]``) and the candidates.
- ``screen``: every candidate by the analytic model, ranked and filtered.
- ``calibration``: the pilot that measures the screen's error per family before the selection.
- ``selection``, ``kim_nelson``: the finalists by simulation with common random numbers.
- ``uncertain``: the screen under the plan's uncertain inputs.
- ``planner``: the whole plan and its dataset.
"""
