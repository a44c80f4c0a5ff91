#!/usr/bin/env bash
# A real HDFS on loopback for the tests and for trying HDFS staging: one namenode and
# $DATANODES datanodes (default 1) in one JVM (Hadoop's MiniDFSCluster), WebHDFS on.
#
#   infra/hdfs/minidfs.sh start DIR [NN_PORT [HTTP_PORT]]  format DIR and start; ports 0 = free ones
#   infra/hdfs/minidfs.sh stop DIR                         stop the cluster whose PID is in DIR
#   infra/hdfs/minidfs.sh status DIR                       exit 0 when it is running
#
# On start it prints, and writes to DIR/cluster.env, HDFS_URI=hdfs://127.0.0.1:NN_PORT and
# WEBHDFS_URL=http://127.0.0.1:HTTP_PORT. Its data is formatted afresh on every start.
# The jars come from $LOADER_JARS_CACHE/hdfs (default .cache/jars/hdfs), fetched by make setup.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,11p' "$0"; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
pidfile="$dir/minidfs.pid"
jars="${LOADER_JARS_CACHE:-$here/../../.cache/jars}/hdfs"

running() { [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "$cmd" in
start)
    if running; then cat "$dir/cluster.env"; exit 0; fi
    compgen -G "$jars/*.jar" >/dev/null \
        || { echo "minidfs.sh: no jars in $jars; run make setup (infra/jars/fetch.sh) first" >&2; exit 1; }
    rm -rf "$dir/dfs" "$dir/details.json" "$dir/conf.xml" "$dir/cluster.env"
    # The JVM stays in its own process group so that stop ends it and nothing else.
    setsid java -Xmx512m -cp "$jars/*" org.apache.hadoop.test.MiniDFSClusterManager \
        -format -nnport "${3:-0}" -httpport "${4:-0}" -datanodes "${DATANODES:-1}" \
        -writeDetails "$dir/details.json" -writeConfig "$dir/conf.xml" \
        -D dfs.webhdfs.enabled=true -D hdfs.minidfs.basedir="$dir/dfs" \
        -D dfs.permissions.enabled=false >"$dir/minidfs.log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 1 240); do
        [[ -s "$dir/details.json" && -s "$dir/conf.xml" ]] && break
        running || { tail -n 20 "$dir/minidfs.log" >&2; echo "minidfs.sh: the cluster did not start (log: $dir/minidfs.log)" >&2; exit 1; }
        sleep 0.25
    done
    [[ -s "$dir/conf.xml" ]] || { echo "minidfs.sh: no cluster after 60 s (log: $dir/minidfs.log)" >&2; exit 1; }
    nn="$(grep -o '"namenode_port" *: *[0-9]*' "$dir/details.json" | grep -o '[0-9]*$')"
    http="$(grep -A1 '<name>dfs.namenode.http-address</name>' "$dir/conf.xml" | grep -o ':[0-9]*</value>' | tr -dc 0-9)"
    printf 'HDFS_URI=hdfs://127.0.0.1:%s\nWEBHDFS_URL=http://127.0.0.1:%s\n' "$nn" "$http" | tee "$dir/cluster.env"
    ;;
stop)
    if running; then
        pid="$(cat "$pidfile")"
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
        for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    ;;
status)
    running
    ;;
*)
    sed -n '2,11p' "$0"; exit 2
    ;;
esac
