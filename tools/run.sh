#!/usr/bin/env bash
# `make run`: build, prepare a local data dir, and show what runs today.
# (Later issues make this start airlockd with a local sandbox and attach.)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
data=${2:-./airlock-data}

if [ ! -f "$data/signing-key.pem" ]; then
  "$build/airlockd" keygen --data "$data"
fi
tok=$("$build/airlockd" token --data "$data" --aud local-sandbox --scope runner:connect --ttl 300)

cat <<MSG

Airlock is built ($build/). Data dir: $data (signing key, jwks.json).

  $build/airlockd      control plane  (today: keygen, token)
  $build/airlock-runner sandbox side   (terminals over one airlock.v1 WebSocket;
                        links no signing code)
  $build/airlock       command-line client

A runner:connect token for the sandbox "local-sandbox", valid 5 minutes:
  $tok

Try the runner (it serves terminals to a controller; airlockd's relay and
the CLI that attach to it come with the next issues):
  $build/airlock-runner --listen 127.0.0.1:7681 --identifier local-sandbox --jwks $data/jwks.json
MSG
