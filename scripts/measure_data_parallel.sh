#!/usr/bin/env bash
# Accuracy and traffic of data-parallel head training on the transfer task, beside one process:
# the 50% cache of classes 5-9 (5,000 training samples, the 5,000-sample test split) from the
# demo's encoder, trained for 4 epochs with each seed of SEEDS, by
#   one process, batch 128                         (the reference)
#   --nproc 2, batch 64 per rank (128 per step)    with --grad-compression in COMPRESSIONS
#   --nproc 2, batch 64 per rank, --sync average:4
#   --nproc 2, batch 64 per rank, --sync async:P:F for each P:F of ASYNCS ("1:1 4:4" by default)
# and prints one line per run and a table of means (test accuracy, bytes per step, ratio).
# Needs out/encoder.pt (scripts/demo.sh makes it) or WEIGHTS=FILE. SEEDS="0 1 2" by default.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build
out=${OUT:-out}
enc=${WEIGHTS:-$out/encoder.pt}
seeds=${SEEDS:-0 1 2}
compressions=${COMPRESSIONS:-none fp16 topk}
[ -f "$enc" ] || { echo "measure_data_parallel: $enc is missing: run scripts/demo.sh first" >&2; exit 1; }
cmake --build build -j "$(nproc)" --target recycle-build recycle-train >/dev/null
work="$out/measure-dp"
mkdir -p "$work"
cache="$work/cache-r50"
for split in train test; do
  limit=(); [ "$split" = train ] && limit=(--limit 5000)
  "$bin/recycle-build" --data fashion-mnist --classes 5-9 --split "$split" "${limit[@]}" \
    --weights "$enc" --recycle 0.5 --cache "$cache" --json | tail -n 1 > /dev/null
done

results="$work/results.jsonl"
: > "$results"
run() {  # NAME ARGS...
  local name=$1; shift
  for seed in $seeds; do
    "$bin/recycle-train" --cache "$cache" --epochs 4 --seed "$seed" --threads 2 --json "$@" \
      | tail -n 1 | jq -c --arg name "$name" --argjson seed "$seed" \
        '{name: $name, seed: $seed, test_acc, bytes_per_step, fp32_bytes_per_step, compression_ratio, epoch_seconds}' \
      | tee -a "$results"
  done
}
run "1 process" --batch 128
for c in $compressions; do run "2 ranks, $c" --batch 64 --nproc 2 --grad-compression "$c"; done
run "2 ranks, average:4" --batch 64 --nproc 2 --sync average:4
for a in ${ASYNCS-1:1 4:4}; do run "2 ranks, async:$a" --batch 64 --nproc 2 --sync "async:$a"; done

echo
echo "| run | seeds | mean test accuracy | bytes/step per rank | fp32 bytes/step | ratio |"
echo "| --- | --- | --- | --- | --- | --- |"
jq -rs 'group_by(.name) | sort_by(.[0].name) | .[] |
  "| \(.[0].name) | \(length) | \((map(.test_acc) | add / length * 10000 | round / 100))% | \((map(.bytes_per_step) | add / length | round)) | \((map(.fp32_bytes_per_step) | add / length | round)) | \((map(.compression_ratio) | add / length * 10 | round / 10)) |"' "$results"
