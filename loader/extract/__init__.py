"""The extract stage: one interval of the binlog into per-table CSV staging files and a manifest.

Takes a planned interval of the ledger (``[start, end)`` of one source's binlog, its GTID state
at both ends) and the settings it reads (``decode.ExtractSettings``); gives every committed change
of every selected table as CSV rows in ``<source>/<schema>/<table>/<interval>/``, the manifest
written last, the interval marked extracted (``interval.run_extract``, ``interval.extract_interval``).
Extracting the same interval again writes the same bytes.

``interval``: the interval's extraction end to end and the checks of what it read; ``decode``:
the interval decoded in one process or in ranges in several; ``files``: a table's CSV parts
written and published; ``schema_changes``: the statements that change a selected table, carried
or stopped at.
"""
