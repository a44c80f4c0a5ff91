"""The warehouse stage: staged changes merged into warehouse tables with Spark, the initial load,
and the comparison with the source. Everything here runs inside a Spark job (``loader.spark_jobs``)
except the building of that job's command line (``submit``)."""
