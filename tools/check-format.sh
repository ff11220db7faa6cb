#!/usr/bin/env bash
# Every C file follows .clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- 'src/*.[ch]' 'tests/*.[ch]' 'fuzz/*.[ch]' 'bench/*.[ch]')
[ ${#files[@]} -gt 0 ] || exit 0
if clang-format --dry-run -Werror "${files[@]}"; then
  echo "check-format: ${#files[@]} files clean"
else
  echo "check-format: run clang-format -i on the files above" >&2
  exit 1
fi
