#!/usr/bin/env bash
# A Spark standalone cluster on loopback, from the Spark that pyspark installed: one master and
# $WORKERS workers (default 2, each $WORKER_CORES core and $WORKER_MEMORY of memory).
#
#   infra/spark/standalone.sh start DIR [PORT]   start; PORT 0 (default) = a free one
#   infra/spark/standalone.sh stop DIR           stop the master and workers whose PIDs are in DIR
#
# On start it prints, and writes to DIR/cluster.env, SPARK_MASTER=spark://127.0.0.1:PORT and
# SPARK_MASTER_UI=http://127.0.0.1:UI_PORT, once every worker has registered.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,9p' "$0"; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
python="${PYTHON:-$(command -v python3)}"

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

case "$cmd" in
start)
    if alive "$dir/master.pid"; then cat "$dir/cluster.env"; exit 0; fi
    # spark-class needs SPARK_HOME: the pyspark package folder, which holds bin/ and jars/.
    SPARK_HOME="${SPARK_HOME:-$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
    export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$dir/logs" SPARK_WORKER_DIR="$dir/work"
    mkdir -p "$dir/logs" "$dir/work"
    port="${3:-0}"; [[ "$port" == 0 ]] && port="$(free_port)"
    ui="$(free_port)"
    setsid "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
        --host 127.0.0.1 --port "$port" --webui-port "$ui" >"$dir/logs/master.log" 2>&1 &
    echo $! >"$dir/master.pid"
    for n in $(seq 1 "${WORKERS:-2}"); do
        setsid "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
            "spark://127.0.0.1:$port" --host 127.0.0.1 --webui-port 0 \
            --cores "${WORKER_CORES:-1}" --memory "${WORKER_MEMORY:-1g}" --work-dir "$dir/work/$n" \
            >"$dir/logs/worker-$n.log" 2>&1 &
        echo $! >"$dir/worker-$n.pid"
    done
    # Ready when the master's status page lists every worker ALIVE.
    for _ in $(seq 1 240); do
        alive "$dir/master.pid" || { tail -n 20 "$dir/logs/master.log" >&2; echo "standalone.sh: the master did not start" >&2; exit 1; }
        up="$(curl -sf "http://127.0.0.1:$ui/json/" 2>/dev/null | grep -o '"state" *: *"ALIVE"' | wc -l || true)"
        [[ "$up" -ge "${WORKERS:-2}" ]] && break
        sleep 0.25
    done
    [[ "$up" -ge "${WORKERS:-2}" ]] || { echo "standalone.sh: workers did not register in 60 s (logs: $dir/logs)" >&2; exit 1; }
    printf 'SPARK_MASTER=spark://127.0.0.1:%s\nSPARK_MASTER_UI=http://127.0.0.1:%s\n' "$port" "$ui" | tee "$dir/cluster.env"
    ;;
stop)
    for pidfile in "$dir"/worker-*.pid "$dir/master.pid"; do
        [[ -f "$pidfile" ]] || continue
        pid="$(cat "$pidfile")"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL -- "-$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    ;;
*)
    sed -n '2,9p' "$0"; exit 2
    ;;
esac
