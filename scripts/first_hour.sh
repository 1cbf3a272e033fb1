#!/usr/bin/env bash
# A new user's first hour, as they meet it: the README's walk-through and its predict command
# run exactly as the README writes them (the code blocks are taken from README.md), then
# docs/python.md's flow (examples/finetune_resnet18.py: recycle.build, a DataLoader over
# CachedDataset as the docs show it, with 0 and 2 workers, CachedLoader, and the frozen prefix
# run every step), all beside a busy neighbour: one `yes` loop on a core, as on a shared
# machine. Prints each step's exit code and time, the tools' epochs and accuracies, and the
# example's figures. Usage: scripts/first_hour.sh [PYTHON] (default /usr/bin/python3; the
# build's tools must be in build/ and `import recycle` must work in PYTHON).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${1:-/usr/bin/python3}
[ -x build/recycle-train ] || { echo "first_hour: build/ has no tools (bash scripts/test.sh builds them)" >&2; exit 1; }
yes >/dev/null & neighbour=$!
trap 'kill $neighbour 2>/dev/null; rm -rf walk' EXIT
echo "first hour on $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores), beside one busy 'yes' loop"

# The README's indented code block after a heading, as lines of commands (continuations joined).
block() {
  awk -v head="$1" '
    $0 ~ "^## " { inside = ($0 == head) }
    inside && /^    / { sub(/^    /, ""); print; seen = 1; next }
    inside && seen && !/^    / { exit }' README.md | sed -e ':a' -e '/\\$/N; s/\\\n */ /; ta'
}

rm -rf walk
step=0
run_block() {
  while IFS= read -r line; do
    case "$line" in ""|\#*) [ -n "$line" ] && echo "  $line"; continue ;; esac
    step=$((step + 1))
    start=$(date +%s.%N)
    bash -c "$line" >"/tmp/first-hour.$$" 2>&1
    code=$?
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    printf '  [%d] exit %d, %.1f s: %s\n' "$step" "$code" "$seconds" "$line"
    # What a user looks at: epochs, accuracy, counts, the prefix share, errors.
    grep -E "epoch|acc|computed|prefix:|predicted|error|verify|records" "/tmp/first-hour.$$" | sed 's/^/      /' | head -12
  done
  rm -f "/tmp/first-hour.$$"
}

echo "== README: A five-minute walk-through (the last command is refused by design: exit 1)"
block "## A five-minute walk-through" | run_block
echo "== README: Serve predictions"
block "## Serve predictions" | run_block

echo "== docs/python.md's flow: examples/finetune_resnet18.py, DataLoader with 0 and 2 workers"
for workers in 0 2; do
  echo "-- --workers $workers"
  "$python" examples/finetune_resnet18.py --train 5000 --test 2000 --epochs 3 --bench-epochs 3 \
    --workers "$workers" --cache "/tmp/first-hour-cache.$$" 2>&1 | grep -vE "^loader benchmark|^inference" | sed 's/^/  /'
  rm -rf "/tmp/first-hour-cache.$$"
done
