#!/usr/bin/env bash
# The Debian packages, end to end on this machine: dpkg-buildpackage builds
# airlockd, airlock-runner and airlock from a copy of the tree; lintian
# finds nothing its overrides do not justify; apt installs them (the
# system user airlock, /var/lib/airlock 0700, the config 0640
# root:airlock); systemd-analyze verify accepts the unit; airlockd starts
# the way the unit says (its User and Group, its UMask, its Environment, its
# ExecStart, its empty capability bounding set and NoNewPrivileges; these
# machines do not boot systemd, so setpriv plays it) and
# the installed CLI opens a terminal in a local sandbox, whose agent cannot
# read the signing key; --version agrees across the three programs and the
# API (Server header, /healthz, /metrics, airlock probe); purging removes
# every file, the data directory and the user.
# Needs root (apt); exits 77 (skipped) otherwise. Refuses to run where the
# packages or the user airlock already exist: it would remove them.
# Env: AL_BIN (the build directory), AL_SRC (the source tree).
set -euo pipefail

: "${AL_SRC:?AL_SRC must name the source tree}"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "skip: needs root to install packages"
    exit 77
fi
for p in airlockd airlock-runner airlock; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q installed; then
        fail "the package $p is installed already: this test would remove it"
    fi
done
! getent passwd airlock >/dev/null || fail "a user airlock exists already: this test would remove it"

