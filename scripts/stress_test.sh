#!/usr/bin/env bash
# Runs one test of the suite many times in a row beside two busy loops (CPU load), stopping at
# the first failure: the check for tests that involve processes, timing or concurrency.
# Usage: scripts/stress_test.sh [RUNS] [GTEST_FILTER] [BUILD_DIR]
#   default: 50 runs of Reliability.ReadersDuringABuildSeeWholeRecordsOnly in build/
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
filter=${2:-Reliability.ReadersDuringABuildSeeWholeRecordsOnly}
bin=$(realpath "${3:-build}")/recycle_tests
( while :; do :; done ) & b1=$!
( while :; do :; done ) & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT
log=$(mktemp)
pass=0
for i in $(seq "$runs"); do
  if "$bin" --gtest_filter="$filter" >"$log" 2>&1; then
    pass=$((pass + 1))
    echo "run $i ok: $(grep -E '^(readers during|two builds|build beside|kill test)' "$log" | head -n 1)"
  else
    echo "run $i FAILED:"; cat "$log"; break
  fi
done
rm -f "$log"
echo "stress: $filter passed $pass of $runs runs in a row beside two busy loops"
[ "$pass" -eq "$runs" ]
