#!/usr/bin/env bash
# PgBouncer in transaction mode in front of the local PostgreSQL, for the conformance tests run
# through a pooler (.ci/run; by hand: see packages/jobs/README.md "Through PgBouncer").
#   tools/test-services/pgbouncer.sh start|stop [dir]
# Listens on 127.0.0.1:${FORGE_PGBOUNCER_PORT:-16432}, forwards every database to 127.0.0.1:5432,
# trusts loopback clients (as the local PostgreSQL does). Debian's pgbouncer refuses to run as
# root, so as root it runs as the postgres user.
set -euo pipefail
command=${1:?usage: pgbouncer.sh start|stop [dir]}
dir=${2:-/tmp/forge-pgbouncer}
port=${FORGE_PGBOUNCER_PORT:-16432}
bin=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)

case "$command" in
  start)
    mkdir -p "$dir"
    [ -x "$bin" ] || { echo "pgbouncer.sh: pgbouncer is not installed (apt-get install pgbouncer)" >&2; exit 1; }
    # Already answering (started by .ci/run, or by an earlier test run): nothing to do.
    if pg_isready -q -h 127.0.0.1 -p "$port"; then exit 0; fi
    # No password is sent (trust), but PgBouncer wants an auth file to exist.
    echo '"postgres" ""' > "$dir/users.txt"
    cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
server_reset_query =
ignore_startup_parameters = extra_float_digits
log_connections = 0
log_disconnections = 0
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    user_flag=()
    if [ "$(id -u)" = 0 ]; then chown -R postgres "$dir"; user_flag=(-u postgres); fi
    "$bin" -d "${user_flag[@]}" "$dir/pgbouncer.ini"
    for _ in $(seq 1 50); do
      pg_isready -q -h 127.0.0.1 -p "$port" && exit 0
      sleep 0.1
    done
    echo "pgbouncer.sh: PgBouncer is not answering on 127.0.0.1:$port (log: $dir/pgbouncer.log)" >&2
    exit 1
    ;;
  stop)
    [ -f "$dir/pgbouncer.pid" ] && kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    ;;
  *)
    echo "usage: pgbouncer.sh start|stop [dir]" >&2
    exit 2
    ;;
esac
