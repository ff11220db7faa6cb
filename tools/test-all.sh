#!/usr/bin/env bash
# The whole of `make test`. Each phase adds to one tally; the closing line is
# "N passed, N failed" over every ctest test (the gcc builds, normal and
# ASan, and clang's unit tests), every fuzz run and every static check. Exit
# status is non-zero when anything failed.
#
# The test phases leave much of the machine idle (their processes wait on
# sockets, timers and each other), so the next builds run behind them at
# the lowest CPU priority (nice 19): the ASan, clang and fuzz builds while
# the normal suite runs, and the static checks while the ASan suite runs.
# A test at normal priority always gets the CPU first; a build only takes
# what the tests leave. Each phase that needs a background job waits for it
# and shows its log when it failed. Every phase's wall time is printed, and
# a summary of them at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN_BUILD=${ASAN_BUILD:-build-asan}
CLANG_BUILD=${CLANG_BUILD:-build-clang}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
JOBS=${JOBS:-$(nproc)}
BG_NICE=19

passed=0
failed=0
failures=()
timings=()
logs=$(mktemp -d)
start_all=$SECONDS
phase_name=""
phase_start=$SECONDS

phase_end() {
  [ -n "$phase_name" ] && timings+=("$(printf '%5ds  %s' $((SECONDS - phase_start)) "$phase_name")")
  phase_name=""
}
phase() {
  phase_end
  phase_name=$*
  phase_start=$SECONDS
  printf '\n=== %s ===\n' "$*"
}
ok() { passed=$((passed + 1)); }
ko() { failed=$((failed + 1)); failures+=("$1"); echo "FAILED: $1"; }

# run_ctest DIR LABEL: run ctest in DIR, add its counts.
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

# configure_build DIR CC PRIO ARGS...: configure and build one tree with
# compiler CC ("-": the default one) at nice level PRIO.
configure_build() {
  local dir=$1 cc=$2 prio=$3
  shift 3
  local env=()
  [ "$cc" != "-" ] && env=(CC="$cc")
  env "${env[@]}" nice -n "$prio" cmake -S . -B "$dir" "$@" >/dev/null &&
    nice -n "$prio" cmake --build "$dir" -j "$JOBS"
}

# The background builds, one after the other, at the lowest priority.
# Each leaves $logs/NAME.log and $logs/NAME.rc (its exit status).
bg_builds() {
  local name dir cc
  while read -r name dir cc args; do
    # shellcheck disable=SC2086 # args are words
    configure_build "$dir" "$cc" "$BG_NICE" $args >"$logs/$name.log" 2>&1
    echo $? >"$logs/$name.rc"
  done <<EOF
asan $ASAN_BUILD - -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_SANITIZE=ON
clang $CLANG_BUILD clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_UNIT_ONLY=ON
fuzz $FUZZ_BUILD clang-14 -DCMAKE_BUILD_TYPE=Debug -DAIRLOCK_FUZZ=ON
EOF
}

# wait_bg NAME: wait until background job NAME has finished; its status.
wait_bg() {
  local name=$1 waited=$SECONDS
  while [ ! -f "$logs/$name.rc" ]; do
    if ! kill -0 "$bg_pid" 2>/dev/null && [ ! -f "$logs/$name.rc" ]; then
      echo "background job $name ended without a status" >&2
      return 1
    fi
    sleep 1
  done
  [ $((SECONDS - waited)) -gt 0 ] && echo "(waited $((SECONDS - waited)) s for the $name build)"
  local rc
  rc=$(cat "$logs/$name.rc")
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$logs/$name.log"
    return 1
  fi
  return 0
}

phase "build (RelWithDebInfo)"
normal_built=0
if configure_build "$BUILD" - 0 -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
  normal_built=1
else
  ko "normal build"
fi

bg_builds &
bg_pid=$!

if [ $normal_built -eq 1 ]; then
  phase "tests (normal build; the other builds behind it)"
  run_ctest "$BUILD" "normal"
fi

