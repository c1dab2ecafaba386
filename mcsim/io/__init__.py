"""Files: output variables and how they are written (bottom layer: imports only ``errors``).

- ``variables``: every output variable, registered once (a table) with dims, units and description.
- ``netcdf``: write and open result files (CF-1.10).
- ``atomic``: temporary file then rename; the writer lock of an output; report folders.
- ``format``: display formatting of numbers, amounts, durations and sizes.
- ``units``: conversions between the units of one quantity, and the unit a table column reads best in.
- ``text_input``: a user's text file opened for reading, its failures as one line naming the file.
- ``pages``: ordinary memory pages (no huge-page advice) while a result is filled and written.
"""
