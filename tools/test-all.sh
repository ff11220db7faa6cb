#!/usr/bin/env bash
# The whole of `make test`. Each phase adds to one tally; the closing line is
# "N passed, N failed" over every ctest test (the gcc builds, normal and
# ASan, and clang's unit tests), every fuzz run and every static check. Exit status is non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
CLANG_BUILD=${CLANG_BUILD:-build-clang}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
JOBS=${JOBS:-$(nproc)}

passed=0
failed=0
failures=()

phase() { printf '\n=== %s ===\n' "$*"; }
ok() { passed=$((passed + 1)); }
ko() { failed=$((failed + 1)); failures+=("$1"); echo "FAILED: $1"; }

# run_ctest DIR LABEL: build and run ctest in DIR, add its counts.
run_ctest() {
  local dir=$1 label=$2 out
  out=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j "$JOBS") 2>&1 | tee "$out"
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$out" | tail -n1)
  if [ -z "$line" ]; then
    ko "$label: ctest did not report"
  else
    local nfail total
    nfail=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
    total=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
    passed=$((passed + total - nfail))
    failed=$((failed + nfail))
    [ "$nfail" -eq 0 ] || failures+=("$label: $nfail ctest failures")
  fi
  rm -f "$out"
}

phase "build (RelWithDebInfo)"
if cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
   cmake --build "$BUILD" -j "$JOBS"; then
  phase "tests (normal build)"
  run_ctest "$BUILD" "normal"
else
  ko "normal build"
fi

phase "build (ASan + UBSan)"
if cmake -S . -B "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_SANITIZE=ON >/dev/null &&
   cmake --build "$ASAN_BUILD" -j "$JOBS"; then
  phase "tests (ASan + UBSan build)"
  run_ctest "$ASAN_BUILD" "sanitizers"
else
  ko "sanitizer build"
fi

# The unit tests built by clang too (AIRLOCK_UNIT_ONLY: no integration
# tests, benches or corpus replays): another compiler's warnings and
# code generation over the same tests.
phase "build (clang, unit tests only)"
if CC=clang-14 cmake -S . -B "$CLANG_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_UNIT_ONLY=ON >/dev/null &&
   cmake --build "$CLANG_BUILD" -j "$JOBS"; then
  phase "tests (clang build, unit tests)"
  run_ctest "$CLANG_BUILD" "clang"
else
  ko "clang build"
fi

phase "fuzz (libFuzzer, ${FUZZ_SECONDS}s per target)"
if CC=clang-14 cmake -S . -B "$FUZZ_BUILD" -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_FUZZ=ON >/dev/null &&
   cmake --build "$FUZZ_BUILD" -j "$JOBS"; then
  mkdir -p fuzz/artifacts
  for bin in "$FUZZ_BUILD"/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin"); short=${name#fuzz_}
    work=$(mktemp -d)
    # fuzz/<target>.dict: the words of that input format, where there is one
    dict=()
    [ -f "fuzz/$short.dict" ] && dict=(-dict="fuzz/$short.dict")
    # New inputs go to a scratch dir; the committed corpus is only read.
    if ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=5 \
         -rss_limit_mb=2048 -max_len=4096 -artifact_prefix=fuzz/artifacts/ "${dict[@]}" \
         "$work" "fuzz/corpus/$short" >"$work.log" 2>&1; then
      echo "fuzz $short: $(grep -E '^Done [0-9]+ runs' "$work.log" | tail -n1)"
      ok
    else
      tail -n 40 "$work.log"
      ko "fuzz $short"
    fi
    rm -rf "$work" "$work.log"
  done
else
  ko "fuzz build"
fi

phase "static checks"
for chk in tools/check-format.sh tools/check-banned.sh tools/check-tidy.sh tools/check-lint.sh; do
  if "$chk" "$BUILD"; then ok; else ko "$chk"; fi
done

echo
if [ ${#failures[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
