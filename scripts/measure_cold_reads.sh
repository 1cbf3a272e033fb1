#!/usr/bin/env bash
# Reads from a cache many times the memory, cold (docs/scale.md): builds an 8 GB cache of
# 80,000 records of 100 KB (40,000 Fashion-MNIST training images, 2 views each, through a
# width-64 ResNet-18 to layer1.1, fp16), then, twice, with the page cache dropped before each
# read: cat of its files, and one recycle.CachedLoader epoch shuffled and in order
# (block_cache_mb 512, batch 128). Root only (/proc/sys/vm/drop_caches). A baseline, not a
# benchmark of record: recycle-bench does not run it yet.
# Usage: scripts/measure_cold_reads.sh [BUILD_DIR] [WORK_DIR]   (needs ~8.1 GB free in WORK_DIR)
set -u
B=${1:-build}
C=${2:-/tmp/recycle-cold-reads}/cache
rm -rf "$C"
echo "== build"
"$B/recycle-build" --data fashion-mnist --split train --limit 40000 --augment hflip --views 2 \
  --model resnet18 --width 64 --split-at layer1.1 --codec fp16 --cache "$C" --json 2>/dev/null | tail -n 1
du -sb "$C"
sync
for round in 1 2; do
  echo 1 > /proc/sys/vm/drop_caches
  s=$(date +%s.%N); cat "$C"/*.sst > /dev/null; e=$(date +%s.%N)
  echo "cat round $round: $(cat "$C"/*.sst | wc -c) bytes in $(echo "$e - $s" | bc) s"
  for shuffle in True False; do
    echo 1 > /proc/sys/vm/drop_caches
    /usr/bin/python3 - "$C" "$shuffle" "$round" <<'PY'
import resource, sys, time
import recycle
cache, shuffle, rnd = sys.argv[1], sys.argv[2] == "True", sys.argv[3]
loader = recycle.CachedLoader(cache, "train", batch_size=128, shuffle=shuffle, block_cache_mb=512)
report = recycle.inspect(cache)
record = report["record_bytes"] / report["records"]
start, n = time.time(), 0
for _, labels in loader:
    n += len(labels)
dt = time.time() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"loader round {rnd} shuffle={shuffle}: {n} records in {dt:.2f} s = "
      f"{n * record / dt / 1e6:.0f} MB/s, peak RSS {rss:.0f} MB")
PY
  done
done
rm -rf "$C"
