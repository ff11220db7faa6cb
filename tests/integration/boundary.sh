#!/usr/bin/env bash
# The trust boundary, checked on the binaries: the sandbox side
# (airlock-runner, al_common and al_runner which it links) and the airlock
# CLI (al_common and al_ws) hold no signing code and nothing of the control
# plane.
# Neither defines nor references our signing functions (keys_*, tok_sign_*)
# or OpenSSL's signing, key generation and private-key PEM functions, nor
# any function or object that libal_control.a defines; neither links
# SQLite, PostgreSQL or curl; no file of src/control is compiled into
# them, and src/control is not on their include path (compile_commands.json).
# The proxy's forwarder (airlock-proxy-fwd, run inside agents' jails) links
# libuv and libc only and none of the runner's or control plane's code.
# Positive controls: the control-plane library and airlockd do contain them,
# so these checks can fail.
# Env: AL_BIN (build dir with airlock-runner, airlock, airlockd,
# libal_common.a, libal_control.a, compile_commands.json, and
# libal_runner.a when the runner has library modules).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

RUNNER="$AL_BIN/airlock-runner"
CLI="$AL_BIN/airlock"
DAEMON="$AL_BIN/airlockd"
COMMON="$AL_BIN/libal_common.a"
CONTROL="$AL_BIN/libal_control.a"
CCDB="$AL_BIN/compile_commands.json"
for f in "$RUNNER" "$CLI" "$DAEMON" "$COMMON" "$CONTROL" "$CCDB"; do [ -f "$f" ] || fail "missing $f"; done
command -v nm >/dev/null || fail "nm not installed"
command -v node >/dev/null || fail "node not installed"

# Symbol names (version suffix such as @OPENSSL_3.0.0 stripped), defined or not.
SIGNING='^(keys_[a-z_]+|tok_sign_[a-z_]+|EVP_DigestSign[A-Za-z_]*|EVP_PKEY_keygen[A-Za-z_]*|EVP_PKEY_Q_keygen|EVP_PKEY_new_raw_private_key[A-Za-z_]*|EVP_PKEY_get_raw_private_key|PEM_read[A-Za-z_]*PrivateKey|PEM_write[A-Za-z_]*PrivateKey|PEM_write[A-Za-z_]*PKCS8PrivateKey[A-Za-z_]*|i2d_PrivateKey[A-Za-z_]*|d2i_PrivateKey[A-Za-z_]*|d2i_AutoPrivateKey[A-Za-z_]*|ED25519_sign)$'

symbols() { nm "$@" 2>/dev/null | awk 'NF >= 2 { print $NF }' | sed 's/@.*//' | sort -u; }

# al_runner (sandbox-only library) exists once src/runner has modules.
RUNNER_LIB="$AL_BIN/libal_runner.a"
SANDBOX=("$COMMON" "$RUNNER")
[ -f "$RUNNER_LIB" ] && SANDBOX+=("$RUNNER_LIB")

for obj in "${SANDBOX[@]}" "$CLI"; do
  syms=$(symbols "$obj")
  [ -n "$syms" ] || fail "nm found no symbols in $obj (stripped?)"
  if found=$(grep -E "$SIGNING" <<<"$syms"); then
    fail "$obj references signing code: $(tr '\n' ' ' <<<"$found")"
  fi
  pass "$(basename "$obj"): no signing symbol ($(wc -l <<<"$syms") symbols checked)"
done
# The dynamic symbol tables too (what they import at run time).
for bin in "$RUNNER" "$CLI"; do
  if dyn=$(nm -D "$bin" 2>/dev/null | awk '{ print $NF }' | sed 's/@.*//' | grep -E "$SIGNING"); then
    fail "$(basename "$bin") imports signing code: $dyn"
  fi
  pass "$(basename "$bin"): no signing symbol in the dynamic table"
done

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

# Nothing of the control plane: no function or object libal_control.a
# defines (our own names, lower case) is defined or referenced there.
ctl_defs=$(nm --defined-only -g "$CONTROL" 2>/dev/null | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
             grep -E '^[a-z][a-z0-9_]*$' | sort -u)
[ -n "$ctl_defs" ] || fail "nm found no definitions in $CONTROL"
for bin in "$COMMON" "$RUNNER" "$CLI"; do
  found=$(comm -12 <(symbols "$bin") <(printf '%s\n' "$ctl_defs"))
  [ -z "$found" ] || fail "$(basename "$bin") holds control-plane code: $(tr '\n' ' ' <<<"$found")"
  pass "$(basename "$bin"): none of the $(wc -l <<<"$ctl_defs") symbols of libal_control.a"
