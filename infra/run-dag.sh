#!/usr/bin/env bash
# Run one DAG run with `airflow dags test` (no scheduler needed) and show the loader's progress.
#   infra/run-dag.sh DAG_ID [CONF_JSON]
# The full Airflow log goes to $AIRFLOW_HOME/<dag_id>.log; the exit code is the run's outcome.
set -euo pipefail
dag=$1
conf=${2:-}
log="$AIRFLOW_HOME/$dag.log"
args=(dags test "$dag")
[[ -n "$conf" ]] && args+=(--conf "$conf")
echo "== airflow dags test $dag (log: $log)"
set +e
airflow "${args[@]}" >"$log" 2>&1
set -e
# The loader's own messages: its task logs and its Spark jobs' progress lines.
grep -E '\[loader\.|LOADER-JOB-PROGRESS|\[DAG TEST\] end task' "$log" \
    | sed -E 's/^[0-9TZ:.-]+ \[[a-z ]+\] *//; s/ \[(loader\.|airflow)[^]]*\].*$//; s/LOADER-JOB-PROGRESS //' || true
state=$(grep -o 'DagRun Finished: .*state=[a-z]*' "$log" | sed -E 's/.*state=//' | tail -1)
echo "== $dag: ${state:-unknown}"
[[ "$state" == "success" ]] || { grep -E 'ERROR|Error|error:' "$log" | tail -5; exit 1; }
