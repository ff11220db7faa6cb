#!/usr/bin/env bash
# ESLint over the web page (web/*.js) and the Node tests (tests/**/*.mjs,
# fuzz/*.mjs), as eslint.config.js says; quiet when clean. eslint comes
# from npm, pinned in package.json (tools/deps.sh installs it).
# Usage: tools/check-lint.sh [BUILD_DIR] (the argument is ignored: the
# static checks of tools/test-all.sh all take one).
set -euo pipefail
cd "$(dirname "$0")/.."
eslint=node_modules/.bin/eslint
[ -x "$eslint" ] || { echo "check-lint: no $eslint (run tools/deps.sh)" >&2; exit 1; }
mapfile -t files < <(git ls-files -co --exclude-standard -- 'web/*.js' 'tests/*.mjs' 'fuzz/*.mjs' 'eslint.config.js')
[ ${#files[@]} -gt 0 ] || exit 0
if "$eslint" --max-warnings 0 "${files[@]}"; then
  echo "check-lint: eslint clean on ${#files[@]} files"
else
  echo "check-lint: eslint found the problems above" >&2
  exit 1
fi
