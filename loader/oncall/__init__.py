"""On-call's view of the sources, in Airflow's UI: takes what ``loader status``, ``loader
intervals`` and ``loader tables`` read and what Airflow knows of the delta DAG; gives the page of
each source (``page``: its verdict, facts and ways out, pure; ``html``: its HTML) and the Airflow
plugin that serves it on Airflow's API server (``plugin``).
"""
