#!/usr/bin/env bash
# The tools' defaults on a shared machine: beside a busy neighbour (one `yes` loop, as another
# user's job would be), head training from a cache (recycle-train --cache) and a cache build
# (recycle-build) run four ways in turns, ROUNDS times:
#   default        no flag, no OMP_WAIT_POLICY: the tools' own choice (every usable core; they
#                  re-exec themselves with OMP_WAIT_POLICY=PASSIVE, engine/util/omp_wait.h)
#   before         GOMP_SPINCOUNT=300000: libgomp's own default wait (spin 300,000 times, then
#                  sleep), what the tools ran with before they chose passive (same threads)
#   threads 1      --threads 1 (the tools' own wait policy)
#   threads 2      --threads 2 (the tools' own wait policy)
# and prints the median seconds of each way, and each over the best way's, with the CPU named.
# Usage: scripts/measure_shared_cores.sh [ROUNDS] [BIN]   (default 3 rounds, build/)
#        NEIGHBOUR=0 runs without the busy neighbour.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
bin=${2:-build}
work=$(mktemp -d /tmp/shared-cores.XXXXXX)
unset OMP_WAIT_POLICY GOMP_SPINCOUNT
cores=$(nproc)
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
"$bin/recycle-train" --data fashion-mnist --classes 0-4 --limit 3000 --recycle 0 --epochs 1 \
  --eval-split none --save-model "$work/enc.pt" --json >/dev/null
data=(--data fashion-mnist --classes 5-9 --limit 3000 --weights "$work/enc.pt" --recycle 0.5)
"$bin/recycle-build" "${data[@]}" --split train --cache "$work/cache" --json >/dev/null
neighbour=
if [ "${NEIGHBOUR:-1}" = 1 ]; then
  yes >/dev/null & neighbour=$!
  trap 'kill $neighbour 2>/dev/null; rm -rf "$work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
echo "measure_shared_cores: $rounds rounds on $cores cores ($cpu), busy neighbour: ${NEIGHBOUR:-1}"
ways=("default" "before" "threads 1" "threads 2")
run_way() {  # WAY TASK -> seconds
  local env=() flags=()
  case $1 in
    default) ;;
    before) env=(GOMP_SPINCOUNT=300000) ;;
    "threads 1") flags=(--threads 1) ;;
    "threads 2") flags=(--threads 2) ;;
  esac
  if [ "$2" = head ]; then
    env "${env[@]}" "$bin/recycle-train" --cache "$work/cache" --epochs 2 --eval-split none \
      "${flags[@]}" --json | tail -n 1 | jq '.epoch_seconds | add'
  else
    rm -rf "$work/c2"
    env "${env[@]}" "$bin/recycle-build" "${data[@]}" --split train --cache "$work/c2" \
      "${flags[@]}" --json | tail -n 1 | jq .seconds
  fi
}
: > "$work/times"
for r in $(seq 1 "$rounds"); do
  for task in head build; do
    for w in "${ways[@]}"; do
      s=$(run_way "$w" "$task")
      echo "$task|$w|$s" >> "$work/times"
      echo "  round $r, $task, $w: ${s}s"
    done
  done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
echo "| task | way | median s | over the best way |"
echo "| --- | --- | --- | --- |"
for task in head build; do
  best=
  declare -A med=()
  for w in "${ways[@]}"; do
    med[$w]=$(awk -F'|' -v t="$task" -v w="$w" '$1 == t && $2 == w {print $3}' "$work/times" | median)
    if [ -z "$best" ] || awk -v a="${med[$w]}" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=${med[$w]}; fi
  done
  for w in "${ways[@]}"; do
    echo "| $task | $w | ${med[$w]} | $(awk -v a="${med[$w]}" -v b="$best" 'BEGIN {printf "%.2fx", a / b}') |"
  done
  unset med
done
echo "(head: 2 epochs from a cache of 3,000 samples at 0.5; build: 3,000 samples at 0.5; $cpu)"
