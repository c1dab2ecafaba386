"""``mcsim plan``: enumerate, screen, select by simulation (layer 5, above ``analysis``).

- ``plan_file``: plan files (``[search]``, ``[constraints]``, ``[plan]``), validated; the plan's objective.
- ``candidates``: the search enumerated into candidate arrays, each candidate in the form lower layers take.
- ``screen``: candidates estimated by the model, ruled out with their reasons or ranked, the finalists
  (or why none is left); re-screened under uncertain inputs.
- ``calibration``: the pilot that measures the screen's error per family of candidates before the selection.
- ``pool``: the candidates simulated, brought in from the screen's ranking until none left out could be better.
- ``selection``, ``kim_nelson``: the finalists by simulation with common random numbers.
- ``dataset``: the plan's dataset (variables, coordinates, attributes).
- ``run``: the stages of a plan in order, and ``mcsim.plan``.
"""
