#!/usr/bin/env bash
# make install / make uninstall with PREFIX and DESTDIR, into a temporary
# directory: every file in its place (programs in libexec/airlock with
# relative links from bin/ and sbin/ that resolve, the web page, man pages,
# completions, the unit naming the installed paths, the example config);
# the installed airlockd, reached through its link, finds its web page and
# its runner next to itself and serves; each man page renders with man -l
# without a warning; the bash completion completes; uninstall leaves no
# file behind.
# Env: AL_BIN (the build directory), AL_SRC (the source tree).
set -euo pipefail

: "${AL_BIN:?AL_BIN must name the build directory}"
: "${AL_SRC:?AL_SRC must name the source tree}"
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok - $*"; }

work=$(mktemp -d /tmp/airlock-install.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
dest=$work/root
prefix=/opt/airlock-test

# the install, as make install does it (cmake --install with DESTDIR)
DESTDIR=$dest cmake --install "$AL_BIN" --prefix "$prefix" >"$work/install.log" 2>&1 ||
    fail "install: $(tail -5 "$work/install.log")"
r=$dest$prefix
for f in libexec/airlock/airlockd libexec/airlock/airlock-runner libexec/airlock/airlock-proxy-fwd \
    bin/airlock share/airlock/web/index.html share/airlock/web/vendor/xterm.js \
    share/man/man1/airlock.1 share/man/man1/airlock-runner.1 share/man/man8/airlockd.8 \
    share/man/man5/airlockd.conf.5 share/bash-completion/completions/airlock \
    share/bash-completion/completions/airlockd share/bash-completion/completions/airlock-runner \
    share/zsh/site-functions/_airlock lib/systemd/system/airlockd.service etc/airlock/airlockd.conf; do
    [ -f "$r/$f" ] || fail "install: $prefix/$f is missing"
done
for l in sbin/airlockd bin/airlock-runner libexec/airlock/web; do
    [ -L "$r/$l" ] || fail "$prefix/$l is not a link"
    case $(readlink "$r/$l") in /*) fail "$prefix/$l is an absolute link" ;; esac
    [ -e "$r/$l/" ] || [ -x "$r/$l" ] || fail "$prefix/$l does not resolve"
done
pass "install: programs, links, web page, man pages, completions, unit and config in place"

grep -qx "ExecStart=$prefix/sbin/airlockd serve --config $prefix/etc/airlock/airlockd.conf --data /var/lib/airlock" \
    "$r/lib/systemd/system/airlockd.service" || fail "the unit's ExecStart: $(grep ExecStart "$r/lib/systemd/system/airlockd.service")"
! grep -q '@[A-Z_]*@' "$r/lib/systemd/system/airlockd.service" || fail "the unit has an unreplaced @VAR@"
pass "the unit names the installed paths"

# versions agree, through the links
v=$("$AL_BIN/airlockd" --version | cut -d' ' -f2)
[ "$("$r/sbin/airlockd" --version)" = "airlockd $v" ] || fail "installed airlockd --version"
[ "$("$r/bin/airlock-runner" --version)" = "airlock-runner $v" ] || fail "installed airlock-runner --version"
[ "$("$r/bin/airlock" --version)" = "airlock $v" ] || fail "installed airlock --version"
pass "the installed programs say version $v"

# the installed airlockd, started through its link, serves its page
mkdir -m 0700 "$work/data"
"$r/sbin/airlockd" serve --data "$work/data" --listen 127.0.0.1:0 >"$work/d.log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*serving http on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$work/d.log" | head -1)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "installed airlockd exited: $(cat "$work/d.log")"
    sleep 0.1
done
[ -n "$port" ] || fail "installed airlockd did not say its port: $(cat "$work/d.log")"
grep -q "runner $r/libexec/airlock/airlock-runner, web $r/libexec/airlock/web)" "$work/d.log" ||
    fail "airlockd did not find its runner and page next to it: $(grep serving "$work/d.log")"
curl -fsS "http://127.0.0.1:$port/" | grep -q '<html' || fail "the page is not served"
kill "$pid"
wait "$pid" || true
pid=
pass "the installed airlockd finds its runner and web page through its link, and serves"

# the man pages render without a warning, and say what the programs do
for page in "$r"/share/man/man*/*; do
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>"$work/man.err") || fail "man -l $page"
    [ ! -s "$work/man.err" ] || fail "man -l $page warns: $(head -3 "$work/man.err")"
    grep -q '^NAME' <<<"$out" || fail "$page has no NAME section"
done
LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$r/share/man/man8/airlockd.8" 2>/dev/null | grep -q -- '--log-format' ||
    fail "airlockd(8) does not document --log-format"
pass "man -l renders the four pages without a warning"

# completion: the words offered for "airlock pr" and "airlockd serve --log-f"
got=$(bash -c 'source "$1"; COMP_WORDS=(airlock pr); COMP_CWORD=1; _airlock; echo "${COMPREPLY[*]}"' _ \
    "$r/share/bash-completion/completions/airlock")
[ "$got" = probe ] || fail "bash completion of 'airlock pr': '$got'"
got=$(bash -c 'source "$1"; COMP_WORDS=(airlockd serve --log-format j); COMP_CWORD=3; _airlockd; echo "${COMPREPLY[*]}"' _ \
    "$r/share/bash-completion/completions/airlockd")
[ "$got" = json ] || fail "bash completion of 'airlockd serve --log-format j': '$got'"
if command -v zsh >/dev/null; then zsh -n "$r/share/zsh/site-functions/_airlock" || fail "zsh completion syntax"; fi
pass "bash completion completes commands and values; zsh's parses"

# uninstall: nothing of ours is left
cp "$AL_BIN/install_manifest.txt" "$work/manifest"
DESTDIR=$dest cmake -D MANIFEST="$work/manifest" -P "$AL_SRC/cmake/uninstall.cmake" >/dev/null
left=$(find "$dest" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
[ ! -e "$r/libexec/airlock" ] && [ ! -e "$r/etc/airlock" ] && [ ! -e "$r/share/airlock" ] ||
    fail "uninstall left our directories"
pass "uninstall removes every file it installed, and our directories"
