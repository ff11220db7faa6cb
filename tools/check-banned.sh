#!/usr/bin/env bash
# Functions we never call (as curl's checksrc): unbounded or error-blind.
set -euo pipefail
cd "$(dirname "$0")/.."
banned='\b(sprintf|vsprintf|strcpy|strcat|strncat|atoi|atol|atoll|gets|strtok|tmpnam|mktemp|alloca)[[:space:]]*\('
mapfile -t files < <(git ls-files -co --exclude-standard -- 'src/*.[ch]' 'tests/*.[ch]' 'fuzz/*.[ch]' 'bench/*.[ch]')
[ ${#files[@]} -gt 0 ] || exit 0
if grep -nE "$banned" "${files[@]}"; then
  echo "check-banned: banned function used (see lines above)" >&2
  exit 1
fi
echo "check-banned: ${#files[@]} files clean"