phase "tests (ASan + UBSan build; the static checks behind it)"
static_pid=
if wait_bg asan; then
  # the static checks need the normal build's compile_commands.json
  if [ $normal_built -eq 1 ]; then
    (
      for chk in tools/check-format.sh tools/check-banned.sh tools/check-tidy.sh tools/check-lint.sh; do
        name=$(basename "$chk" .sh)
        nice -n "$BG_NICE" "$chk" "$BUILD" >"$logs/$name.log" 2>&1
        echo $? >"$logs/$name.rc"
      done
    ) &
    static_pid=$!
  fi
  run_ctest "$ASAN_BUILD" "sanitizers"
else
  ko "sanitizer build"
fi

# The unit tests built by clang too (AIRLOCK_UNIT_ONLY: no integration
# tests, benches or corpus replays): another compiler's warnings and
# code generation over the same tests.
phase "tests (clang build, unit tests)"
if wait_bg clang; then
  run_ctest "$CLANG_BUILD" "clang"
else
  ko "clang build"
fi

# Each fuzz target for FUZZ_SECONDS, JOBS of them at once.
phase "fuzz (libFuzzer, ${FUZZ_SECONDS}s per target, $JOBS at once)"
fuzz_one() {
  local bin=$1 name short work dict=()
  name=$(basename "$bin"); short=${name#fuzz_}
  work=$(mktemp -d)
  # fuzz/<target>.dict: the words of that input format, where there is one
  [ -f "fuzz/$short.dict" ] && dict=(-dict="fuzz/$short.dict")
  # New inputs go to a scratch dir; the committed corpus is only read.
  if ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=5 \
       -rss_limit_mb=2048 -max_len=4096 -artifact_prefix=fuzz/artifacts/ "${dict[@]}" \
       "$work" "fuzz/corpus/$short" >"$logs/fuzz_$short.log" 2>&1; then
    echo 0 >"$logs/fuzz_$short.rc"
  else
    echo 1 >"$logs/fuzz_$short.rc"
  fi
  rm -rf "$work"
}
if wait_bg fuzz; then
  mkdir -p fuzz/artifacts
  bins=()
  for bin in "$FUZZ_BUILD"/fuzz_*; do
    [ -f "$bin" ] && [ -x "$bin" ] && bins+=("$bin")
  done
  # in batches of JOBS (each runs FUZZ_SECONDS: a batch ends together)
  for ((i = 0; i < ${#bins[@]}; i += JOBS)); do
    pids=()
    for bin in "${bins[@]:i:JOBS}"; do
      fuzz_one "$bin" &
      pids+=($!)
    done
    wait "${pids[@]}"
  done
  for bin in "${bins[@]}"; do
    short=$(basename "$bin"); short=${short#fuzz_}
    if [ "$(cat "$logs/fuzz_$short.rc" 2>/dev/null)" = 0 ]; then
      echo "fuzz $short: $(grep -E '^Done [0-9]+ runs' "$logs/fuzz_$short.log" | tail -n1)"
      ok
    else
      tail -n 40 "$logs/fuzz_$short.log"
      ko "fuzz $short"
    fi
  done
else
  ko "fuzz build"
fi

phase "static checks"
if [ -n "$static_pid" ]; then
  wait "$static_pid"
  for name in check-format check-banned check-tidy check-lint; do
    cat "$logs/$name.log"
    if [ "$(cat "$logs/$name.rc" 2>/dev/null)" = 0 ]; then ok; else ko "tools/$name.sh"; fi
  done
else
  for chk in tools/check-format.sh tools/check-banned.sh tools/check-tidy.sh tools/check-lint.sh; do
    if "$chk" "$BUILD"; then ok; else ko "$chk"; fi
  done
fi
phase_end
wait "$bg_pid" 2>/dev/null

echo
echo "wall time per phase:"
printf '  %s\n' "${timings[@]}"
printf '%7ds  total\n' $((SECONDS - start_all))
rm -rf "$logs"
echo
if [ ${#failures[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
