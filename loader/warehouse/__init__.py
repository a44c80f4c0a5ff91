"""The warehouse stage: staged changes merged into warehouse tables with Spark, the initial load,
and the comparison with the source. The Spark jobs (``loader.app.spark_jobs``) run it; from outside
Spark only the launch of those jobs (``submit``), the start and finish of an initial load
(recording P0, setting the checkpoint) and what the checks report (``checks``) are used.
"""
