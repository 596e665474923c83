#!/usr/bin/env bash
# A PostgreSQL HA cluster on loopback, for the failover test and for trying failover by hand:
# two PostgreSQL 15 nodes managed by Patroni (its built-in Raft as the DCS, with a third Raft
# member, patroni_raft_controller, so one node's death leaves a quorum), and HAProxy in front
# routing to whichever node Patroni's REST API says is the primary (GET /primary).
#
#   tools/ha/cluster.sh start [sync|async]   start everything, wait for a primary behind HAProxy
#                                            (and, in sync mode, a synchronous standby)
#   tools/ha/cluster.sh primary              the primary's node name (node0 / node1)
#   tools/ha/cluster.sh kill-primary         SIGKILL the primary's Patroni and its postmaster
#   tools/ha/cluster.sh status               patronictl list
#   tools/ha/cluster.sh stop                 stop everything and delete the folder
#   tools/ha/cluster.sh check                exit 0 if patroni, haproxy and pysyncobj are installed
#
# Everything lives under $FORGE_HA_DIR (default /tmp/forge-ha). Ports (FORGE_HA_PORT_BASE,
# default 55400): PostgreSQL base+32/base+33, Patroni REST base+8/base+9, Raft base+22..24,
# HAProxy base+0. As root, Patroni and PostgreSQL run as the postgres OS user (initdb refuses root).
# Debian packages: patroni, python3-pysyncobj, haproxy, postgresql (FORGE_PG_BIN: its bin folder).
set -euo pipefail

DIR=${FORGE_HA_DIR:-/tmp/forge-ha}
BASE=${FORGE_HA_PORT_BASE:-55400}
HAPROXY_PORT=$((BASE + 0))
PG_BIN=${FORGE_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
SCOPE=forge-ha
NODES=(node0 node1)

pg_port() { echo $((BASE + 32 + $1)); }
rest_port() { echo $((BASE + 8 + $1)); }
raft_port() { echo $((BASE + 22 + $1)); }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
say() { echo "ha: $*" >&2; }

check() {
  command -v patroni >/dev/null && command -v patroni_raft_controller >/dev/null && command -v haproxy >/dev/null &&
    /usr/bin/python3 -c 'import pysyncobj' 2>/dev/null && [ -x "$PG_BIN/initdb" ]
}

# The Raft section every member shares: its own address and the two others.
raft_section() {
  local self=$1 partners=() i
  for i in 0 1 2; do [ "$i" = "$self" ] || partners+=("127.0.0.1:$(raft_port "$i")"); done
  cat <<EOF
raft:
  data_dir: $DIR/raft$self
  self_addr: 127.0.0.1:$(raft_port "$self")
  partner_addrs: [${partners[0]}, ${partners[1]}]
EOF
}

write_node_config() {
  local i=$1 mode=$2 sync=false
  [ "$mode" = sync ] && sync=true
  cat >"$DIR/${NODES[$i]}.yml" <<EOF
scope: $SCOPE
name: ${NODES[$i]}
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:$(rest_port "$i")
  connect_address: 127.0.0.1:$(rest_port "$i")
$(raft_section "$i")
bootstrap:
  dcs:
    # Short timings so a failover takes seconds: the leader key lives ttl seconds after the
    # primary's last renewal; the standby looks every loop_wait seconds.
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: $sync
    # Not strict: once the standby is the primary it has no standby of its own, and strict
    # mode would block every commit until one came back.
    synchronous_mode_strict: false
    postgresql:
      use_pg_rewind: false
      use_slots: true
      parameters:
        max_connections: 100
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
        wal_keep_size: 128MB
  initdb:
    - encoding: UTF8
    - no-sync
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$i")
  connect_address: 127.0.0.1:$(pg_port "$i")
  data_dir: $DIR/${NODES[$i]}/data
  bin_dir: $PG_BIN
  pgpass: $DIR/${NODES[$i]}/pgpass
  authentication:
    superuser: { username: postgres, password: postgres }
    replication: { username: replicator, password: replicator }
  parameters:
    unix_socket_directories: $DIR/${NODES[$i]}
    # A test cluster on a shared machine: no fsync (a SIGKILLed postmaster loses nothing the
    # OS has; the kill is the fault under test, not the disk).
    fsync: "off"
    full_page_writes: "off"
tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false }
EOF
}

write_haproxy_config() {
  cat >"$DIR/haproxy.cfg" <<EOF
global
  maxconn 400
  pidfile $DIR/haproxy.pid
defaults
  mode tcp
  retries 2
  timeout connect 2s
  # LISTEN connections stay idle for as long as no job comes: no idle timeout to speak of.
  timeout client 60m
  timeout server 60m
  timeout check 1s
listen primary
  bind 127.0.0.1:$HAPROXY_PORT
  option httpchk GET /primary
  http-check expect status 200
  # Connections to a node that stops being the primary are closed at once, so clients
  # reconnect (to the new primary) instead of talking to a demoted or dead server.
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
EOF
  local i
  for i in 0 1; do
    echo "  server ${NODES[$i]} 127.0.0.1:$(pg_port "$i") maxconn 200 check port $(rest_port "$i")" >>"$DIR/haproxy.cfg"
  done
}

