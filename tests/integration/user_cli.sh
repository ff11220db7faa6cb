#!/usr/bin/env bash
# airlockd user add / ls / rm from the command line: the API key is printed
# once and only its SHA-256 reaches the database file (0600, in a 0700 data
# directory); a name is added once; every bad input is one clear error line
# with exit 2 (usage) or 1 (runtime), never a crash; ls and rm never create
# a database; a database from a newer airlockd or readable by others is
# refused.
# Env: AL_BIN (build dir with airlockd), AL_SRC (source dir).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
: "${AL_SRC:?AL_SRC must name the source directory}"
AIRLOCKD="$AL_BIN/airlockd"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

[ -x "$AIRLOCKD" ] || fail "missing $AIRLOCKD"
work=$(mktemp -d "${TMPDIR:-/tmp}/al-user.XXXXXX")
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

mode() { stat -c '%a' "$1"; }
# in_file FILE STRING: whether FILE's bytes contain STRING.
in_file() { [ -f "$1" ] && grep -qaF -- "$2" "$1"; }

D="$work/d"
DB="$D/airlock.db"

# --- add: the key, once, and only its hash in the file -------------------------
"$AIRLOCKD" user add alice --role admin --data "$D" >"$work/out" 2>"$work/err" || fail "add alice: $(cat "$work/err")"
[ ! -s "$work/err" ] || fail "add alice wrote to stderr: $(cat "$work/err")"
[ "$(wc -l <"$work/out")" -eq 1 ] || fail "add alice: expected one line: $(cat "$work/out")"
key=$(cat "$work/out")
[[ $key =~ ^alk_[A-Za-z0-9_-]{43}$ ]] || fail "key format: $key"
[ "$(mode "$D")" = 700 ] || fail "data dir mode $(mode "$D")"
[ "$(mode "$DB")" = 600 ] || fail "database mode $(mode "$DB")"
[ ! -e "$DB-wal" ] || fail "WAL left behind after the command ended"
pass "add prints one key ($key), data dir 0700, database 0600"

hash=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
for f in "$DB" "$DB-wal" "$DB-shm"; do
  if in_file "$f" "$key"; then fail "the API key is in $f in clear"; fi
  if in_file "$f" "${key#alk_}"; then fail "the key's random part is in $f"; fi
  if in_file "$f" "${key:4:16}"; then fail "part of the key is in $f"; fi
done
in_file "$DB" "$hash" || fail "the key's SHA-256 is not in the database"
pass "the key is not in the database file; its SHA-256 is"

# --- a second add of the same name fails, and changes nothing ------------------
sum=$(sha256sum <"$DB")
cli_error "second add of alice" 1 "user alice already exists" \
  "$AIRLOCKD" user add alice --role viewer --data "$D"
[ "$sum" = "$(sha256sum <"$DB")" ] || fail "the failed add changed the database"

# --- more users, ls, rm ---------------------------------------------------------
key_bob=$("$AIRLOCKD" user add bob --role viewer --data "$D")
key_carol=$("$AIRLOCKD" user add --data="$D" --role=operator carol.x-1_y)
[ "$key_bob" != "$key" ] && [ "$key_bob" != "$key_carol" ] || fail "keys repeat"
for k in "$key_bob" "$key_carol"; do
  if in_file "$DB" "$k"; then fail "a key is in the database in clear"; fi
done
"$AIRLOCKD" user ls --data "$D" >"$work/ls" || fail "ls failed"
[ "$(wc -l <"$work/ls")" -eq 3 ] || fail "ls: $(cat "$work/ls")"
[ "$(awk '{print $1 ":" $2}' "$work/ls" | tr '\n' ' ')" = "alice:admin bob:viewer carol.x-1_y:operator " ] ||
  fail "ls: $(cat "$work/ls")"
grep -qE '^alice +admin +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$' "$work/ls" ||
  fail "ls line format: $(cat "$work/ls")"
if grep -q alk_ "$work/ls"; then fail "ls shows a key"; fi
pass "ls lists name, role, creation time; no key"

[ "$("$AIRLOCKD" user rm bob --data "$D")" = "removed user bob" ] || fail "rm bob"
"$AIRLOCKD" user ls --data "$D" | grep -q '^bob ' && fail "bob still listed"
cli_error "rm bob again" 1 "no user named bob" "$AIRLOCKD" user rm bob --data "$D"
key_bob2=$("$AIRLOCKD" user add bob --role admin --data "$D") || fail "re-add bob"
[ "$key_bob2" != "$key_bob" ] || fail "re-added bob got the old key"
pass "rm removes; the name can be added again with a new key"

# --- $AIRLOCK_DATA and ./airlock-data ---------------------------------------------
AIRLOCK_DATA="$work/envdata" "$AIRLOCKD" user add dana --role viewer >/dev/null || fail "add with AIRLOCK_DATA"
[ -f "$work/envdata/airlock.db" ] || fail "AIRLOCK_DATA not honoured"
AIRLOCK_DATA="$work/envdata" "$AIRLOCKD" user ls | grep -q '^dana ' || fail "ls with AIRLOCK_DATA"
env -u AIRLOCK_DATA "$AIRLOCKD" user add erin --role operator >/dev/null || fail "add with the default dir"
[ -f "$work/airlock-data/airlock.db" ] || fail "./airlock-data default not honoured"
pass "--data, \$AIRLOCK_DATA, ./airlock-data"