work=$(mktemp -d /tmp/airlock-package.XXXXXX)
pid=
installed=0
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    if [ "$installed" = 1 ] && getent passwd airlock >/dev/null; then
        for p in $(pgrep -u "$(id -u airlock)"); do kill -KILL "$p" 2>/dev/null || true; done
    fi
    if [ "$installed" = 1 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y airlockd airlock-runner airlock >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- build, from a copy of the tree (dpkg-buildpackage writes to ..) --------
src=$work/src
mkdir "$src"
git -C "$AL_SRC" ls-files -z --cached --others --exclude-standard |
    grep -zv '^node_modules' | (cd "$AL_SRC" && xargs -0 cp --parents -t "$src")
ln -s "$(cd "$AL_SRC" && pwd -P)/node_modules" "$src/node_modules"
t0=$(date +%s)
# at nice 10: the tests running beside it get the CPU first
(cd "$src" && DEB_BUILD_OPTIONS="parallel=2 nocheck" nice -n 10 dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1 ||
    fail "dpkg-buildpackage: $(tail -30 "$work/build.log")"
version=$(cd "$src" && dpkg-parsechangelog -S Version)
for p in airlockd airlock-runner airlock; do
    [ -f "$work/${p}_${version}_amd64.deb" ] || [ -n "$(ls "$work/${p}_${version}"_*.deb 2>/dev/null)" ] ||
        fail "no package $p: $(ls "$work")"
done
pass "dpkg-buildpackage -us -uc -b: airlockd, airlock-runner, airlock $version ($(($(date +%s) - t0)) s)"

# ---- lintian: nothing its overrides do not justify --------------------------
lintian --tag-display-limit 0 --fail-on error,warning "$work"/airlock_"${version}"_*.changes \
    >"$work/lintian.log" 2>&1 || fail "lintian: $(grep -E '^[EW]:' "$work/lintian.log" | head -20)"
! grep -qE '^[EW]:' "$work/lintian.log" || fail "lintian: $(grep -E '^[EW]:' "$work/lintian.log" | head -20)"
pass "lintian: no error or warning ($(grep -c '^[IN]:' "$work/lintian.log" || true) informational tags)"

# ---- install ------------------------------------------------------------------
debs=()
for p in airlockd airlock-runner airlock; do debs+=("$(ls "$work/${p}_${version}"_*.deb)"); done
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -o DPkg::Lock::Timeout=120 --no-install-recommends "${debs[@]}" >"$work/apt.log" 2>&1 ||
    fail "apt install: $(tail -20 "$work/apt.log")"
getent passwd airlock | grep -q ':/var/lib/airlock:/usr/sbin/nologin$' || fail "user airlock: $(getent passwd airlock)"
[ "$(id -u airlock)" -lt 1000 ] || fail "airlock is not a system user"
[ "$(stat -c '%a %U %G' /var/lib/airlock)" = "700 airlock airlock" ] ||
    fail "/var/lib/airlock: $(stat -c '%a %U %G' /var/lib/airlock)"
[ "$(stat -c '%a %U %G' /etc/airlock/airlockd.conf)" = "640 root airlock" ] ||
    fail "/etc/airlock/airlockd.conf: $(stat -c '%a %U %G' /etc/airlock/airlockd.conf)"
pass "installed: system user airlock, /var/lib/airlock 0700, the config 0640 root:airlock"

unit=/usr/lib/systemd/system/airlockd.service
[ -f "$unit" ] || fail "no $unit"
systemd-analyze verify "$unit" >"$work/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$work/verify.log")"
[ ! -s "$work/verify.log" ] || fail "systemd-analyze verify says: $(cat "$work/verify.log")"
for want in User=airlock NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/var/lib/airlock \
    CapabilityBoundingSet= 'SystemCallFilter=@system-service'; do
    grep -q "^$want" "$unit" || fail "the unit lacks $want"
done
pass "systemd-analyze verify accepts the unit; it is hardened (own user, strict, no capability, a syscall filter)"

# ---- versions -----------------------------------------------------------------
for p in airlockd airlock-runner airlock; do
    got=$("$p" --version)
    [ "$got" = "$p $version" ] || fail "$p --version: '$got', want '$p $version'"
done
pass "--version: airlockd, airlock-runner and airlock all say $version"

# ---- start airlockd as the unit says ----------------------------------------------
prop() { sed -n "s/^$1=//p" "$unit" | tail -1; }
user=$(prop User)
group=$(prop Group)
umask_v=$(prop UMask)
read -r -a exec_start <<<"$(prop ExecStart)"
envs=()
while read -r e; do [ -n "$e" ] && envs+=("$e"); done < <(sed -n 's/^Environment=//p' "$unit")
[ "$user" = airlock ] && [ "$group" = airlock ] || fail "the unit's User/Group: $user/$group"
[ "${exec_start[0]}" = /usr/sbin/airlockd ] || fail "the unit's ExecStart: ${exec_start[*]}"

# the first person, as the docs say
key=$(runuser -u airlock -- airlockd user add ada --role admin --data /var/lib/airlock 2>"$work/user.err" | tail -1)
[[ $key == alk_* ]] || fail "airlockd user add: '$key' $(cat "$work/user.err")"

# --listen on a free port: a flag wins over the config file's 7700, which
# another program on this machine may hold; nothing else differs from
# ExecStart
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(
    umask "$umask_v"
    cd /
    # CapabilityBoundingSet= (empty), NoNewPrivileges=yes: as systemd would
    exec setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs --inh-caps=-all \
        --bounding-set=-all \
        env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${envs[@]}" \
        "${exec_start[@]}" --listen "127.0.0.1:$port"
) >"$work/airlockd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || fail "airlockd exited: $(cat "$work/airlockd.log")"
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || fail "airlockd does not answer: $(cat "$work/airlockd.log")"
[ "$(ps -o user= -p "$pid")" = airlock ] || fail "airlockd runs as $(ps -o user= -p "$pid")"
grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$pid/status" || fail "airlockd may gain privileges"
grep -q '^CapEff:[[:space:]]*0000000000000000' "/proc/$pid/status" || fail "airlockd has capabilities"
grep -q '^CapBnd:[[:space:]]*0000000000000000' "/proc/$pid/status" || fail "airlockd's bounding set is not empty"
head -1 "$work/airlockd.log" | python3 -c 'import json,sys; json.loads(sys.stdin.readline())' ||
    fail "the config's log-format json is not in force: $(head -1 "$work/airlockd.log")"
pass "airlockd runs as the unit says: user airlock, no new privileges, no capability, JSON logs"

# ---- the API's versions -------------------------------------------------------------
hdr=$(curl -fsS -D - -o "$work/healthz" "http://127.0.0.1:$port/healthz")
grep -qi "^server: airlockd/$version"$'\r'"\?$" <<<"$hdr" || fail "Server header: $(grep -i '^server' <<<"$hdr")"
[ "$(cat "$work/healthz")" = "ok airlockd $version" ] || fail "/healthz: $(cat "$work/healthz")"
curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$port/metrics" |
    grep -qx "airlock_build_info{version=\"$version\"} 1" || fail "/metrics has no airlock_build_info for $version"
export AIRLOCK_URL="http://127.0.0.1:$port" AIRLOCK_API_KEY="$key"
probe=$(airlock probe) || fail "airlock probe: $probe"
grep -q "^client *airlock $version$" <<<"$probe" && grep -q "(server: airlockd/$version)" <<<"$probe" ||
    fail "airlock probe's versions: $probe"
pass "the API says $version too: Server header, /healthz, /metrics, airlock probe (both sides)"

# ---- a terminal through the installed CLI, in a local sandbox -----------------------
airlock sandbox add box --kind local >/dev/null || fail "airlock sandbox add"
out=
for _ in $(seq 50); do
    out=$(timeout 20 airlock run box --pipe -- sh -c 'echo "hello from $(hostname)"' 2>&1) && break
    sleep 0.2
done
grep -q '^hello from box$' <<<"$out" || fail "airlock run in the local sandbox: $out; log: $(tail -20 "$work/airlockd.log")"
pass "the installed CLI opens a terminal in a local sandbox started by the installed airlockd"

# the agent tries to read the signing key and the database
out=$(timeout 20 airlock run box --pipe -- sh -c 'exec 2>&1; cat /var/lib/airlock/signing-key.pem; ls /var/lib/airlock; echo done' 2>&1) || true
grep -q 'PRIVATE KEY' <<<"$out" && fail "an agent read the signing key"
grep -q 'airlock.db' <<<"$out" && fail "an agent sees the data directory"
grep -q '^done$' <<<"$out" || fail "the agent's command did not run: $out"
pass "an agent in the sandbox can read neither the signing key nor the data directory"

# nothing of the service runs as root: airlockd, its signer and the local
# runner are all the user airlock's
uid=$(id -u airlock)
for p in $(pgrep -P "$pid") $(pgrep -u "$uid"); do
    [ "$(stat -c %u "/proc/$p" 2>/dev/null || echo "$uid")" = "$uid" ] ||
        fail "process $p ($(cat "/proc/$p/comm" 2>/dev/null)) below airlockd is not the user airlock's"
done
pass "airlockd's processes (signer, local runner) all run as airlock"

kill "$pid"
wait "$pid" || true
pid=
# a stopped airlockd leaves its runners their grace time (systemd's
# KillMode=mixed would end them with the unit): end them, by PID
for p in $(pgrep -u "$uid"); do kill "$p" 2>/dev/null || true; done
for _ in $(seq 50); do pgrep -u "$uid" >/dev/null || break; sleep 0.1; done
for p in $(pgrep -u "$uid"); do kill -KILL "$p" 2>/dev/null || true; done

# ---- purge: nothing left --------------------------------------------------------------
files=$(dpkg -L airlockd airlock-runner airlock | grep -vE '^/(usr|usr/share|usr/share/doc|usr/share/man|usr/share/man/man[0-9]|usr/bin|usr/sbin|usr/lib|usr/libexec|etc|usr/lib/systemd|usr/lib/systemd/system|usr/share/bash-completion|usr/share/bash-completion/completions|usr/share/zsh|usr/share/zsh/vendor-completions|\.)$')
DEBIAN_FRONTEND=noninteractive apt-get purge -y -o DPkg::Lock::Timeout=120 airlockd airlock-runner airlock >"$work/purge.log" 2>&1 ||
    fail "apt purge: $(tail -20 "$work/purge.log")"
installed=0
left=
for f in $files; do [ -e "$f" ] || [ -L "$f" ] && left="$left $f"; done
[ -z "$left" ] || fail "purge left:$left"
[ ! -e /var/lib/airlock ] || fail "purge left /var/lib/airlock"
[ ! -e /etc/airlock ] || fail "purge left /etc/airlock"
! getent passwd airlock >/dev/null || fail "purge left the user airlock"
! getent group airlock >/dev/null || fail "purge left the group airlock"
! pgrep -u "$uid" >/dev/null || fail "processes of the removed user are left: $(pgrep -u "$uid" -a)"
pass "purge removes every file, /var/lib/airlock, /etc/airlock and the user"
