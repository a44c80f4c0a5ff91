"""The source server, as the loader talks to it: connections and the SQL every stage sends
(``connection``: credentials, TLS, the binlog settings and position), the wire protocol's raw
reads (``wire``), and a query's rows read past the driver in batches (``rows``, for the initial
load). Takes the ``[source]`` settings; gives connections, positions and rows.
"""
