#!/usr/bin/env bash
# The trust boundary, checked on the binaries: the sandbox side
# (airlock-runner, al_common and al_runner which it links) holds no signing
# code.
# Neither defines nor references our signing functions (keys_*, tok_sign_*)
# or OpenSSL's signing, key generation and private-key PEM functions; the
# runner does not link SQLite, PostgreSQL or curl. Positive control: the
# control-plane library does contain them, so this test can fail.
# Env: AL_BIN (build dir with airlock-runner, libal_common.a, libal_control.a,
# and libal_runner.a when the runner has library modules).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

RUNNER="$AL_BIN/airlock-runner"
COMMON="$AL_BIN/libal_common.a"
CONTROL="$AL_BIN/libal_control.a"
for f in "$RUNNER" "$COMMON" "$CONTROL"; do [ -f "$f" ] || fail "missing $f"; done
command -v nm >/dev/null || fail "nm not installed"

# Symbol names (version suffix such as @OPENSSL_3.0.0 stripped), defined or not.
SIGNING='^(keys_[a-z_]+|tok_sign_[a-z_]+|EVP_DigestSign[A-Za-z_]*|EVP_PKEY_keygen[A-Za-z_]*|EVP_PKEY_Q_keygen|EVP_PKEY_new_raw_private_key[A-Za-z_]*|EVP_PKEY_get_raw_private_key|PEM_read[A-Za-z_]*PrivateKey|PEM_write[A-Za-z_]*PrivateKey|PEM_write[A-Za-z_]*PKCS8PrivateKey[A-Za-z_]*|i2d_PrivateKey[A-Za-z_]*|d2i_PrivateKey[A-Za-z_]*|d2i_AutoPrivateKey[A-Za-z_]*|ED25519_sign)$'

symbols() { nm "$@" 2>/dev/null | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' | sort -u; }

# al_runner (sandbox-only library) exists once src/runner has modules.
RUNNER_LIB="$AL_BIN/libal_runner.a"
SANDBOX=("$COMMON" "$RUNNER")
[ -f "$RUNNER_LIB" ] && SANDBOX+=("$RUNNER_LIB")

for obj in "${SANDBOX[@]}"; do
  syms=$(symbols "$obj")
  [ -n "$syms" ] || fail "nm found no symbols in $obj (stripped?)"
  if found=$(grep -E "$SIGNING" <<<"$syms"); then
    fail "$obj references signing code: $(tr '\n' ' ' <<<"$found")"
  fi
  pass "$(basename "$obj"): no signing symbol ($(wc -l <<<"$syms") symbols checked)"
done
# The dynamic symbol table too (what the runner imports at run time).
if dyn=$(nm -D "$RUNNER" 2>/dev/null | awk '{ print $NF }' | sed 's/@.*//' | grep -E "$SIGNING"); then
  fail "airlock-runner imports signing code: $dyn"
fi
pass "airlock-runner: no signing symbol in the dynamic table"

# Positive control: the pattern does find the signing code where it lives.
csyms=$(symbols "$CONTROL")
for want in tok_sign_mint keys_load_private keys_generate EVP_DigestSign EVP_PKEY_Q_keygen PEM_write_bio_PrivateKey; do
  grep -qx "$want" <<<"$csyms" || fail "positive control: $want not found in libal_control.a"
  grep -qE "$SIGNING" <<<"$want" || fail "positive control: pattern misses $want"
done
pass "libal_control.a: signing symbols present (the check can fail)"
# ...and al_common does hold the verifier the runner needs.
grep -qx tok_verify <<<"$(symbols "$COMMON")" || fail "libal_common.a lacks tok_verify"
grep -qx EVP_DigestVerify <<<"$(symbols "$COMMON")" || fail "libal_common.a lacks EVP_DigestVerify"
pass "libal_common.a: verification present"

# Shared libraries: no database or HTTP client on the sandbox side.
libs=$(ldd "$RUNNER") || fail "ldd $RUNNER failed"
if grep -Ei 'libsqlite3|libpq\.|libcurl' <<<"$libs"; then
  fail "airlock-runner links a control-plane library"
fi
pass "airlock-runner: no libsqlite3, libpq, libcurl"

echo "boundary: all checks passed"
