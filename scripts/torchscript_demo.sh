#!/usr/bin/env bash
# Bring your own model: the transfer task with a torchvision ResNet-18 loaded as TorchScript.
#   1. export torchvision's resnet18 with a 1-channel stem and 5 classes
#      (examples/export_torchvision.py, Debian's python3-torchvision)
#   2. pretrain it on Fashion-MNIST classes 0-4 (recycle-train --recycle 0 --save-model)
#   3. for each ratio in RATIOS: cache that prefix for classes 5-9 (train and test splits),
#      train the head from the cache, print the test accuracy
# Sizes (environment): PRETRAIN_LIMIT=10000 samples and PRETRAIN_EPOCHS=2; LIMIT=2000 training
# and TEST_LIMIT=2000 test samples of classes 5-9; EPOCHS=3; RATIOS="0.25 0.5 0.75".
# Installs what is missing first (scripts/setup.sh torchscript). Outputs go to OUT (out-ts/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh torchscript
if [ -z "${BIN:-}" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j "$(nproc)" --target recycle-build recycle-train recycle-inspect
fi
bin=${BIN:-build}
out=${OUT:-out-ts}
pretrain_limit=${PRETRAIN_LIMIT:-10000}
pretrain_epochs=${PRETRAIN_EPOCHS:-2}
limit=${LIMIT:-2000}
test_limit=${TEST_LIMIT:-2000}
epochs=${EPOCHS:-3}
ratios=${RATIOS:-0.25 0.5 0.75}
mkdir -p "$out"

echo "== 1. export torchvision resnet18 (1-channel stem, 5 classes)"
/usr/bin/python3 examples/export_torchvision.py "$out/resnet18.ts" --in-channels 1 --num-classes 5
model=(--model "torchscript:$out/resnet18.ts")

echo "== 2. pretrain it on classes 0-4 ($pretrain_limit samples, $pretrain_epochs epochs)"
"$bin/recycle-train" --data fashion-mnist --classes 0-4 --limit "$pretrain_limit" "${model[@]}" \
  --recycle 0 --epochs "$pretrain_epochs" --save-model "$out/encoder.pt" --json \
  | tail -n 1 > "$out/pretrain.json"
echo "   encoder test accuracy on classes 0-4: $(jq .test_acc "$out/pretrain.json")"

echo "== 3. cache each prefix for classes 5-9, train the head ($limit samples, $epochs epochs)"
for r in $ratios; do
  cache="$out/cache-r$r"
  common=(--data fashion-mnist --classes 5-9 "${model[@]}" --weights "$out/encoder.pt"
          --recycle "$r" --cache "$cache")
  "$bin/recycle-build" "${common[@]}" --split train --limit "$limit" --json | tail -n 1 \
    > "$out/build-train-r$r.json"
  "$bin/recycle-build" "${common[@]}" --split test --limit "$test_limit" --json | tail -n 1 \
    > "$out/build-test-r$r.json"
  "$bin/recycle-train" --cache "$cache" --epochs "$epochs" --json | tail -n 1 > "$out/train-r$r.json"
  echo "   --recycle $r: split at $("$bin/recycle-inspect" --cache "$cache" --json | tail -n 1 | jq -r .split_at)," \
       "build $(jq .seconds "$out/build-train-r$r.json") s," \
       "test accuracy $(jq .test_acc "$out/train-r$r.json")," \
       "epochs $(jq -c .epoch_seconds "$out/train-r$r.json") s"
done
