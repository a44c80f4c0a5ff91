#!/usr/bin/env bash
# A Hive metastore service on loopback, the one several Spark processes share (catalog = "hive"):
# Hive's own HiveMetaStore (2.3, the version of Spark's built-in Hive client) from the jars
# pyspark installed, its tables in a Derby database inside the service's folder (with the lock
# tables Iceberg's Hive catalog needs, created on first start by txn_tables.py).
#
#   infra/hive/metastore.sh start DIR [PORT]   start; PORT 0 (default) = a free one
#   infra/hive/metastore.sh stop DIR           stop the service whose PID is in DIR
#
# On start it prints, and writes to DIR/metastore.env, METASTORE_URI=thrift://127.0.0.1:PORT.
# A database server instead of Derby: set METASTORE_JDBC_URL, METASTORE_JDBC_DRIVER,
# METASTORE_JDBC_USER, METASTORE_JDBC_PASSWORD and METASTORE_JDBC_JAR (the driver's jar).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,12p' "$0"; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
python="${PYTHON:-$(command -v python3)}"
pidfile="$dir/metastore.pid"

running() { [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' <<<"$1"; }

case "$cmd" in
start)
    if running; then cat "$dir/metastore.env"; exit 0; fi
    jars="$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
    port="${3:-0}"
    [[ "$port" == 0 ]] && port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    url="${METASTORE_JDBC_URL:-jdbc:derby:;databaseName=$dir/metastore_db;create=true}"
    mkdir -p "$dir/conf" "$dir/logs"
    cat >"$dir/conf/hive-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>$(xml_escape "$url")</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>${METASTORE_JDBC_DRIVER:-org.apache.derby.jdbc.EmbeddedDriver}</value></property>
  <property><name>javax.jdo.option.ConnectionUserName</name><value>$(xml_escape "${METASTORE_JDBC_USER:-APP}")</value></property>
  <property><name>javax.jdo.option.ConnectionPassword</name><value>$(xml_escape "${METASTORE_JDBC_PASSWORD:-mine}")</value></property>
  <!-- The service creates its tables on first start (what Hive's schematool would do). -->
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <!-- Hive's asynchronous logging needs a library Spark does not ship. -->
  <property><name>hive.async.log.enabled</name><value>false</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>file://$dir/warehouse</value></property>
  <!-- Hive's default connection pool (BoneCP) is not among Spark's jars; table locks
       (Iceberg's Hive catalog takes one per commit) open connections of their own. -->
  <property><name>datanucleus.connectionPoolingType</name><value>none</value></property>
</configuration>
EOF
    chmod 600 "$dir/conf/hive-site.xml"
    if [[ -z "${METASTORE_JDBC_URL:-}" && ! -f "$dir/txn-tables" ]]; then
        "$python" "$(dirname "$0")/txn_tables.py" "$dir/conf" >"$dir/logs/txn-tables.log" 2>&1 \
            || { tail -n 20 "$dir/logs/txn-tables.log" >&2; echo "metastore.sh: could not create the lock tables" >&2; exit 1; }
        touch "$dir/txn-tables"
    fi
    setsid java -Xmx512m -cp "$dir/conf:$jars/*${METASTORE_JDBC_JAR:+:$METASTORE_JDBC_JAR}" \
        org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port" >"$dir/logs/metastore.log" 2>&1 &
    echo $! >"$pidfile"
    # Ready when it accepts connections on its port.
    for _ in $(seq 1 240); do
        running || { grep -v '^\s*at ' "$dir/logs/metastore.log" | tail -n 20 >&2; echo "metastore.sh: the metastore did not start" >&2; exit 1; }
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.25
    done
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null \
        || { echo "metastore.sh: no answer on port $port in 60 s (log: $dir/logs/metastore.log)" >&2; exit 1; }
    echo "METASTORE_URI=thrift://127.0.0.1:$port" | tee "$dir/metastore.env"
    ;;
stop)
    if [[ -f "$pidfile" ]]; then
        pid="$(cat "$pidfile")"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL -- "-$pid" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    ;;
*)
    sed -n '2,12p' "$0"; exit 2
    ;;
esac
