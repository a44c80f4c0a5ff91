"""The application: the one sequence of steps (``steps``: plan, extract, materialize, load,
check, each noted in the ledger the same way whoever runs it) and the ways it is run: the
``loader`` command (``cli``), the Airflow tasks the DAG files call (``airflow``, with the DAGs'
parameters in ``dag_params``), the Spark jobs (``spark_jobs``, the file ``spark-submit`` runs),
the demo (``demo``), the DAG's state in Airflow's database (``dag_state``) and the metrics the
tasks send (``metrics``). Takes every stage; gives what the user and Airflow see.
"""
