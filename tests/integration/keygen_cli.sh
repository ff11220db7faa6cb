#!/usr/bin/env bash
# airlockd keygen / token from the command line: files and modes, refusal
# to overwrite, rotation, one clear error line and the right exit code for
# every bad input (2 usage, 1 runtime), never a crash; minted tokens verify
# with tokcheck only for the right audience and scope.
# Env: AL_BIN (build dir with airlockd, tokcheck).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
AIRLOCKD="$AL_BIN/airlockd"
TOKCHECK="$AL_BIN/tokcheck"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

[ -x "$AIRLOCKD" ] && [ -x "$TOKCHECK" ] || fail "missing binaries in $AL_BIN"
work=$(mktemp -d "${TMPDIR:-/tmp}/al-keygen.XXXXXX")
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
umask 022

# cli_error WHAT CODE SUBSTRING CMD...: exit CODE, nothing on stdout, exactly
# one line on stderr containing SUBSTRING, and no crash (signal).
cli_error() {
  local what=$1 code=$2 want=$3 rc=0
  shift 3
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" -lt 128 ] || fail "$what: killed by a signal (rc $rc): $(cat "$work/err")"
  [ "$rc" -eq "$code" ] || fail "$what: exit $rc, expected $code: $(cat "$work/err")"
  [ ! -s "$work/out" ] || fail "$what: unexpected stdout: $(cat "$work/out")"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$what: expected one error line, got: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "$what: expected '$want' in: $(cat "$work/err")"
  pass "$what: $(cat "$work/err")"
}

# rejected WHAT SUBSTRING CMD...: tokcheck refuses (exit 1, reason on stdout).
rejected() {
  local what=$1 want=$2 rc=0 out
  shift 2
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -eq 1 ] || fail "$what: exit $rc, expected 1: $out"
  [[ $out == "rejected: "*"$want"* ]] || fail "$what: expected '$want' in: $out"
  pass "$what: $out"
}

mode() { stat -c '%a' "$1"; }

# --- keygen --------------------------------------------------------------------
"$AIRLOCKD" keygen --data "$work/d" >"$work/out" || fail "keygen failed"
grep -q "created signing key" "$work/out" || fail "keygen output: $(cat "$work/out")"
[ "$(mode "$work/d")" = 700 ] || fail "data dir mode $(mode "$work/d")"
[ "$(mode "$work/d/signing-key.pem")" = 600 ] || fail "key mode $(mode "$work/d/signing-key.pem")"
[ "$(mode "$work/d/jwks.json")" = 644 ] || fail "jwks mode $(mode "$work/d/jwks.json")"
head -1 "$work/d/signing-key.pem" | grep -qx -- '-----BEGIN PRIVATE KEY-----' || fail "key is not PKCS#8 PEM"
grep -q '"kty": "OKP"' "$work/d/jwks.json" || fail "jwks.json content"
if grep -q '"d"' "$work/d/jwks.json"; then fail "jwks.json holds a private part"; fi
openssl pkey -in "$work/d/signing-key.pem" -noout -text 2>/dev/null | grep -q 'ED25519' ||
  fail "openssl does not read the key as ED25519"
pass "keygen: 0700 dir, 0600 PKCS#8 Ed25519 key, 0644 jwks.json"

sums=$(sha256sum "$work/d/signing-key.pem" "$work/d/jwks.json")
cli_error "second keygen refuses" 1 "already exists" "$AIRLOCKD" keygen --data "$work/d"
[ "$sums" = "$(sha256sum "$work/d/signing-key.pem" "$work/d/jwks.json")" ] ||
  fail "second keygen changed the files"

AIRLOCK_DATA="$work/envdata" "$AIRLOCKD" keygen >/dev/null || fail "keygen with AIRLOCK_DATA"
[ -f "$work/envdata/signing-key.pem" ] || fail "AIRLOCK_DATA not honoured"
env -u AIRLOCK_DATA "$AIRLOCKD" keygen >/dev/null || fail "keygen with the default dir"
[ -f "$work/airlock-data/signing-key.pem" ] || fail "./airlock-data default not honoured"
pass "keygen: --data, \$AIRLOCK_DATA, ./airlock-data"

