# Sourced by infra/mariadb/mariadb.sh and infra/mysql/mysql.sh: a server process known by the pid
# file "$pidfile" in the data directory "$dir", alive, stopped, asked about.

# A killed server's process may linger a moment as a zombie until it is reaped: not running.
alive() {  # a process, not a zombie
    [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && [[ "$(ps -o stat= -p "$1" 2>/dev/null)" != Z* ]]
}

running() {
    local pid
    pid="$(cat "$pidfile" 2>/dev/null)" && alive "$pid"
}

stop_server() {  # stop_server NAME: stop it, waiting for the process (killed after 30 s)
    local pid
    if ! running; then echo "$1 in $dir is not running"; return 0; fi
    pid="$(cat "$pidfile")"
    kill "$pid"
    # The server removes its pid file before it has exited: wait for the process itself.
    for _ in $(seq 1 300); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
        kill -9 "$pid"
        for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    fi
    echo "$1 in $dir stopped"
}

server_status() {  # exit 0 when it is running
    running && { echo "running (pid $(cat "$pidfile"))"; return 0; }
    echo "not running"
    return 1
}
