"""The report of a plan file of ``mcsim plan``: why this configuration (docs/model.md §9).

- ``explain``: the Markdown that explains the recommendation, the folder it is written into
  with the recommendation as a scenario file, and the table ``mcsim plan`` prints.
- ``finalists``: the simulated finalists compared with the recommendation over the runs both
  simulated (common random numbers), and those within the indifference zone.
- ``calibration``: the screen's error per family, measured by the calibration pilot.
- ``steptime``: layouts the step-time model cannot tell apart from the recommendation's, and
  the recommendation's memory widened by the memory model's measured error.
"""