# --- token: good ---------------------------------------------------------------
tok=$("$AIRLOCKD" token --data "$work/d" --aud sb-1 --scope "runner:connect terminal:read" --sub alice --ttl 120)
[ "$(tr -cd . <<<"$tok" | wc -c)" -eq 2 ] || fail "token is not 3 segments: $tok"
out=$("$TOKCHECK" --jwks "$work/d/jwks.json" --aud sb-1 --scope runner:connect <<<"$tok") ||
  fail "tokcheck refused: $out"
[[ $out == "ok sub=alice iss=airlockd "* ]] || fail "tokcheck output: $out"
"$TOKCHECK" --jwks "$work/d/jwks.json" --aud sb-1 --scope terminal:read <<<"$tok" >/dev/null ||
  fail "second scope refused"
pass "token verifies with the right audience and scopes ($out)"
AIRLOCK_DATA="$work/d" "$AIRLOCKD" token --aud sb-1 --scope runner:connect >/dev/null ||
  fail "token with AIRLOCK_DATA"

now=$(date +%s)
J=(--jwks "$work/d/jwks.json")
rejected "wrong audience" "wrong audience" "$TOKCHECK" "${J[@]}" --aud sb-2 --scope runner:connect <<<"$tok"
rejected "wrong scope" "scope does not cover" "$TOKCHECK" "${J[@]}" --aud sb-1 --scope terminal:write <<<"$tok"
rejected "partial scope word" "scope does not cover" "$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:conn <<<"$tok"
rejected "expired (ttl 120 + leeway 30)" "token expired" \
  "$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:connect --now $((now + 151)) <<<"$tok"
rejected "other key set" "unknown key id" \
  "$TOKCHECK" --jwks "$work/envdata/jwks.json" --aud sb-1 --scope runner:connect <<<"$tok"
rejected "truncated token" "bad signature" \
  "$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:connect <<<"${tok%??????????}AAAAAAAAAA"

# ttl bounds: 1 and 3600 accepted.
"$AIRLOCKD" token --data "$work/d" --aud a --scope s --ttl 1 >/dev/null || fail "ttl 1"
"$AIRLOCKD" token --data "$work/d" --aud a --scope s --ttl 3600 >/dev/null || fail "ttl 3600"
"$AIRLOCKD" token --data "$work/d" --aud=a --scope=s --ttl=60 >/dev/null || fail "--flag=value form"

# --- usage errors: exit 2 ------------------------------------------------------
T=("$AIRLOCKD" token --data "$work/d")
cli_error "no command" 2 "missing command" "$AIRLOCKD"
cli_error "unknown command" 2 "unknown command" "$AIRLOCKD" frobnicate
cli_error "unknown flag" 2 "unknown option '--bogus'" "${T[@]}" --aud a --scope s --bogus
cli_error "stray argument" 2 "unknown argument" "${T[@]}" --aud a --scope s extra
cli_error "missing --aud" 2 "--aud and --scope are required" "${T[@]}" --scope s
cli_error "missing --scope" 2 "--aud and --scope are required" "${T[@]}" --aud a
cli_error "flag without value" 2 "--aud needs a value" "${T[@]}" --scope s --aud
cli_error "empty value" 2 "needs a non-empty value" "${T[@]}" --scope s --aud ""
cli_error "flag twice" 2 "given twice" "${T[@]}" --aud a --aud b --scope s
cli_error "ttl zero" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl 0
cli_error "ttl too long" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl 3601
cli_error "ttl negative" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl -5
cli_error "ttl not a number" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl 5m
cli_error "ttl overflow" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl 99999999999999999999999
cli_error "ttl with space" 2 "--ttl must be" "${T[@]}" --aud a --scope s --ttl " 5"
cli_error "bad scope" 2 "--scope must be" "${T[@]}" --aud a --scope 'a  b'
cli_error "keygen unknown flag" 2 "unknown option" "$AIRLOCKD" keygen --data "$work/x" --force
cli_error "keygen --rotate=yes" 2 "takes no value" "$AIRLOCKD" keygen --data "$work/x" --rotate=yes
"$AIRLOCKD" --help | grep -q keygen || fail "--help lists keygen"
"$AIRLOCKD" --help | grep -q token || fail "--help lists token"
"$AIRLOCKD" token --help | grep -q -- "--ttl" || fail "token --help"
pass "--help lists the commands"

# --- runtime errors: exit 1 ----------------------------------------------------
cli_error "missing data dir" 1 "No such file or directory" \
  "$AIRLOCKD" token --data "$work/nope" --aud a --scope s
grep -q "airlockd keygen" "$work/err" || fail "missing key should hint at keygen"

