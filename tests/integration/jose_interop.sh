#!/usr/bin/env bash
# Interop of our tokens with an independent JOSE implementation (npm jose):
#  (a) a token minted by `airlockd token` verifies with jose's jwtVerify over
#      our jwks.json (createLocalJWKSet, audience, algorithms ['EdDSA']), and
#      jose computes the same RFC 7638 thumbprints as our kids;
#  (b) jose generates an Ed25519 key, writes a JWKS and signs a token with
#      kid; our tokcheck (shared verifier, al_common only) accepts it;
#  (c) a tampered token fails in both; jose-made HS256, alg none and
#      alg "Ed25519" tokens are refused by ours; after `keygen --rotate`
#      jose picks the right key by kid for old and new tokens.
# Env: AL_BIN (build dir with airlockd, tokcheck), AL_SRC (source dir).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
: "${AL_SRC:?AL_SRC must name the source directory}"
MJS="$AL_SRC/tests/interop/jose_interop.mjs"
AIRLOCKD="$AL_BIN/airlockd"
TOKCHECK="$AL_BIN/tokcheck"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

command -v node >/dev/null || fail "node is not installed (tools/deps.sh)"
[ -f "$AL_SRC/node_modules/jose/package.json" ] || fail "npm jose missing under $AL_SRC/node_modules (tools/deps.sh)"
[ -x "$AIRLOCKD" ] && [ -x "$TOKCHECK" ] || fail "missing $AIRLOCKD or $TOKCHECK"

work=$(mktemp -d "${TMPDIR:-/tmp}/al-jose.XXXXXX")
trap 'rm -rf "$work"' EXIT
jose() { node "$MJS" "$@"; }

# expect_reject WHAT EXPECTED_SUBSTRING COMMAND...: must exit 1 and print it.
expect_reject() {
  local what=$1 want=$2 out rc=0
  shift 2
  out=$("$@" 2>&1) || rc=$?
  [ "$rc" -eq 1 ] || fail "$what: expected exit 1, got $rc: $out"
  [[ $out == *"$want"* ]] || fail "$what: expected '$want' in: $out"
  pass "$what ($out)"
}

# --- (a) airlockd mints, jose verifies ----------------------------------
data="$work/data"
"$AIRLOCKD" keygen --data "$data" >/dev/null
tok=$("$AIRLOCKD" token --data "$data" --aud sb-1 --scope "runner:connect terminal:read" --sub alice)
out=$(jose verify "$data/jwks.json" sb-1 "$tok") || fail "jose refused an airlockd token: $out"
[[ $out == "ok sub=alice scope=runner:connect terminal:read kid="* ]] || fail "jose payload: $out"
[[ $out == *" typ=JWT iss=airlockd jti="* ]] || fail "jose header/claims: $out"
pass "jose verifies airlockd token ($out)"

expect_reject "jose refuses wrong audience" "ERR_JWT_CLAIM_VALIDATION_FAILED" \
  jose verify "$data/jwks.json" sb-2 "$tok"

while read -r kid thumb; do
  [ "$kid" = "$thumb" ] || fail "kid $kid is not the RFC 7638 thumbprint $thumb"
done < <(jose thumbprints "$data/jwks.json")
pass "kid equals jose's RFC 7638 thumbprint"

out=$("$TOKCHECK" --jwks "$data/jwks.json" --aud sb-1 --scope terminal:read <<<"$tok") ||
  fail "our verifier refused our token: $out"
pass "tokcheck verifies airlockd token"

# --- (b) jose mints, we verify -------------------------------------------
jd="$work/jose"
jose mint "$jd" sb-7 "runner:connect" >"$work/jose-token"
jtok=$(cat "$work/jose-token")
jkid=$(jose thumbprints "$jd/jwks.json" | cut -d' ' -f1)
out=$("$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-7 --scope runner:connect <<<"$jtok") ||
  fail "tokcheck refused a jose token: $out"
[[ $out == "ok sub=jose-user iss=jose-test jti="*" kid=$jkid scope=runner:connect "* ]] ||
  fail "tokcheck output: $out"
pass "tokcheck verifies jose token ($out)"
expect_reject "ours refuses jose token for another sandbox" "wrong audience" \
  "$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-8 --scope runner:connect <<<"$jtok"
expect_reject "ours refuses jose token for another scope" "scope does not cover" \
  "$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-7 --scope terminal:write <<<"$jtok"
expect_reject "ours refuses jose token with airlockd keys" "unknown key id" \
  "$TOKCHECK" --jwks "$data/jwks.json" --aud sb-7 --scope runner:connect <<<"$jtok"

# --- (c) tampering and algorithms -----------------------------------------
bad=$(jose tamper "$tok")
[ "$bad" != "$tok" ] || fail "tamper changed nothing"
expect_reject "jose refuses tampered airlockd token" "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" \
  jose verify "$data/jwks.json" sb-1 "$bad"
expect_reject "ours refuses tampered airlockd token" "bad signature" \
  "$TOKCHECK" --jwks "$data/jwks.json" --aud sb-1 --scope runner:connect <<<"$bad"
jbad=$(jose tamper "$jtok")
expect_reject "jose refuses tampered jose token" "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" \
  jose verify "$jd/jwks.json" sb-7 "$jbad"
expect_reject "ours refuses tampered jose token" "bad signature" \
  "$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-7 --scope runner:connect <<<"$jbad"

hs=$(jose hs256 sb-7 runner:connect "$jkid")
expect_reject "ours refuses jose HS256 token" "algorithm not accepted" \
  "$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-7 --scope runner:connect <<<"$hs"
nt=$(jose none sb-7 runner:connect)
expect_reject "ours refuses jose alg none token" "algorithm not accepted" \
  "$TOKCHECK" --jwks "$jd/jwks.json" --aud sb-7 --scope runner:connect <<<"$nt"
ed="$work/jose-ed"
jose mint "$ed" sb-7 runner:connect Ed25519 >"$work/ed-token"
expect_reject "ours refuses jose alg Ed25519 (only EdDSA)" "algorithm not accepted" \
  "$TOKCHECK" --jwks "$ed/jwks.json" --aud sb-7 --scope runner:connect <"$work/ed-token"

# --- rotation: jose selects by kid among several keys ---------------------
"$AIRLOCKD" keygen --data "$data" --rotate >/dev/null
tok2=$("$AIRLOCKD" token --data "$data" --aud sb-1 --scope runner:connect --sub bob)
[ "$(jose thumbprints "$data/jwks.json" | wc -l)" -eq 2 ] || fail "rotated jwks.json should list 2 keys"
out=$(jose verify "$data/jwks.json" sb-1 "$tok") || fail "jose refused the pre-rotation token: $out"
out=$(jose verify "$data/jwks.json" sb-1 "$tok2") || fail "jose refused the post-rotation token: $out"
[[ $out == "ok sub=bob "* ]] || fail "jose payload after rotation: $out"
"$TOKCHECK" --jwks "$data/jwks.json" --aud sb-1 --scope runner:connect <<<"$tok" >/dev/null ||
  fail "tokcheck refused the pre-rotation token"
pass "after rotation both tokens verify in jose and ours"

echo "jose_interop: all checks passed"
