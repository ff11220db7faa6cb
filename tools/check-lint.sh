#!/usr/bin/env bash
# ESLint over the web page (web/*.js) and the Node tests (tests/**/*.mjs,
# fuzz/*.mjs, bench/*.mjs), as eslint.config.js says, and the Dockerfiles of deploy/
# (dockerfile-utils); quiet when clean. eslint and dockerfile-utils come
# from npm, pinned in package.json (tools/deps.sh installs it).
# Usage: tools/check-lint.sh [BUILD_DIR] (the argument is ignored: the
# static checks of tools/test-all.sh all take one).
set -euo pipefail
cd "$(dirname "$0")/.."
eslint=node_modules/.bin/eslint
[ -x "$eslint" ] || { echo "check-lint: no $eslint (run tools/deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files -co --exclude-standard -- 'web/*.js' 'tests/*.mjs' 'fuzz/*.mjs' 'bench/*.mjs' 'eslint.config.js')
[ ${#files[@]} -gt 0 ] || exit 0
rc=0
if "$eslint" --max-warnings 0 "${files[@]}"; then
  echo "check-lint: eslint clean on ${#files[@]} files"
else
  echo "check-lint: eslint found the problems above" >&2
  rc=1
fi
# Dockerfiles (deploy/): dockerfile-utils from npm, which says nothing when
# a file is clean (it exits 0 either way: its output decides)
dfu=node_modules/.bin/dockerfile-utils
[ -x "$dfu" ] || { echo "check-lint: no $dfu (run tools/deps.sh)" >&2; exit 1; }
mapfile -t dockerfiles < <(git ls-files -co --exclude-standard -- 'deploy/*Dockerfile*')
for f in "${dockerfiles[@]}"; do
  out=$("$dfu" lint "$f" 2>&1)
  if [ -n "$out" ]; then
    printf '%s:\n%s\n' "$f" "$out" >&2
    rc=1
  fi
done
[ $rc -eq 0 ] && [ ${#dockerfiles[@]} -gt 0 ] && echo "check-lint: dockerfile-utils clean on ${#dockerfiles[@]} Dockerfiles"
exit $rc
