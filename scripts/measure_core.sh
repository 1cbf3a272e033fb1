#!/usr/bin/env bash
# Measures the core engine's speed claims side by side, in one run, as ratios of medians:
#   A. recycle-build on all 30,000 training samples of classes 5-9 at 50%: a first build
#      (fresh cache) against a rerun on the same data (wall time of the whole command)
#   B. an epoch of head training from the 50% cache against an epoch of full fine-tuning of
#      the same model on the same 5,000 samples (epoch_seconds from recycle-train --json)
# Runs alternate (A first/rerun, B full/head) so drift on a shared machine hits both sides.
# Needs the demo's encoder (out/encoder.pt; run scripts/demo.sh first). REPEAT=3 by default.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build
out=${OUT:-out}
repeat=${REPEAT:-3}
enc="$out/encoder.pt"
[ -f "$enc" ] || { echo "measure_core: $enc is missing: run scripts/demo.sh first" >&2; exit 1; }
cmake --build build -j "$(nproc)" --target recycle-build recycle-train >/dev/null
work="$out/measure"
rm -rf "$work"; mkdir -p "$work"

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
now() { date +%s.%N; }

echo "== A. build all 30,000 training samples of classes 5-9 at 50%, then rerun ($repeat times)"
build=(--data fashion-mnist --classes 5-9 --split train --weights "$enc" --recycle 0.5
       --cache "$work/cache-all")
for i in $(seq "$repeat"); do
  t0=$(now); "$bin/recycle-build" "${build[@]}" --rebuild --json | tail -n 1 > "$work/first-$i.json"; t1=$(now)
  "$bin/recycle-build" "${build[@]}" --json | tail -n 1 > "$work/rerun-$i.json"; t2=$(now)
  echo "$t1 - $t0" | bc -l >> "$work/first.txt"
  echo "$t2 - $t1" | bc -l >> "$work/rerun.txt"
  echo "   run $i: first $(jq -c '{samples, computed}' "$work/first-$i.json") $(tail -n 1 "$work/first.txt") s;" \
       "rerun $(jq -c '{computed, bytes, index_written}' "$work/rerun-$i.json") $(tail -n 1 "$work/rerun.txt") s"
done
first=$(median < "$work/first.txt"); rerun=$(median < "$work/rerun.txt")
echo "   median first build ${first} s, median rerun ${rerun} s: rerun/first = $(echo "$rerun / $first" | bc -l | cut -c1-6)"

echo "== B. head epochs from the 50% cache vs full fine-tuning epochs, 5,000 samples ($repeat runs x 3 epochs each)"
cache="$work/cache-r50"
"$bin/recycle-build" --data fashion-mnist --classes 5-9 --split train --limit 5000 --weights "$enc" \
  --recycle 0.5 --cache "$cache" --json | tail -n 1 > /dev/null
for i in $(seq "$repeat"); do
  "$bin/recycle-train" --data fashion-mnist --classes 5-9 --limit 5000 --weights "$enc" --recycle 0 \
    --epochs 3 --eval-split none --json | tail -n 1 > "$work/full-$i.json"
  "$bin/recycle-train" --cache "$cache" --epochs 3 --eval-split none --json | tail -n 1 > "$work/head-$i.json"
  jq '.epoch_seconds[]' "$work/full-$i.json" >> "$work/full.txt"
  jq '.epoch_seconds[]' "$work/head-$i.json" >> "$work/head.txt"
  echo "   run $i: full epochs $(jq -c .epoch_seconds "$work/full-$i.json") s; head epochs $(jq -c .epoch_seconds "$work/head-$i.json") s"
done
full=$(median < "$work/full.txt"); head=$(median < "$work/head.txt")
echo "   median full fine-tuning epoch ${full} s, median head epoch ${head} s: speedup = $(echo "$full / $head" | bc -l | cut -c1-5)x"
