#!/usr/bin/env bash
# What the tools' choice of OpenMP wait policy costs at start, and what it makes of a niced
# neighbour, two builds side by side (engine/util/omp_wait.h; issue 54 item 13):
#   help    `recycle-inspect --help`, wall seconds
#   start   a 1-epoch `recycle-train` from a 300-sample cache, wall seconds (start included)
#   epoch   the head epoch (--json's epoch_seconds) of a 3,000-sample cache
# each beside three neighbours: none (idle cores), one busy `yes` at the tool's priority, and one
# `nice -n 19 yes` (a background job that yields to the tool). Runs the builds in turns
# (A B B A ...), ROUNDS times each, and prints the medians, the spread and B over A, and the
# policy each build's --json says it chose. The kernel's autogroup scheduling is turned off for
# the run where it can be (root), as under it a niced process in another session does not yield.
# Usage: scripts/measure_tool_start.sh BUILD_A BUILD_B [ROUNDS]   (default 5 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
a=$(realpath "$1") b=$(realpath "$2") rounds=${3:-5}
work=$(mktemp -d /tmp/tool-start.XXXXXX)
unset OMP_WAIT_POLICY GOMP_SPINCOUNT RECYCLE_OMP_WAIT_CHOICE
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
neighbour=
autogroup=/proc/sys/kernel/sched_autogroup_enabled
autogroup_was=$(cat "$autogroup" 2>/dev/null || echo "")
cleanup() {
  [ -n "$neighbour" ] && kill "$neighbour" 2>/dev/null
  [ -n "$autogroup_was" ] && echo "$autogroup_was" >"$autogroup" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$autogroup_was" ] && echo 0 >"$autogroup" 2>/dev/null || true
"$b/recycle-build" --data fashion-mnist --split test --limit 300 --width 8 --recycle 0.5 \
  --cache "$work/small" >/dev/null 2>&1
"$b/recycle-build" --data fashion-mnist --split train --limit 3000 --recycle 0.5 \
  --cache "$work/big" >/dev/null 2>&1

now() { date +%s.%N; }
measure() {  # BUILD TASK -> seconds (and the policy chosen, for the tasks with --json)
  local bin=$1 start end
  case $2 in
    help)
      start=$(now); "$bin/recycle-inspect" --help >/dev/null; end=$(now)
      echo "$(echo "$end - $start" | bc) -" ;;
    start)
      start=$(now)
      local j
      j=$("$bin/recycle-train" --cache "$work/small" --split test --eval-split none --epochs 1 \
            --json 2>/dev/null | tail -n 1)
      end=$(now)
      echo "$(echo "$end - $start" | bc) $(echo "$j" | jq -r '.omp_wait.policy // "(not said)"' | tr ' ' _)" ;;
    epoch)
      local j
      j=$("$bin/recycle-train" --cache "$work/big" --eval-split none --epochs 2 --json 2>/dev/null \
            | tail -n 1)
      echo "$(echo "$j" | jq -r '.epoch_seconds[1]') $(echo "$j" | jq -r '.omp_wait.policy // "(not said)"' | tr ' ' _)" ;;
  esac
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.3f-%.3f", lo, hi}'; }

echo "measure_tool_start: $rounds rounds, builds A=$a B=$b, $(nproc) cores ($cpu)"
printf '| neighbour | task | A median (spread) | B median (spread) | B / A | A chose | B chose |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for who in none busy niced; do
  case $who in
    none) neighbour= ;;
    busy) yes >/dev/null & neighbour=$! ;;
    niced) nice -n 19 yes >/dev/null & neighbour=$! ;;
  esac
  sleep 1
  for task in help start epoch; do
    : >"$work/A" ; : >"$work/B"
    for ((r = 0; r < rounds; ++r)); do
      if ((r % 2 == 0)); then order="A B"; else order="B A"; fi
      for side in $order; do
        bin=$a; [ "$side" = B ] && bin=$b
        measure "$bin" "$task" >>"$work/$side"
      done
    done
    ma=$(cut -d' ' -f1 "$work/A" | median) mb=$(cut -d' ' -f1 "$work/B" | median)
    pa=$(cut -d' ' -f2 "$work/A" | sort | uniq -c | awk '{printf "%s%s x%d", sep, $2, $1; sep=", "}')
    pb=$(cut -d' ' -f2 "$work/B" | sort | uniq -c | awk '{printf "%s%s x%d", sep, $2, $1; sep=", "}')
    printf '| %s | %s | %.3f s (%s) | %.3f s (%s) | %.2fx | %s | %s |\n' "$who" "$task" \
      "$ma" "$(cut -d' ' -f1 "$work/A" | spread)" "$mb" "$(cut -d' ' -f1 "$work/B" | spread)" \
      "$(echo "$mb / $ma" | bc -l)" "$pa" "$pb"
  done
  [ -n "$neighbour" ] && kill "$neighbour" 2>/dev/null
  neighbour=
done
