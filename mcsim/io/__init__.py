"""Files: output variables and how they are written (bottom layer: imports only ``errors``).

- ``variables``: every output variable, registered once with dims, units and description.
- ``netcdf``: write and open result files (CF-1.10).
- ``atomic``: temporary file then rename; the writer lock of an output.
"""