# --- usage errors: exit 2 ---------------------------------------------------------
A=("$AIRLOCKD" user add)
cli_error "user without action" 2 "missing action" "$AIRLOCKD" user
cli_error "unknown action" 2 "unknown action 'list'" "$AIRLOCKD" user list
cli_error "add without name" 2 "NAME is required" "${A[@]}" --role admin --data "$D"
cli_error "add without role" 2 "--role is required" "${A[@]}" frank --data "$D"
cli_error "bad role" 2 "--role must be one of" "${A[@]}" frank --role root --data "$D"
cli_error "role in capitals" 2 "--role must be one of" "${A[@]}" frank --role Admin --data "$D"
cli_error "role without value" 2 "--role needs a value" "${A[@]}" frank --data "$D" --role
cli_error "name in capitals" 2 "NAME must be" "${A[@]}" Frank --role admin --data "$D"
cli_error "name with a space" 2 "NAME must be" "${A[@]}" "fr ank" --role admin --data "$D"
cli_error "name with a slash" 2 "NAME must be" "${A[@]}" "../x" --role admin --data "$D"
cli_error "name starting with a dot" 2 "NAME must be" "${A[@]}" .frank --role admin --data "$D"
cli_error "empty name" 2 "NAME must be" "${A[@]}" "" --role admin --data "$D"
cli_error "name of 65 characters" 2 "NAME must be" "${A[@]}" "$(printf 'a%.0s' {1..65})" --role admin --data "$D"
cli_error "name like a flag" 2 "unknown option '-rf'" "${A[@]}" -rf --role admin --data "$D"
cli_error "two names" 2 "unknown argument 'g'" "${A[@]}" f g --role admin --data "$D"
cli_error "unknown flag" 2 "unknown option '--force'" "${A[@]}" frank --role admin --force
cli_error "role twice" 2 "given twice" "${A[@]}" frank --role admin --role viewer --data "$D"
cli_error "ls with an argument" 2 "unknown argument 'alice'" "$AIRLOCKD" user ls alice --data "$D"
cli_error "rm without name" 2 "NAME is required" "$AIRLOCKD" user rm --data "$D"
cli_error "rm bad name" 2 "NAME must be" "$AIRLOCKD" user rm 'a;b' --data "$D"
long=$(printf 'd%.0s' {1..5000})
cli_error "data path too long" 2 "--data path too long" "${A[@]}" frank --role admin --data "$long"
"${A[@]}" "$(printf 'a%.0s' {1..64})" --role viewer --data "$D" >/dev/null || fail "64-character name"
"$AIRLOCKD" user --help | grep -q "user rm NAME" || fail "user --help"
"$AIRLOCKD" user add --help | grep -q -- "--role admin|operator|viewer" || fail "user add --help"
"$AIRLOCKD" --help | grep -q "user" || fail "--help lists user"
pass "--help lists user and its actions"

# --- runtime errors: exit 1 ---------------------------------------------------------
cli_error "ls without a database" 1 "No such file or directory" "$AIRLOCKD" user ls --data "$work/none"
cli_error "rm without a database" 1 "No such file or directory" "$AIRLOCKD" user rm alice --data "$work/none"
[ ! -e "$work/none" ] || fail "ls or rm created a data directory"
cli_error "add, parent missing" 1 "cannot create data directory" "${A[@]}" frank --role admin --data "$work/no/such"
touch "$work/afile"
cli_error "add, data is a file" 1 "Not a directory" "${A[@]}" frank --role admin --data "$work/afile"

chmod 0644 "$DB"
cli_error "world-readable database" 1 "mode 0644" "$AIRLOCKD" user ls --data "$D"
chmod 0600 "$DB"

mkdir -m 0700 "$work/junk"
printf 'not a database at all, only some text.......................................\n%.0s' {1..20} >"$work/junk/airlock.db"
chmod 0600 "$work/junk/airlock.db"
cli_error "not a database" 1 "not an SQLite database" "$AIRLOCKD" user ls --data "$work/junk"

if command -v sqlite3 >/dev/null; then
  mkdir -m 0700 "$work/future"
  "$AIRLOCKD" user add zed --role admin --data "$work/future" >/dev/null
  sqlite3 "$work/future/airlock.db" 'PRAGMA user_version = 999' >/dev/null
  cli_error "schema from the future" 1 "newer than this airlockd knows" \
    "$AIRLOCKD" user ls --data "$work/future"
  cli_error "schema from the future (add)" 1 "newer than this airlockd knows" \
    "${A[@]}" frank --role admin --data "$work/future"
  # What is stored: the hash, the role, nothing else about the key.
  row=$(sqlite3 "$D/airlock.db" "SELECT name, role, key_sha256 FROM users WHERE name = 'alice'")
  [ "$row" = "alice|admin|$hash" ] || fail "stored row: $row"
  pass "the users row holds the SHA-256 of the key"
else
  echo "skip - schema from the future: no sqlite3 command"
fi

echo "user_cli: all checks passed"
