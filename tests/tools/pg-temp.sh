#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests (the recipe of
# shared/notes/libraries.md: initdb + pg_ctl, as user postgres via runuser
# when run as root, in a temporary directory).
#
#   pg-temp.sh start DIR [OWNER_PID]
#       DIR: a new or empty directory (a path without spaces or quotes).
#       initdb into DIR/data and start the server listening on a unix socket
#       in DIR/sock only (no TCP: nothing to race for, nothing reachable
#       from outside), then print its URL on stdout, one line:
#         postgresql://postgres@/postgres?host=DIR/sock&port=5432
#       With OWNER_PID, a detached watcher stops the server and removes DIR
#       once that process is gone, so a test that crashes leaves nothing
#       running (it gives up after WATCH_MAX_S).
#   pg-temp.sh stop DIR
#       stop the server (pg_ctl -m fast; then SIGKILL to the postmaster's
#       PID from DIR/data/postmaster.pid if it did not stop) and remove DIR.
#
# Exit status 0, or 1 with one reason on stderr; missing PostgreSQL server
# binaries are a failure with a clear message (tools/deps.sh installs them),
# never a silent skip. PGBIN overrides where initdb and pg_ctl are found.
set -euo pipefail

PORT=5432        # only names the socket file: DIR/sock/.s.PGSQL.5432
STOP_WAIT_S=30   # pg_ctl -t for start and stop
WATCH_MAX_S=21600
MARK=.airlock-pg-temp

die() { echo "pg-temp: $*" >&2; exit 1; }

find_bin() {
  if [ -n "${PGBIN:-}" ]; then
    [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ] ||
      die "PGBIN=$PGBIN holds no initdb and pg_ctl"
    return
  fi
  local d best=""
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && best=$d
  done
  if [ -z "$best" ] && command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    best=$(dirname "$(command -v initdb)")
  fi
  [ -n "$best" ] || die "PostgreSQL server binaries (initdb, pg_ctl) not found: install the Debian package postgresql (tools/deps.sh does), or set PGBIN"
  PGBIN=$best
}

# Run as the server's user: postgres when we are root (PostgreSQL refuses
# to run as root), else ourselves.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

check_dir() {
  case "$1" in
    /*) ;;
    *) die "DIR must be an absolute path" ;;
  esac
  case "$1" in
    *[[:space:]\'\"\\\$\`]*) die "DIR must not hold spaces, quotes or shell characters" ;;
  esac
}

start() {
  local dir=$1 owner=${2:-}
  check_dir "$dir"
  find_bin
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  : >"$dir/$MARK"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "no user postgres (install the Debian package postgresql)"
    chown postgres: "$dir"
  fi
  chmod 0700 "$dir"
  if ! as_pg "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale \
       --no-sync >"$dir/initdb.log" 2>&1; then
    tail -n 20 "$dir/initdb.log" >&2
    die "initdb failed (log above)"
  fi
  as_pg mkdir -m 0700 "$dir/sock"
  # -h '': no TCP at all; -k: the socket directory; durability off (a test
  # server, thrown away).
  if ! as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$STOP_WAIT_S" \
       -o "-h '' -k $dir/sock -p $PORT -F -c fsync=off -c full_page_writes=off -c max_connections=40" \
       start >/dev/null 2>&1; then
    tail -n 20 "$dir/server.log" >&2 || true
    die "the server did not start (log above)"
  fi
  if [ -n "$owner" ]; then
    [[ "$owner" =~ ^[0-9]+$ ]] || die "OWNER_PID must be a number"
    setsid bash "$0" watch "$dir" "$owner" </dev/null >/dev/null 2>&1 &
  fi
  echo "postgresql://postgres@/postgres?host=$dir/sock&port=$PORT"
}

stop() {
  local dir=$1
  check_dir "$dir"
  [ -e "$dir/$MARK" ] || die "$dir was not made by pg-temp.sh start; not touching it"
  if [ -f "$dir/data/postmaster.pid" ]; then
    local pid
    pid=$(head -n 1 "$dir/data/postmaster.pid")
    find_bin
    if ! as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w -t "$STOP_WAIT_S" stop >/dev/null 2>&1; then
      # Only the postmaster this directory started: its command line names
      # our data directory.
      if [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/data"; then
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
      fi
    fi
  fi
  rm -rf -- "$dir"
}

# The watcher: stop once the owner is gone (or the directory was removed).
watch() {
  local dir=$1 owner=$2 i=0
  while [ "$i" -lt "$WATCH_MAX_S" ] && [ -e "$dir/$MARK" ] && kill -0 "$owner" 2>/dev/null; do
    sleep 1
    i=$((i + 1))
  done
  if [ -e "$dir/$MARK" ]; then
    stop "$dir"
  fi
}

case "${1:-}" in
  start) [ $# -ge 2 ] && [ $# -le 3 ] || die "usage: pg-temp.sh start DIR [OWNER_PID]"; start "$2" "${3:-}" ;;
  stop) [ $# -eq 2 ] || die "usage: pg-temp.sh stop DIR"; stop "$2" ;;
  watch) watch "$2" "$3" ;;
  *) die "usage: pg-temp.sh start DIR [OWNER_PID] | stop DIR" ;;
esac
