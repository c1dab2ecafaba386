"""The report of a plan file of ``mcsim plan``: why this configuration (docs/model.md §9).

- ``files``: a plan file recognised and checked, and its report folder: ``README.md`` and the
  recommendation as a scenario file (``recommended.toml``).
- ``explain``: the Markdown of ``README.md``, section by section.
- ``table``: the table ``mcsim plan`` prints, and the screen's part of the plan's claim.
- ``finalists``: the simulated finalists compared with the recommendation over the runs both
  simulated (common random numbers), those within the indifference zone, and their sections.
- ``calibration``: the screen's error per family, measured by the calibration pilot.
- ``steptime``: layouts the step-time model cannot tell apart from the recommendation's, and
  the recommendation's memory widened by the memory model's measured error.
"""
