#!/usr/bin/env bash
# `make run`: airlockd on SQLite in a local data dir, a local sandbox (its
# runner under bubblewrap), and one terminal running $AGENT (default:
# $SHELL). Prints the address, an admin API key and how to attach, then
# attaches this terminal to it with the CLI (when stdin and stdout are
# terminals and NO_ATTACH is unset); after a detach it stays in the
# foreground serving the web page until Ctrl-C (terminals keep running in
# the runner; the next `make run` relinks to them).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
data=${2:-}
# The data directory. Its sandboxes must be reachable by the unprivileged
# sandbox user, so as root it is ./airlock-data only when every directory
# above it is searchable by others; a checkout under /root (0700) uses
# /var/lib/airlock-run instead, rather than asking to open up /root.
if [ -z "$data" ]; then
  data=./airlock-data
  if [ "$(id -u)" = 0 ]; then
    d=$(pwd -P)
    while [ -n "$d" ] && [ "$d" != / ]; do
      if [ -z "$(find "$d" -maxdepth 0 -perm -o+x)" ]; then data=/var/lib/airlock-run; break; fi
      d=$(dirname "$d")
    done
  fi
fi
port=${AIRLOCK_PORT:-7700}
agent=${AGENT:-${SHELL:-/bin/sh}}

mkdir -p "$data" && chmod 700 "$data"
keyfile="$data/admin.key"
if [ ! -s "$keyfile" ]; then
  (umask 077 && "$build/airlockd" user add admin --role admin --data "$data" | tail -n 1 >"$keyfile")
fi
key=$(cat "$keyfile")
url="http://127.0.0.1:$port"

(umask 077 && : >>"$data/airlockd.log") && chmod 600 "$data/airlockd.log" # airlockd's alone, as all of DATA
"$build/airlockd" serve --data "$data" --listen "127.0.0.1:$port" >>"$data/airlockd.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' INT TERM EXIT
for _ in $(seq 100); do
  curl -fs "$url/healthz" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { echo "airlockd did not start: see $data/airlockd.log" >&2; exit 1; }
  sleep 0.1
done

api() { curl -s -H "Authorization: Bearer $key" -H 'Content-Type: application/json' "$@"; }
if ! api "$url/v1/sandboxes" | grep -q '"id":"local"'; then
  api -X POST "$url/v1/sandboxes" -d '{"id":"local","kind":"local"}' >/dev/null
fi
for _ in $(seq 100); do
  api "$url/v1/sandboxes" | grep -q '"id":"local"[^}]*"link_up":true' && break
  sleep 0.1
done
# the terminal of the last `make run`, if it still runs; else a new one
termfile="$data/run.terminal"
term=
if [ -s "$termfile" ]; then
  term=$(cat "$termfile")
  api "$url/v1/terminals/$term" | grep -q '"state":"running"' || term=
fi
if [ -z "$term" ]; then
  # argv as a JSON array of strings, from the words of $agent
  argv=$(printf '%s\n' $agent | sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&"/' | paste -sd, -)
  term=$(api -X POST "$url/v1/terminals" -d "{\"sandbox\":\"local\",\"argv\":[$argv]}" |
    sed -n 's/.*"id":"\(t-[0-9a-f]*\)".*/\1/p')
  [ -n "$term" ] && echo "$term" >"$termfile"
fi

cat <<MSG

airlockd is serving on $url (data: $data, log: $data/airlockd.log)
  web:            $url/   (sign in with the admin API key)
  admin API key:  $key   (also in $keyfile)
  sandbox:        local (airlock-runner under bubblewrap, workspace $data/sandboxes/local/work)
  terminal:       ${term:-"(not created: see the log)"} running: $agent

  attach:  AIRLOCK_URL=$url AIRLOCK_API_KEY=\$(cat $keyfile) $build/airlock attach $term
  list:    ... $build/airlock ls      replay: ... $build/airlock replay $term
MSG
export AIRLOCK_URL="$url" AIRLOCK_API_KEY="$key"
if [ -n "$term" ] && [ -t 0 ] && [ -t 1 ] && [ -z "${NO_ATTACH:-}" ]; then
  echo "Attaching (Enter ~ . detaches; the agent keeps running)..."
  rc=0
  "$build/airlock" attach "$term" || rc=$?
  echo
  echo "attach ended (status $rc); airlockd still serves $url/ (admin key in $keyfile)."
  echo "Ctrl-C stops airlockd; the terminal keeps running and the next 'make run' relinks."
else
  echo
  echo "Ctrl-C stops airlockd; the terminal keeps running and the next 'make run' relinks."
fi
wait $pid
