#!/usr/bin/env bash
# A PostgreSQL primary and a streaming replica of it (hot standby), both private to the tests,
# for the read-replica test (packages/jobs/test/read-replica.test.ts):
#   tools/test-services/pg-replica.sh start|stop [dir]
# Primary on 127.0.0.1:${FORGE_REPLICA_PRIMARY_PORT:-16433}, replica on :${FORGE_REPLICA_PORT:-16434},
# user postgres, trust, database test. Made with the server's own initdb and pg_basebackup; as
# root they run as the postgres user (PostgreSQL refuses root).
set -euo pipefail
command=${1:?usage: pg-replica.sh start|stop [dir]}
dir=${2:-/tmp/forge-pg-replica}
primary_port=${FORGE_REPLICA_PRIMARY_PORT:-16433}
replica_port=${FORGE_REPLICA_PORT:-16434}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$command" in
  start)
    if pg_isready -q -h 127.0.0.1 -p "$primary_port" && pg_isready -q -h 127.0.0.1 -p "$replica_port"; then exit 0; fi
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    if [ ! -f "$dir/primary/PG_VERSION" ]; then
      rm -rf "$dir/primary" "$dir/replica"
      as_pg "$bin/initdb" -D "$dir/primary" -U postgres -A trust --no-sync >/dev/null
      cat >> "$dir/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $primary_port
unix_socket_directories = '$dir'
wal_level = replica
max_wal_senders = 4
fsync = off
shared_buffers = 32MB
CONF
    fi
    as_pg "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w start >/dev/null
    as_pg psql -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
      || as_pg psql -h 127.0.0.1 -p "$primary_port" -U postgres -d postgres -qc "CREATE DATABASE test"
    if [ ! -f "$dir/replica/PG_VERSION" ]; then
      as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$dir/replica" -R -X stream --no-sync
      printf "port = %s\nhot_standby = on\n" "$replica_port" >> "$dir/replica/postgresql.conf"
    fi
    as_pg "$bin/pg_ctl" -D "$dir/replica" -l "$dir/replica.log" -w start >/dev/null
    ;;
  stop)
    for node in replica primary; do
      [ -f "$dir/$node/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$dir/$node" -m fast -w stop >/dev/null || true
    done
    ;;
  *)
    echo "usage: pg-replica.sh start|stop [dir]" >&2
    exit 2
    ;;
esac
