#!/usr/bin/env bash
# Install, idempotently, every Debian and npm package the build and the tests
# need. Skips what is present; when something is missing and we are not root,
# says exactly what to install and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PKGS=(
  # build
  cmake make gcc pkg-config clang-14 libclang-rt-14-dev
  # checks
  clang-format clang-tidy cppcheck valgrind
  # libraries (what CMakeLists.txt finds with pkg-config, and http-parser)
  libssl-dev libjansson-dev libcmocka-dev
  libwebsockets-dev libwebsockets-evlib-uv libuv1-dev libvterm-dev libseccomp-dev libsqlite3-dev libpq-dev
  libhttp-parser-dev libcurl4-openssl-dev libwslay-dev
  # run: local sandboxes (bubblewrap), make run (curl)
  bubblewrap curl
  # man pages (scdoc renders man/*.scd; man-db's man -l reads them in the tests),
  # completions (zsh: the test parses _airlock), the Debian packages (make deb,
  # tests/integration/package.sh: dpkg-buildpackage, debhelper, lintian, fakeroot,
  # systemd-analyze verify from systemd; the package's user from passwd/adduser)
  scdoc man-db zsh build-essential dpkg-dev debhelper lintian fakeroot systemd passwd adduser
  # tests (vim: a full-screen program for the late-joiner test; chromium: web UI tests;
  # postgresql: the server binaries tests/tools/pg-temp.sh runs for the PostgreSQL suites;
  # git and lighttpd: the Git smart-HTTP server tests/integration/proxy_git.mjs runs,
  # git http-backend behind lighttpd's CGI; haproxy: the front tests/integration/replicas.mjs
  # starts on 127.0.0.1 before airlockd replicas)
  nodejs openssl procps util-linux tmux vim chromium postgresql git lighttpd haproxy
  # sqlite3: tests/integration/proxy_audit.mjs reads the database itself
  sqlite3
)

missing=()
for p in "${DEB_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# npm ships inside NodeSource's nodejs; Debian's nodejs needs the npm package.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# The host user local sandboxes run as when airlockd runs as root (never
# root itself): a system user with no home and no shell.
SANDBOX_USER=airlock-sandbox
if [ "$(id -u)" -eq 0 ] && ! id "$SANDBOX_USER" >/dev/null 2>&1; then
  echo "deps: creating the system user $SANDBOX_USER"
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$SANDBOX_USER"
fi

# npm packages, exactly as package-lock.json pins them (package.json: xterm.js
# for the page; ws, jose, playwright-core and @anthropic-ai/claude-code (its
# native binary, for tests/integration/proxy_claude.mjs) for the tests; eslint, @eslint/js and
# globals for tools/check-lint.sh); a stamp of the lock file's hash makes the
# second run a no-op.
if [ -f package-lock.json ]; then
  want=$(sha256sum package-lock.json | cut -d' ' -f1)
  have=$(cat node_modules/.airlock-lock.sha256 2>/dev/null || true)
  if [ "$want" != "$have" ]; then
    echo "deps: npm ci"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > node_modules/.airlock-lock.sha256
  fi
fi
echo "deps: all present"