cp -p "$work/d/signing-key.pem" "$work/saved.pem"
chmod 0640 "$work/d/signing-key.pem"
cli_error "group-readable key" 1 "group or others" "${T[@]}" --aud a --scope s
chmod 0644 "$work/d/signing-key.pem"
cli_error "world-readable key" 1 "mode 0644" "${T[@]}" --aud a --scope s
chmod 0600 "$work/d/signing-key.pem"

# An unreadable key (EACCES). Root reads anything, so as root the check
# runs airlockd as nobody against a root-owned 0600 key.
if [ "$(id -u)" -ne 0 ]; then
  chmod 0000 "$work/d/signing-key.pem"
  cli_error "unreadable key" 1 "Permission denied" "${T[@]}" --aud a --scope s
  chmod 0600 "$work/d/signing-key.pem"
elif command -v setpriv >/dev/null; then
  chmod 0711 "$work"
  mkdir -m 0755 "$work/unread"
  cp -p "$work/saved.pem" "$work/unread/signing-key.pem"
  cli_error "unreadable key (as nobody)" 1 "Permission denied" \
    setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$AIRLOCKD" token --data "$work/unread" --aud a --scope s
  chmod 0700 "$work"
else
  echo "skip - unreadable key: root without setpriv"
fi
# Unreadable for everyone, root included: a directory in place of the key.
mkdir -m 0700 "$work/dirkey"
mkdir -m 0700 "$work/dirkey/signing-key.pem"
cli_error "key is a directory" 1 "not a regular file" "$AIRLOCKD" token --data "$work/dirkey" --aud a --scope s

mkdir -m 0700 "$work/corrupt"
printf 'garbage\n' >"$work/corrupt/signing-key.pem"
chmod 0600 "$work/corrupt/signing-key.pem"
cli_error "corrupt key" 1 "not an unencrypted PEM private key" \
  "$AIRLOCKD" token --data "$work/corrupt" --aud a --scope s
head -c 60 "$work/saved.pem" >"$work/corrupt/signing-key.pem"
cli_error "truncated key" 1 "not an unencrypted PEM private key" \
  "$AIRLOCKD" token --data "$work/corrupt" --aud a --scope s
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/corrupt/signing-key.pem" 2>/dev/null
chmod 0600 "$work/corrupt/signing-key.pem"
cli_error "EC key" 1 "not an Ed25519 key" "$AIRLOCKD" token --data "$work/corrupt" --aud a --scope s

# A key that jwks.json does not publish: refuse to mint an unverifiable token.
mkdir -m 0700 "$work/nojwks"
cp -p "$work/saved.pem" "$work/nojwks/signing-key.pem"
cli_error "missing jwks.json" 1 "jwks.json" "$AIRLOCKD" token --data "$work/nojwks" --aud a --scope s
cp "$work/envdata/jwks.json" "$work/nojwks/jwks.json"
cli_error "jwks.json without the key" 1 "does not verify" "$AIRLOCKD" token --data "$work/nojwks" --aud a --scope s

cli_error "keygen parent missing" 1 "cannot create data directory" "$AIRLOCKD" keygen --data "$work/no/such"
touch "$work/afile"
cli_error "keygen on a file" 1 "not a directory" "$AIRLOCKD" keygen --data "$work/afile"

# --- rotation -------------------------------------------------------------------
kid1=$("$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:connect <<<"$tok" | sed 's/.* kid=\([^ ]*\).*/\1/')
"$AIRLOCKD" keygen --data "$work/d" --rotate >"$work/out" || fail "rotate failed"
grep -q "publishes 2 keys" "$work/out" || fail "rotate output: $(cat "$work/out")"
[ "$(mode "$work/d/signing-key.pem")" = 600 ] || fail "rotated key mode"
tok2=$("$AIRLOCKD" token --data "$work/d" --aud sb-1 --scope runner:connect)
out1=$("$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:connect <<<"$tok") || fail "old token after rotate: $out1"
out2=$("$TOKCHECK" "${J[@]}" --aud sb-1 --scope runner:connect <<<"$tok2") || fail "new token after rotate: $out2"
[[ $out1 == *"kid=$kid1 "* ]] || fail "old token kid: $out1"
[[ $out2 != *"kid=$kid1 "* ]] || fail "new token still uses the old kid: $out2"
pass "rotate: new current key, old public key kept, both tokens verify"

echo "keygen_cli: all checks passed"
