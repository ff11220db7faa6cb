#!/usr/bin/env bash
# `make run`: airlockd on SQLite in a local data dir, a local sandbox (its
# runner under bubblewrap), and one terminal running $AGENT (default:
# $SHELL). Prints the address, an admin API key and how to attach, then
# attaches this terminal to it with the CLI (when stdin and stdout are
# terminals and NO_ATTACH is unset); after a detach it stays in the
# foreground serving the web page until Ctrl-C (terminals keep running in
# the runner; the next `make run` relinks to them).
#
# With ANTHROPIC_API_KEY set, airlockd alone holds the key (the credential
# proxy, docs/proxy.md): the key goes to DATA/anthropic.key (0600), the
# variable is unset before anything is started, airlockd gets a --config
# (DATA/run.conf) naming the upstream `anthropic` and serving the proxy on
# 127.0.0.1:PORT+1, and the terminal is opened with "proxy": ["anthropic"]:
# it gets ANTHROPIC_BASE_URL and a credential of its own, never the key.
# AGENT=claude runs Claude Code there (see "Claude Code" below). Without
# the variable there is no proxy, and the files of an earlier run with it
# are removed.
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
proxy_port=$((port + 1))
agent=${AGENT:-${SHELL:-/bin/sh}}

# Claude Code: the agent's jail sees only /usr, /etc, /opt and its
# workspace. A `claude` of this host under /usr or /opt is seen there as
# it is; otherwise the native binary npm installed for this checkout
# (package.json pins @anthropic-ai/claude-code; CLAUDE_BIN=FILE chooses
# another) is copied (never hard-linked: the agent must not share the
# host's file) into the workspace's .airlock/bin, first on the terminal's
# PATH. CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: no telemetry or updates,
# only the model's API.
claude_src=
if [ "${agent%% *}" = claude ]; then
  case $(uname -m) in aarch64 | arm64) arch=arm64 ;; *) arch=x64 ;; esac
  host_claude=$(command -v claude 2>/dev/null || true)
  [ -n "$host_claude" ] && host_claude=$(readlink -f "$host_claude")
  seen_in_jail=
  case $host_claude in /usr/* | /opt/*) seen_in_jail=1 ;; esac
  if [ -z "${CLAUDE_BIN:-}" ] && [ -n "$seen_in_jail" ]; then
    claude_src=
  else
    claude_src=${CLAUDE_BIN:-node_modules/@anthropic-ai/claude-code-linux-$arch/claude}
    if [ ! -f "$claude_src" ]; then
      echo "AGENT=claude: no Claude Code binary at $claude_src (tools/deps.sh installs it with npm ci;" \
        "CLAUDE_BIN=FILE names another), and no claude under /usr or /opt" >&2
      exit 1
    fi
  fi
fi

mkdir -p "$data" && chmod 700 "$data"
keyfile="$data/admin.key"
if [ ! -s "$keyfile" ]; then
  (umask 077 && "$build/airlockd" user add admin --role admin --data "$data" | tail -n 1 >"$keyfile")
fi
key=$(cat "$keyfile")
url="http://127.0.0.1:$port"

# The credential proxy: the key into a 0600 file by the shell's printf
# builtin (never on a command line, never printed), then out of this
# environment, so that airlockd, its runners, the agents and the CLI
# started below never inherit it.
anth_key="$data/anthropic.key"
conf="$data/run.conf"
serve_conf=()
proxy_json=
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  (umask 077 && printf '%s\n' "$ANTHROPIC_API_KEY" >"$anth_key") && chmod 600 "$anth_key"
  abs_key="$(cd "$data" && pwd -P)/anthropic.key"
  (umask 077 && cat >"$conf") <<CONF
# written by tools/run.sh (make run): ANTHROPIC_API_KEY was set (docs/proxy.md)
proxy-listen = 127.0.0.1:$proxy_port
upstream.anthropic.url = https://api.anthropic.com
upstream.anthropic.kind = anthropic
upstream.anthropic.header = x-api-key
upstream.anthropic.secret-file = $abs_key
upstream.anthropic.paths = /v1/
CONF
  serve_conf=(--config "$conf")
  proxy_json=',"proxy":["anthropic"]'
else
  rm -f "$anth_key" "$conf"
fi
unset ANTHROPIC_API_KEY

(umask 077 && : >>"$data/airlockd.log") && chmod 600 "$data/airlockd.log" # airlockd's alone, as all of DATA
"$build/airlockd" serve --data "$data" --listen "127.0.0.1:$port" "${serve_conf[@]}" >>"$data/airlockd.log" 2>&1 &
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
# the terminal's environment beyond the runner's
env_json=
if [ "${agent%% *}" = claude ]; then
  env_json='"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC":"1"'
  if [ -n "$claude_src" ]; then
    bindir="$data/sandboxes/local/work/.airlock/bin"
    mkdir -p "$bindir" && chmod 755 "$bindir/.." "$bindir"
    if [ ! -f "$bindir/claude" ] || [ "$claude_src" -nt "$bindir/claude" ] ||
      [ "$(stat -c %s "$claude_src")" != "$(stat -c %s "$bindir/claude")" ]; then
      cp -f "$claude_src" "$bindir/claude" # ~370 MB: once, then when npm brings another
    fi
    chmod 755 "$bindir/claude"
    env_json="$env_json,\"PATH\":\"/workspace/.airlock/bin:/usr/local/bin:/usr/bin:/bin\""
  fi
fi

# the terminal of the last `make run`, if it still runs with the same
# upstreams (the proxy's, or none); else a new one
termfile="$data/run.terminal"
term=
if [ -s "$termfile" ]; then
  term=$(cat "$termfile")
  view=$(api "$url/v1/terminals/$term")
  grep -q '"state":"running"' <<<"$view" || term=
  if [ -n "$proxy_json" ]; then
    grep -q '"proxy":{"upstreams":\["anthropic"\],"revoked":false}' <<<"$view" || term=
  elif grep -q '"proxy":' <<<"$view"; then
    term=
  fi
fi
if [ -z "$term" ]; then
  # argv as a JSON array of strings, from the words of $agent
  argv=$(printf '%s\n' $agent | sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&"/' | paste -sd, -)
  term=$(api -X POST "$url/v1/terminals" -d "{\"sandbox\":\"local\",\"argv\":[$argv],\"env\":{$env_json}$proxy_json}" |
    sed -n 's/.*"id":"\(t-[0-9a-f]*\)".*/\1/p')
  [ -n "$term" ] && echo "$term" >"$termfile"
fi
if [ -n "$proxy_json" ]; then
  proxy_line="  proxy:          anthropic: the key is in $anth_key, for airlockd only; the terminal has
                  ANTHROPIC_BASE_URL at its runner's proxy listener (carried to airlockd over
                  the runner's link; the direct path is http://127.0.0.1:$proxy_port/v1/proxy) and a
                  credential of its own"
else
  proxy_line="  proxy:          none (ANTHROPIC_API_KEY=... make run: the key held by airlockd only)"
fi

cat <<MSG

airlockd is serving on $url (data: $data, log: $data/airlockd.log)
  web:            $url/   (sign in with the admin API key)
  admin API key:  $key   (also in $keyfile)
  sandbox:        local (airlock-runner under bubblewrap, workspace $data/sandboxes/local/work)
  terminal:       ${term:-"(not created: see the log)"} running: $agent
$proxy_line

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
