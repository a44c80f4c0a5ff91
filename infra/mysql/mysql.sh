#!/usr/bin/env bash
# A private MySQL with the binlog on, for the tests, from the root infra/mysql/install.sh unpacked.
#
#   infra/mysql/mysql.sh start DIR PORT   initialise DIR (once) and start mysqld on PORT
#   infra/mysql/mysql.sh stop DIR         stop the server whose PID is in DIR
#   infra/mysql/mysql.sh status DIR       exit 0 when it is running
#   infra/mysql/mysql.sh client DIR ...   the mysql client on the server's socket, as root
#   infra/mysql/mysql.sh mysqlbinlog DIR ... MySQL's binlog decoder (mysqlbinlog) of the unpacked root
#
# As mariadb.sh: its own data directory, socket, PID file and loopback port, no /etc/mysql file
# read, the binlog settings of binlog.cnf beside this script, the 'loader' account with the grants
# of infra/mariadb/grants.sql, RELOAD and BACKUP_ADMIN (MySQL's, below) and an 'app' account for
# the tests' writes, both with the password
# $LOADER_SOURCE_PASSWORD (default 'loader'). $MYSQL_ARGS adds server options; $MYSQL_ROOT is the
# unpacked root (default .cache/mysql/root of this repository). The X protocol is off (its port
# 33060 is shared by every server of a machine). The process shows as ld-linux-x86-64: the
# binaries run through the root's own loader, since their C library is newer than the machine's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
port="${3:-33071}"
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,17p' "$0"; exit 2; }
root="${MYSQL_ROOT:-$here/../../.cache/mysql/root}"
if [[ ! -f "$root/.unpacked" ]]; then
    echo "mysql.sh: no MySQL unpacked in $root: run make setup (infra/mysql/install.sh)" >&2
    exit 1
fi
root="$(cd "$root" && pwd)"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
pidfile="$dir/mysqld.pid"
# shellcheck source=../lib/server.sh
. "$here/../lib/server.sh"
sock="$dir/mysqld.sock"

run() {  # run BINARY ARGS...: an unpacked binary, through the unpacked C library
    local bin="$1"
    shift
    "$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
        --library-path "$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu" \
        --argv0 "$(basename "$bin")" "$root$bin" "$@"
}

client() { run /usr/bin/mysql --no-defaults --socket="$sock" -uroot "$@"; }

paths=(--basedir="$root/usr" --lc-messages-dir="$root/usr/share/mysql" --plugin-dir="$root/usr/lib/mysql/plugin"
    --character-sets-dir="$root/usr/share/mysql/charsets")

case "$cmd" in
start)
    if running; then echo "MySQL already running (pid $(cat "$pidfile"), port $port)"; exit 0; fi
    user="$(id -un)"
    mkdir -p "$dir/binlog" "$dir/tmp" "$dir/files"
    if [[ ! -d "$dir/data/mysql" ]]; then
        rm -rf "$dir/data"
        run /usr/sbin/mysqld --no-defaults --initialize-insecure "${paths[@]}" --datadir="$dir/data" \
            --user="$user" --tmpdir="$dir/tmp" >"$dir/install.log" 2>&1 \
            || { cat "$dir/install.log" >&2; exit 1; }
    fi
    run /usr/sbin/mysqld --defaults-file="$here/binlog.cnf" "${paths[@]}" --datadir="$dir/data" --user="$user" \
        --port="$port" --bind-address=127.0.0.1 --socket="$sock" --pid-file="$pidfile" \
        --tmpdir="$dir/tmp" --secure-file-priv="$dir/files" --mysqlx=OFF \
        --log-bin="$dir/binlog/mysql-bin" --log-error="$dir/error.log" \
        --innodb-buffer-pool-size=256M --skip-name-resolve ${MYSQL_ARGS:-} >/dev/null 2>&1 &
    for _ in $(seq 1 600); do
        if client -e "SELECT 1" >/dev/null 2>&1; then break; fi
        if ! kill -0 $! 2>/dev/null; then
            echo "mysql.sh: mysqld exited while starting; its log:" >&2; tail -20 "$dir/error.log" >&2; exit 1
        fi
        sleep 0.1
    done
    password="${LOADER_SOURCE_PASSWORD:-loader}"
    sed -e "s/'%'/'127.0.0.1'/g" -e "s/change-me/${password//\'/\'\'}/" "$here/../mariadb/grants.sql" | client
    # MySQL reports no snapshot's binlog position: loader checksum takes the global read lock
    # (RELOAD); its position and GTID set are read together from performance_schema.log_status.
    client -e "GRANT RELOAD, BACKUP_ADMIN ON *.* TO 'loader'@'127.0.0.1'"
    client -e "CREATE USER IF NOT EXISTS 'app'@'127.0.0.1' IDENTIFIED BY '${password//\'/\'\'}'; GRANT ALL ON *.* TO 'app'@'127.0.0.1'"
    echo "MySQL $(cat "$root/.unpacked") running: port $port, socket $sock, binlog $dir/binlog (pid $(cat "$pidfile"))"
    ;;
stop)
    stop_server MySQL
    ;;
status)
    server_status
    ;;
client)
    shift 2
    client "$@"
    ;;
mysqlbinlog)
    shift 2
    run /usr/bin/mysqlbinlog "$@"
    ;;
*)
    sed -n '2,17p' "$0"; exit 2 ;;
esac
