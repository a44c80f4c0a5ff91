#!/usr/bin/env bash
# A private MariaDB with the binlog on, for the demo and the tests.
#
#   infra/mariadb/mariadb.sh start DIR PORT   initialise DIR (once) and start mariadbd on PORT
#   infra/mariadb/mariadb.sh stop DIR         stop the server whose PID is in DIR
#   infra/mariadb/mariadb.sh status DIR       exit 0 when it is running
#
# It never touches the machine's default server: its own data directory, socket, PID file and
# loopback port, and --no-defaults so no /etc/mysql file is read. Binlog settings come from
# binlog.cnf beside this script, the same file users copy to their own server.
# The 'loader' account gets the grants in grants.sql with password $LOADER_SOURCE_PASSWORD
# (default 'loader'); an 'app' account with all privileges and the same password does the
# demo's and the tests' writes. $MARIADB_ARGS adds server options (a replica's --server-id=2).
# The server speaks TLS with a certificate for 127.0.0.1 and localhost signed by a CA of its own,
# made at its first start: DIR/tls/ca.pem is what a client verifies it with
# ([source] tls = "verify_identity", tls_ca = "DIR/tls/ca.pem").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
port="${3:-33061}"
[[ -n "$cmd" && -n "$dir" ]] || { sed -n '2,17p' "$0"; exit 2; }
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
pidfile="$dir/mariadbd.pid"
# shellcheck source=../lib/server.sh
. "$here/../lib/server.sh"
sock="$dir/mariadbd.sock"

find_bin() {
    for name in "$@"; do
        for d in "" /usr/sbin/ /usr/bin/ /usr/local/sbin/; do
            if [[ -z "$d" ]]; then command -v "$name" >/dev/null 2>&1 && { command -v "$name"; return; }
            elif [[ -x "$d$name" ]]; then echo "$d$name"; return; fi
        done
    done
    echo "mariadb.sh: none of $* found; install the Debian packages mariadb-server and mariadb-client" >&2
    exit 1
}

make_tls() {  # make_tls FOLDER: a CA of this server's own, and its certificate signed by that CA
    local out="$1" ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
    command -v openssl >/dev/null 2>&1 \
        || { echo "mariadb.sh: openssl not found; install the Debian package openssl" >&2; exit 1; }
    mkdir -p "$out"
    openssl req -x509 "${ec[@]}" -days 3650 -subj "/CN=private MariaDB CA" \
        -keyout "$out/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
    openssl req -new "${ec[@]}" -subj "/CN=127.0.0.1" -keyout "$out/server-key.pem" -out "$out/server.csr" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' \
        >"$out/server.ext"
    openssl x509 -req -in "$out/server.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" -CAcreateserial \
        -days 3650 -extfile "$out/server.ext" -out "$out/server-cert.pem" 2>/dev/null
    rm -f "$out/server.csr" "$out/server.ext" "$out/ca.srl"
}

case "$cmd" in
start)
    if running; then echo "MariaDB already running (pid $(cat "$pidfile"), port $port)"; exit 0; fi
    mariadbd="$(find_bin mariadbd mysqld)"
    client="$(find_bin mariadb mysql)"
    install_db="$(find_bin mariadb-install-db mysql_install_db)"
    user="$(id -un)"
    # A temp folder of its own, for the install's server too: a server removes the temp files
    # (#sql*) it finds in its tmpdir when it starts, which in a shared /tmp are the running temp
    # tables of the other servers (an install beside another one failed on that).
    mkdir -p "$dir/binlog" "$dir/tmp"
    if [[ ! -d "$dir/data/mysql" ]]; then
        mkdir -p "$dir/data"
        "$install_db" --no-defaults --datadir="$dir/data" --user="$user" --tmpdir="$dir/tmp" \
            --auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1 \
            || { cat "$dir/install.log" >&2; exit 1; }
    fi
    [[ -f "$dir/tls/server-cert.pem" ]] || make_tls "$dir/tls"
    "$mariadbd" --defaults-file="$here/binlog.cnf" --datadir="$dir/data" --user="$user" \
        --port="$port" --bind-address=127.0.0.1 --socket="$sock" --pid-file="$pidfile" \
        --tmpdir="$dir/tmp" \
        --ssl-ca="$dir/tls/ca.pem" --ssl-cert="$dir/tls/server-cert.pem" --ssl-key="$dir/tls/server-key.pem" \
        --log-bin="$dir/binlog/mysql-bin" --log-error="$dir/error.log" \
        --innodb-buffer-pool-size=256M --skip-name-resolve ${MARIADB_ARGS:-} >/dev/null 2>&1 &
    for _ in $(seq 1 300); do
        if "$client" --no-defaults --socket="$sock" -uroot -e "SELECT 1" >/dev/null 2>&1; then break; fi
        if ! kill -0 $! 2>/dev/null; then
            echo "mariadb.sh: mariadbd exited while starting; its log:" >&2; tail -20 "$dir/error.log" >&2; exit 1
        fi
        sleep 0.1
    done
    password="${LOADER_SOURCE_PASSWORD:-loader}"
    sed -e "s/'%'/'127.0.0.1'/g" -e "s/change-me/${password//\'/\'\'}/" "$here/grants.sql" \
        | "$client" --no-defaults --socket="$sock" -uroot
    # An application account for the demo's and the tests' writes (the loader itself only reads).
    "$client" --no-defaults --socket="$sock" -uroot -e "CREATE USER IF NOT EXISTS 'app'@'127.0.0.1' IDENTIFIED BY '${password//\'/\'\'}'; GRANT ALL ON *.* TO 'app'@'127.0.0.1'"
    echo "MariaDB running: port $port, socket $sock, binlog $dir/binlog (pid $(cat "$pidfile"))"
    ;;
stop)
    stop_server MariaDB
    ;;
status)
    server_status
    ;;
*)
    sed -n '2,17p' "$0"; exit 2 ;;
esac