# A daemon in its own session, its pid in $DIR/<name>.pid, its output in $DIR/<name>.log.
spawn_daemon() {
  local name=$1
  shift
  if [ "$(id -u)" = 0 ]; then
    setsid runuser -u postgres -- "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  else
    setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  fi
  echo $! >"$DIR/$name.pid"
}

# runuser forks: the pid that matters is its child's (patroni itself).
daemon_pid() {
  local pid
  pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 1
  if [ "$(id -u)" = 0 ]; then pgrep -P "$pid" | head -1; else echo "$pid"; fi
}

rest() { curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$(rest_port "$1")/$2" || true; }

primary() {
  local i
  for i in 0 1; do
    if [ "$(rest "$i" primary)" = 200 ]; then
      echo "${NODES[$i]}"
      return 0
    fi
  done
  return 1
}

wait_for() {
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 2))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  say "timed out after ${seconds}s waiting for $what (logs in $DIR)"
  return 1
}

haproxy_routes() { as_postgres "$PG_BIN/psql" -h 127.0.0.1 -p "$HAPROXY_PORT" -U postgres -d postgres -tAc 'SELECT NOT pg_is_in_recovery()' | grep -q t; }
sync_standby() { local i; for i in 0 1; do [ "$(rest "$i" sync)" = 200 ] && return 0; done; return 1; }
replica_streaming() { local i; for i in 0 1; do [ "$(rest "$i" replica)" = 200 ] && return 0; done; return 1; }

start() {
  local mode=${1:-sync}
  check || {
    say "needs patroni, patroni_raft_controller, python3-pysyncobj, haproxy and PostgreSQL binaries ($PG_BIN)"
    exit 3
  }
  [ -e "$DIR" ] && stop
  mkdir -p "$DIR"
  for i in 0 1; do mkdir -p "$DIR/${NODES[$i]}" "$DIR/raft$i"; done
  mkdir -p "$DIR/raft2"
  chmod 700 "$DIR"/node*
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$DIR"
  echo "$mode" >"$DIR/mode"
  for i in 0 1; do write_node_config "$i" "$mode"; done
  raft_section 2 >"$DIR/raft2.yml"
  write_haproxy_config
  [ "$(id -u)" = 0 ] && chown -R postgres:postgres "$DIR"

  spawn_daemon raft2 patroni_raft_controller "$DIR/raft2.yml"
  spawn_daemon node0 patroni "$DIR/node0.yml"
  wait_for "node0 to become the primary" 90 primary
  spawn_daemon node1 patroni "$DIR/node1.yml"
  haproxy -D -f "$DIR/haproxy.cfg" || {
    say "haproxy did not start"
    exit 1
  }
  wait_for "HAProxy to route to the primary" 30 haproxy_routes
  if [ "$mode" = sync ]; then
    wait_for "a synchronous standby" 120 sync_standby
  else
    wait_for "a streaming standby" 120 replica_streaming
  fi
  say "up ($mode): primary $(primary), HAProxy on 127.0.0.1:$HAPROXY_PORT"
}

kill_primary() {
  local node i pid postmaster
  node=$(primary) || {
    say "no primary"
    exit 1
  }
  for i in 0 1; do [ "${NODES[$i]}" = "$node" ] && break; done
  pid=$(daemon_pid "$node")
  postmaster=$(head -1 "$DIR/$node/data/postmaster.pid")
  # Both at once: a Patroni left alive would restart its crashed postmaster in place.
  kill -KILL "$pid" "$postmaster"
  echo "$node"
}

stop_node() {
  local node=$1 pid
  pid=$(daemon_pid "$node" 2>/dev/null) && kill -KILL "$pid" 2>/dev/null || true
  pid=$(cat "$DIR/$node.pid" 2>/dev/null) && kill -KILL "$pid" 2>/dev/null || true
  if [ -f "$DIR/$node/data/postmaster.pid" ]; then
    as_postgres "$PG_BIN/pg_ctl" -D "$DIR/$node/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
}

stop() {
  [ -d "$DIR" ] || return 0
  local pid
  pid=$(cat "$DIR/haproxy.pid" 2>/dev/null) && kill "$pid" 2>/dev/null || true
  for node in "${NODES[@]}"; do stop_node "$node"; done
  stop_node raft2
  rm -rf "$DIR"
}

case "${1:-}" in
  start) start "${2:-sync}" ;;
  stop) stop ;;
  primary) primary ;;
  kill-primary) kill_primary ;;
  status)
    as_postgres patronictl -c "$DIR/node0.yml" list || true
    # What each daemon said last (WARNING and up): why a failover did or did not happen.
    for log in "$DIR"/node0.log "$DIR"/node1.log "$DIR"/raft2.log; do
      [ -f "$log" ] && { echo "== $(basename "$log")"; tail -n 15 "$log"; }
    done
    ;;
  check) check ;;
  *)
    sed -n '2,18p' "$0" >&2
    exit 2
    ;;
esac
