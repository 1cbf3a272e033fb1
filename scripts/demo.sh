#!/usr/bin/env bash
# The main job, end to end, on Fashion-MNIST:
#   1. pretrain a width-16 ResNet-18 on classes 0-4 (full training, all 30,000 samples)
#   2. cache its first 50% of blocks for classes 5-9: 5,000 training samples and the test split
#   3. train the head from the cache for 4 epochs and print test accuracy on classes 5-9
#   4. verify the cache, and time full fine-tuning of the same model on the same samples
# Installs what is missing first. Outputs go to out/ (override with OUT=DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECYCLE_BUILD_PYTHON="$(bash scripts/python_found.sh)" >/dev/null
cmake --build build -j "$(nproc)" --target recycle-build recycle-train recycle-inspect
bash scripts/install_python.sh build
bin=build
out=${OUT:-out}
mkdir -p "$out"

echo "== 1. pretrain the encoder on Fashion-MNIST classes 0-4"
if [ -f "$out/encoder.pt" ]; then
  echo "   $out/encoder.pt exists: reusing it (delete it to pretrain again)"
else
  "$bin/recycle-train" --data fashion-mnist --classes 0-4 --recycle 0 --epochs 3 \
    --save-model "$out/encoder.pt" --json | tail -n 1 > "$out/pretrain.json"
  echo "   encoder test accuracy on classes 0-4: $(jq .test_acc "$out/pretrain.json")"
fi

echo "== 2. cache the frozen 50% prefix for classes 5-9"
common=(--data fashion-mnist --classes 5-9 --weights "$out/encoder.pt" --recycle 0.5
        --cache "$out/cache-r50")
"$bin/recycle-build" "${common[@]}" --split train --limit 5000 --json | tail -n 1 > "$out/build-train.json"
"$bin/recycle-build" "${common[@]}" --split test --json | tail -n 1 > "$out/build-test.json"
echo "   train: $(jq -c '{samples, computed, skipped, seconds}' "$out/build-train.json")"
echo "   test:  $(jq -c '{samples, computed, skipped, seconds}' "$out/build-test.json")"

echo "== 3. train the head from the cache (4 epochs)"
"$bin/recycle-train" --cache "$out/cache-r50" --epochs 4 --save-head "$out/head-r50.pt" --json \
  | tail -n 1 > "$out/train-r50.json"

echo "== 4. verify the cache; full fine-tuning of the same model on the same samples"
"$bin/recycle-inspect" --cache "$out/cache-r50" --verify --json | tail -n 1 > "$out/inspect.json"
"$bin/recycle-train" --data fashion-mnist --classes 5-9 --limit 5000 --weights "$out/encoder.pt" \
  --recycle 0 --epochs 4 --json | tail -n 1 > "$out/train-full.json"

median() { jq '.epoch_seconds | sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end' "$1"; }
head_epoch=$(median "$out/train-r50.json")
full_epoch=$(median "$out/train-full.json")
echo
echo "Result (classes 5-9, 5,000 training samples, 4 epochs):"
echo "  head from the 50% cache: test accuracy $(jq .test_acc "$out/train-r50.json"), median epoch ${head_epoch} s"
echo "  full fine-tuning:        test accuracy $(jq .test_acc "$out/train-full.json"), median epoch ${full_epoch} s"
echo "  epoch speedup from recycling: $(jq -n "$full_epoch / $head_epoch * 100 | round / 100")x"
echo "  cache verify: $(jq -c '{checked, corrupt}' "$out/inspect.json")"
