#!/bin/sh
# Starts airlock-runner in a platform's session container (docs/aca.md):
# listening on AIRLOCK_PORT (the pool's target port), its identifier that of
# the first valid upgrade (the platform allocates the session on it), its
# token in X-Airlock-Token (the platform's ingress keeps Authorization for
# its own token). The JWKS is public: AIRLOCK_JWKS holds it, or a file is
# mounted at /etc/airlock/jwks.json. Extra runner options: "$@".
# AIRLOCK_LISTEN (HOST:PORT) and AIRLOCK_RUNNER (the binary) are for tests.
set -eu
jwks=/etc/airlock/jwks.json
if [ -n "${AIRLOCK_JWKS:-}" ]; then
  jwks=$(mktemp "${TMPDIR:-/tmp}/airlock-jwks.XXXXXX")
  printf '%s\n' "$AIRLOCK_JWKS" >"$jwks"
fi
if [ ! -s "$jwks" ]; then
  echo "airlock-entrypoint: no JWKS: set AIRLOCK_JWKS or mount /etc/airlock/jwks.json" >&2
  exit 64
fi
exec "${AIRLOCK_RUNNER:-/usr/local/bin/airlock-runner}" \
  --listen "${AIRLOCK_LISTEN:-0.0.0.0:${AIRLOCK_PORT:-8080}}" \
  --identifier-from request \
  --token-header X-Airlock-Token \
  --jwks "$jwks" \
  "$@"
