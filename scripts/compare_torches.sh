#!/usr/bin/env bash
# The same tools built against Debian's LibTorch 1.13 (build/) and pip's 2.11 (build-torch2/,
# scripts/test_torch2.sh), timed side by side on the transfer task: a cache build at 0.5, head
# epochs from that cache, and full fine-tuning epochs. The two take turns within every round
# (the order swapped each round), so a change in the machine's load falls on both. Prints each
# round, then per figure the median of the rounds for each and their ratio (1.13's time over
# 2.11's: above 1 means 2.11 is faster), with the CPU named.
# Usage: scripts/compare_torches.sh [ROUNDS] [SAMPLES] [EPOCHS]   (default 3 rounds, 5000, 3)
#        OLD=build NEW=build-torch2 WEIGHTS=out/encoder.pt THREADS=2 OUT=DIR
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
samples=${2:-5000}
epochs=${3:-3}
old=${OLD:-build}
new=${NEW:-build-torch2}
threads=${THREADS:-2}
out=${OUT:-$(mktemp -d /tmp/compare-torches.XXXXXX)}
mkdir -p "$out"
export OMP_WAIT_POLICY=PASSIVE
for b in "$old" "$new"; do
  for t in recycle-build recycle-train; do
    [ -x "$b/$t" ] || { echo "compare_torches: $b/$t is missing (build both first)" >&2; exit 1; }
  done
done
weights=${WEIGHTS:-out/encoder.pt}
if [ ! -f "$weights" ]; then
  weights=$out/encoder.pt
  echo "compare_torches: pretraining an encoder ($weights, 1 epoch on classes 0-4) with $old"
  "$old/recycle-train" --data fashion-mnist --classes 0-4 --limit 10000 --recycle 0 --epochs 1 \
    --save-model "$weights" --json >/dev/null
fi
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)
echo "compare_torches: $rounds rounds, $samples samples, $epochs epochs, $threads threads, on $cpu"
data=(--data fashion-mnist --classes 5-9 --limit "$samples" --weights "$weights")
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
run_one() {  # BUILD LABEL ROUND -> appends "LABEL build|head|full SECONDS" lines to $out/times
  local b=$1 label=$2 r=$3 cache=$out/cache-$2-$3
  local bs hs fs
  bs=$("$b/recycle-build" "${data[@]}" --split train --recycle 0.5 --threads "$threads" \
        --cache "$cache" --json | tail -n 1 | jq .seconds)
  hs=$("$b/recycle-train" --cache "$cache" --epochs "$epochs" --eval-split none \
        --threads "$threads" --json | tail -n 1 | jq '.epoch_seconds | sort | .[length/2|floor]')
  fs=$("$b/recycle-train" "${data[@]}" --recycle 0 --epochs "$epochs" --eval-split none \
        --threads "$threads" --json | tail -n 1 | jq '.epoch_seconds | sort | .[length/2|floor]')
  rm -rf "$cache"
  printf '%s build %s\n%s head %s\n%s full %s\n' "$label" "$bs" "$label" "$hs" "$label" "$fs" >> "$out/times"
  echo "  round $r, LibTorch $label: build ${bs}s, head epoch ${hs}s, full epoch ${fs}s"
}
: > "$out/times"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then
    run_one "$old" 1.13 "$r"; run_one "$new" 2.11 "$r"
  else
    run_one "$new" 2.11 "$r"; run_one "$old" 1.13 "$r"
  fi
done
echo
echo "| figure (median of $rounds rounds) | LibTorch 1.13 s | LibTorch 2.11 s | 1.13 / 2.11 |"
echo "| --- | --- | --- | --- |"
for f in build head full; do
  a=$(awk -v f="$f" '$1 == "1.13" && $2 == f {print $3}' "$out/times" | median)
  b=$(awk -v f="$f" '$1 == "2.11" && $2 == f {print $3}' "$out/times" | median)
  name=$f; [ "$f" = build ] && name="cache build, $samples samples at 0.5"
  [ "$f" = head ] && name="head epoch from the cache at 0.5"; [ "$f" = full ] && name="full fine-tuning epoch"
  echo "| $name | $a | $b | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2fx", a / b}') |"
done
echo "(times per round: $out/times; CPU: $cpu)"