done
# Positive control: airlockd, which links al_control, is caught by the same
# check; and the CLI does hold the shared asciicast reader it replays with.
dsyms=$(comm -12 <(symbols "$DAEMON") <(printf '%s\n' "$ctl_defs"))
for want in cast_open relay_new tok_sign_mint; do
  grep -qx "$want" <<<"$dsyms" || fail "positive control: $want of libal_control.a not found in airlockd"
done
grep -qx castread_next <<<"$(symbols "$CLI")" || fail "airlock lacks castread_next"
pass "airlockd: control-plane symbols found (the check can fail); airlock: the shared reader present"

# What is compiled into them, and with which include path: no file of
# src/control, no -I of src/control (CMake's object paths name the target).
ccout=$(node -e '
  const fs = require("fs");
  const db = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const targets = ["al_common", "al_ws", "al_runner", "airlock-runner", "al_cli", "airlock"];
  const seen = {};
  for (const e of db) {
    const cmd = e.command || (e.arguments || []).join(" ");
    const m = / -o CMakeFiles\/([^ /]+)\.dir\//.exec(cmd);
    if (!m || !targets.includes(m[1])) continue;
    seen[m[1]] = (seen[m[1]] || 0) + 1;
    if (/\/src\/control\//.test(e.file)) console.log("BAD " + m[1] + " compiles " + e.file);
    if (/(-I\s*|-isystem\s+)\S*\/src\/control(\/)?(\s|$)/.test(cmd))
      console.log("BAD " + m[1] + " has src/control on its include path (" + e.file + ")");
  }
  for (const t of ["al_common", "al_cli", "airlock"]) if (!seen[t]) console.log("BAD no compile command for " + t);
  console.log("SEEN " + Object.keys(seen).map((t) => t + ":" + seen[t]).join(" "));
' "$CCDB") || fail "reading $CCDB failed"
if grep '^BAD ' <<<"$ccout"; then fail "compile_commands.json: control-plane code compiled in (above)"; fi
pass "compile_commands.json: no src/control file or include path in $(sed -n 's/^SEEN //p' <<<"$ccout")"

# Shared libraries: no database or HTTP client on the sandbox side or in the CLI.
for bin in "$RUNNER" "$CLI"; do
  libs=$(ldd "$bin") || fail "ldd $bin failed"
  if grep -Ei 'libsqlite3|libpq\.|libcurl' <<<"$libs"; then
    fail "$(basename "$bin") links a control-plane library"
  fi
  pass "$(basename "$bin"): no libsqlite3, libpq, libcurl"
done

# The proxy's forwarder runs inside agents' jails (src/fwd): it links
# libuv and the C library only (no HTTP, TLS, WebSocket or JSON library),
# and holds none of the runner's code, nor the control plane's.
FWD="$AL_BIN/airlock-proxy-fwd"
[ -f "$FWD" ] || fail "missing $FWD"
# (the sanitizers' runtimes, in a sanitized build, are not the program's)
libs=$(ldd "$FWD" | awk '{ print $1 }' | sed 's/\.so.*//' |
  grep -v -E '^(linux-vdso|/lib64/ld-linux.*|/lib/ld-linux.*|libasan|libubsan|libgcc_s|libm|libstdc\+\+)$' |
  sort -u | tr '\n' ' ')
[ "$libs" = "libc libuv " ] || fail "airlock-proxy-fwd links more than libuv and libc: $libs"
pass "airlock-proxy-fwd: links libuv and libc only"
rt_defs=$(nm --defined-only -g "$RUNNER_LIB" 2>/dev/null | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
            grep -E '^[a-z][a-z0-9_]*$' | grep -v -E '^(al_|fwd_)' | sort -u)
found=$(comm -12 <(symbols "$FWD") <(printf '%s\n%s\n' "$rt_defs" "$ctl_defs" | sort -u))
[ -z "$found" ] || fail "airlock-proxy-fwd holds runner or control-plane code: $(tr '\n' ' ' <<<"$found")"
grep -qx fwd_new <<<"$(symbols "$FWD")" || fail "airlock-proxy-fwd lacks fwd_new (stripped?)"
pass "airlock-proxy-fwd: none of the runner's or the control plane's symbols"

echo "boundary: all checks passed"
