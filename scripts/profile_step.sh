#!/usr/bin/env bash
# Profiles one training epoch of the engine and of the eager PyTorch peer, op by op, with
# LibTorch's autograd profiler on both sides, and prints the tables of docs/profile.md:
#   head  the head at 0.5 (layer3.0..layer4.1 + classifier): the engine from its cache
#         (recycle-train --cache), the peer from activations it keeps in memory;
#   full  full fine-tuning of all 8 blocks from the images.
# Same model, samples (the first LIMIT of classes 5-9, default 2000), batch 128, 2 threads,
# 2 epochs; the second epoch is profiled. The engine runs with each --memory-format in
# FORMATS (default: "channels_last contiguous"). Traces and tables go to OUT (default
# out/profile). Needs out/encoder.pt (scripts/demo.sh makes it) or WEIGHTS=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out/profile}
enc=${WEIGHTS:-out/encoder.pt}
limit=${LIMIT:-2000}
formats=${FORMATS:-channels_last contiguous}
[ -f "$enc" ] || { echo "profile_step: $enc is missing: run scripts/demo.sh first" >&2; exit 1; }
cmake --build build -j "$(nproc)" --target recycle-build recycle-train >/dev/null
mkdir -p "$out"
rm -rf "$out/cache-r50"
build/recycle-build --data fashion-mnist --classes 5-9 --split train --limit "$limit" \
  --weights "$enc" --recycle 0.5 --cache "$out/cache-r50" --json | tail -n 1 > /dev/null
common=(--epochs 2 --batch 128 --threads 2 --eval-split none --json)
head_args=() full_args=()
for f in $formats; do
  build/recycle-train --cache "$out/cache-r50" "${common[@]}" --memory-format "$f" \
    --profile "$out/engine-head-$f.json" | tail -n 1 > "$out/engine-head-$f.result.json"
  build/recycle-train --data fashion-mnist --classes 5-9 --split train --limit "$limit" \
    --weights "$enc" --recycle 0 "${common[@]}" --memory-format "$f" \
    --profile "$out/engine-full-$f.json" | tail -n 1 > "$out/engine-full-$f.result.json"
  head_args+=("engine-$f=$out/engine-head-$f.json")
  full_args+=("engine-$f=$out/engine-full-$f.json")
done
/usr/bin/python3 bench/peers/eager_peer.py --classes 5-9 --limit "$limit" --epochs 2 --batch 128 \
  --threads 2 --profile "$out" | tail -n 1 > "$out/peer.result.json"
{
  echo "## Head at 0.5 (the engine from its cache, the peer from in-memory activations)"
  echo
  /usr/bin/python3 bench/profile_table.py "peer=$out/peer-head.json" "${head_args[@]}"
  echo
  echo "## Full fine-tuning"
  echo
  /usr/bin/python3 bench/profile_table.py "peer=$out/peer-full.json" "${full_args[@]}"
} | tee "$out/profile.md"
