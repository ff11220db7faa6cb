#!/usr/bin/env bash
# clang-tidy and cppcheck over the project's sources, quiet when clean.
# Usage: tools/check-tidy.sh BUILD_DIR (needs its compile_commands.json).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json" >&2; exit 1; }
mapfile -t files < <(git ls-files -co --exclude-standard -- 'src/*.c')
[ ${#files[@]} -gt 0 ] || exit 0
rc=0
# one clang-tidy per core, a few files each (it is the slow part of the checks)
jobs=${JOBS:-$(nproc)}
if ! printf '%s\0' "${files[@]}" |
     xargs -0 -n 8 -P "$jobs" clang-tidy -p "$build" --quiet >"$build/tidy.log" 2>&1; then rc=1; fi
if grep -E '(warning|error):' "$build/tidy.log"; then rc=1; fi
if ! cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
     -j "$jobs" --inline-suppr --std=c11 -I src/common -I src/control \
     --suppress=missingIncludeSystem "${files[@]}"; then rc=1; fi
[ $rc -eq 0 ] && echo "check-tidy: clang-tidy and cppcheck clean on ${#files[@]} files"
exit $rc
