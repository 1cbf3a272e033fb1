#!/usr/bin/env bash
# Runs the example programs on small data and checks what they print.
# Usage: examples/run_examples.sh BUILD_DIR   (ctest runs it as the test `examples`)
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "examples: $*" >&2; exit 1; }

mkdir "$work/keyer"
out=$("$build/examples/custom_keyer" "$work/keyer")
echo "$out"
grep -q "border-only difference, same key: yes" <<<"$out" || fail "custom_keyer: the border changed the key"
grep -q "build 1 with keyer center:4: 200 samples" <<<"$out" || fail "custom_keyer: first build"
grep -Eq "build 2 with keyer center:4: 200 samples, [0-9]+ unique, 0 computed" <<<"$out" ||
  fail "custom_keyer: the rerun computed records"

mkdir "$work/transfer"
out=$("$build/examples/transfer_task" "$work/transfer" 300)
echo "$out"
grep -q "cached train: 300 samples, 300 records computed" <<<"$out" || fail "transfer_task: train cache"
grep -q "cached test: 300 samples" <<<"$out" || fail "transfer_task: test cache"
grep -Eq "head from the cache: test accuracy 0\.[0-9]+ on 300 samples" <<<"$out" ||
  fail "transfer_task: no accuracy line"
echo "examples: both ran as documented"
