#!/usr/bin/env bash
# Runs the tools on hostile and broken input and checks each gives a clear one-line error and a
# non-zero exit, and that a cache built before stays intact and readable (recycle-inspect
# --verify after every case). Writes the table of inputs and messages to docs/hostile-inputs.md
# with --write-doc. The full-disk and read-only cases mount small tmpfs filesystems (root only;
# skipped otherwise). Usage: scripts/hostile_inputs.sh [--write-doc] [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
write_doc=0
if [ "${1:-}" = --write-doc ]; then write_doc=1; shift; fi
bin=$(realpath "${1:-build}")
fm=/usr/share/datasets/fashion-mnist
work=$(mktemp -d)
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

good="$work/good-cache"
"$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --cache "$good" >/dev/null 2>&1 \
  || { echo "hostile_inputs: could not build the reference cache" >&2; exit 1; }

rows=()
failures=0
port=""  # the data-parallel cases' port, PORT in the table
# case DESCRIPTION EXPECTED_EXIT CACHE_TO_CHECK COMMAND...
case_() {
  local what=$1 want=$2 cache=$3; shift 3
  "$@" >"$work/out" 2>"$work/err" </dev/null
  local code=$?
  local msg lines
  msg=$(head -n 1 "$work/err" | sed "s|$work|TMP|g; ${port:+s/$port/PORT/g;} s/|/\\\\|/g")
  lines=$(wc -l <"$work/err")
  local verdict=ok
  if [ "$code" -eq 0 ] || { [ "$want" != any ] && [ "$code" -ne "$want" ]; }; then verdict="FAIL (exit $code)"; fi
  if [ "$lines" -ne 1 ]; then verdict="FAIL ($lines lines on stderr)"; fi
  if [ -n "$cache" ] && ! "$bin/recycle-inspect" --cache "$cache" --verify >/dev/null 2>&1; then
    verdict="FAIL (cache $cache no longer verifies)"
  fi
  [ "$verdict" = ok ] || failures=$((failures + 1))
  echo "$verdict: $what: exit $code: $msg"
  rows+=("| $what | $code | \`$msg\` |")
}

# IDX files: a copy of the test split, broken in one way each.
idx() {  # idx NAME: a directory with good test-split files to break
  local d="$work/$1"; mkdir -p "$d"
  cp "$fm"/t10k-* "$d/"; echo "$d"
}
d=$(idx short);   gzip -dc "$fm/t10k-images-idx3-ubyte.gz" | head -c 1000000 >"$d/t10k-images-idx3-ubyte.gz"
case_ "IDX images with short data (plain file cut at 1 MB)" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
d=$(idx magic);   { printf '\x00\x00\x09\x03'; gzip -dc "$fm/t10k-images-idx3-ubyte.gz" | tail -c +5; } >"$d/t10k-images-idx3-ubyte.gz"
case_ "IDX images with a wrong magic (type code 0x09)" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
d=$(idx counts);  cp "$fm/train-labels-idx1-ubyte.gz" "$d/t10k-labels-idx1-ubyte.gz"
case_ "IDX image and label counts that disagree (10,000 vs 60,000)" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
d=$(idx gzcut);   head -c 200000 "$fm/t10k-images-idx3-ubyte.gz" >"$d/t10k-images-idx3-ubyte.gz"
case_ "gzip stream cut short" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
d=$(idx gzbad);   { head -c 5000 "$fm/t10k-images-idx3-ubyte.gz"; head -c 5000 /dev/urandom; tail -c +10001 "$fm/t10k-images-idx3-ubyte.gz"; } >"$d/t10k-images-idx3-ubyte.gz"
case_ "gzip stream with 5 KB of garbage inside" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
d=$(idx label);   { gzip -dc "$fm/t10k-labels-idx1-ubyte.gz" | head -c 8; printf '\x0c'; gzip -dc "$fm/t10k-labels-idx1-ubyte.gz" | tail -c +10; } >"$d/t10k-labels-idx1-ubyte.gz"
case_ "a label outside Fashion-MNIST's classes (12)" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$d" --split test --recycle 0.5 --cache "$good"
case_ "missing data directory" 1 "$good" "$bin/recycle-build" --data fashion-mnist:/nonexistent --split test --recycle 0.5 --cache "$good"

# TSV files.
printf '0\tgood line\n1 no tab here\n' >"$work/notab.tsv"
case_ "TSV line without a tab" 1 "" "$bin/recycle-build" --data "tsv:$work/notab.tsv" --recycle 0.5 --cache "$work/tsv-cache"
printf '0\tgood line\n1\t\n' >"$work/empty.tsv"
case_ "TSV line with empty text" 1 "" "$bin/recycle-build" --data "tsv:$work/empty.tsv" --recycle 0.5 --cache "$work/tsv-cache"
printf '0\tgood line\n1\tbad \xff\xfe bytes\n' >"$work/utf8.tsv"
case_ "TSV text that is not UTF-8" 1 "" "$bin/recycle-build" --data "tsv:$work/utf8.tsv" --recycle 0.5 --cache "$work/tsv-cache"
{ printf '0\t'; head -c 3000000 /dev/zero | tr '\0' a; printf '\n'; } >"$work/long.tsv"
case_ "TSV line of 3 MB (limit 1 MiB)" 1 "" "$bin/recycle-build" --data "tsv:$work/long.tsv" --recycle 0.5 --cache "$work/tsv-cache"
: >"$work/none.tsv"
case_ "empty TSV file" 1 "" "$bin/recycle-build" --data "tsv:$work/none.tsv" --recycle 0.5 --cache "$work/tsv-cache"

# Nonsense flags.
case_ "--recycle 1.7" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --recycle 1.7 --cache "$good"
case_ "--batch 0" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --recycle 0.5 --batch 0 --cache "$good"
case_ "--classes 12 (no such class)" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --classes 12 --recycle 0.5 --cache "$good"
case_ "--split validation (no such split)" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split validation --recycle 0.5 --cache "$good"
case_ "--codec int3" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --recycle 0.5 --codec int3 --cache "$good"
case_ "--epochs 0" 2 "$good" "$bin/recycle-train" --cache "$good" --epochs 0
case_ "an unknown flag" 2 "$good" "$bin/recycle-train" --cache "$good" --turbo
case_ "recycle-train on a missing cache directory" 1 "" "$bin/recycle-train" --cache "$work/nowhere"
case_ "recycle-inspect on a directory that is not a cache" 1 "" "$bin/recycle-inspect" --cache "$work"
case_ "--rebuild on a directory that is not a cache" 2 "" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --recycle 0.5 --rebuild --cache "$work/short"
case_ "another codec than the cache's" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --codec fp32 --cache "$good"
case_ "another split point than the cache's" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.75 --cache "$good"
case_ "another keyer than the cache's" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --keyer id --cache "$good"
case_ "other weights than the cache's (another seed)" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --seed 1 --cache "$good"

# Identity, deletion, links, lost output, silent surprises, messages.
"$bin/recycle-train" --data fashion-mnist --split test --limit 100 --width 4 --recycle 0 --epochs 1 \
  --eval-split none --save-model "$work/enc.pt" >/dev/null 2>&1 \
  || { echo "hostile_inputs: could not train the small encoder" >&2; exit 1; }
mkdir -p "$work/shape32"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x28\x00\x00\x00\x20\x00\x00\x00\x20'; head -c 40960 /dev/urandom; } >"$work/shape32/t10k-images-idx3-ubyte.gz"
{ printf '\x00\x00\x08\x01\x00\x00\x00\x28'; head -c 40 /dev/zero; } >"$work/shape32/t10k-labels-idx1-ubyte.gz"
case_ "inputs of another shape (32x32 images into a 28x28 cache)" 1 "$good" "$bin/recycle-build" --data "fashion-mnist:$work/shape32" --split test --recycle 0.5 --cache "$good"
mkdir -p "$work/lookalike" && for f in CURRENT 000001.sst MANIFEST-000001 notes.txt; do echo mine >"$work/lookalike/$f"; done
case_ "--rebuild on RocksDB-like file names beside the user's own files" 2 "" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --recycle 0.5 --rebuild --cache "$work/lookalike"
if [ "$(ls "$work/lookalike" | wc -l)" -ne 4 ]; then echo "FAIL: --rebuild deleted files that are not a cache's" >&2; failures=$((failures + 1)); fi
ln -s "$work/nowhere" "$work/dangling"
case_ "a dangling symbolic link as --cache" 2 "" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --recycle 0.5 --cache "$work/dangling"
if [ -e "$work/nowhere" ] || [ ! -L "$work/dangling" ]; then echo "FAIL: the dangling link was replaced" >&2; failures=$((failures + 1)); fi
case_ "--json into a full device (/dev/full)" 1 "$good" bash -c "\"$bin/recycle-inspect\" --cache \"$good\" --json >/dev/full"
case_ "--json with stdout closed" 1 "$good" bash -c "\"$bin/recycle-inspect\" --cache \"$good\" --json >&-"
case_ "recycle-train --cache with --limit (the cache fixes the data)" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --limit 5
case_ "recycle-train --cache with --classes" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --classes 1-2
case_ "recycle-train --cache with --no-cache" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --no-cache
case_ "recycle-train --cache with --width" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --width 8
case_ "--width beside --weights" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --weights "$work/enc.pt" --width 8 --recycle 0.5 --cache "$work/w-cache"
case_ "--recycle 0.3 (between blocks)" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --recycle 0.3 --cache "$work/r-cache"
case_ "--seed -1" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --seed -1
case_ "--lr 0" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --lr 0
case_ "--lr 1e308" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --lr 1e308
case_ "--memory-budget 16 with --batch 4096 (the batches alone are larger)" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --memory-budget 16 --batch 4096
case_ "--preload without --cache" 2 "" "$bin/recycle-train" --data fashion-mnist --split test --preload
case_ "--alternate-preload without --cache" 2 "" "$bin/recycle-train" --data fashion-mnist --split test --alternate-preload
case_ "--preload beside --alternate-preload" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --preload --alternate-preload
case_ "--preload beside --prefetch 2" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --preload --prefetch 2
case_ "--precision fp16 (bf16 or fp32 only)" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --precision fp16
case_ "recycle-train --weights other than the cache's" 1 "$good" "$bin/recycle-train" --cache "$good" --split test --weights "$work/enc.pt"
cp "$work/enc.pt" "$work/bad.pt"; size=$(stat -c %s "$work/bad.pt")
printf '\x55' | dd of="$work/bad.pt" bs=1 seek=$((size / 2)) conv=notrunc status=none
case_ "weights with a flipped byte (their XXH3-128)" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --weights "$work/bad.pt" --recycle 0.5 --cache "$work/crc-cache"
cp -r "$good" "$work/nocurrent"; rm "$work/nocurrent/CURRENT"
case_ "a cache whose CURRENT file is missing" 1 "$good" "$bin/recycle-inspect" --cache "$work/nocurrent"
case_ "recycle-build --cache ''" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --recycle 0.5 --cache ''
case_ "recycle-train --cache ''" 2 "$good" "$bin/recycle-train" --cache ''
case_ "recycle-inspect --cache ''" 2 "$good" "$bin/recycle-inspect" --cache ''
case_ "recycle-bench --ratios 0.3" 2 "$good" "$bin/recycle-bench" --ratios 0.3
case_ "recycle-bench --samples 0" 2 "$good" "$bin/recycle-bench" --samples 0
mkdir -p "$work/fifo" && mkfifo "$work/fifo/t10k-images-idx3-ubyte.gz" && cp "$fm/t10k-labels-idx1-ubyte.gz" "$work/fifo/"
case_ "a FIFO in place of a data file" 1 "$good" timeout 120 "$bin/recycle-build" --data "fashion-mnist:$work/fifo" --split test --recycle 0.5 --cache "$work/fifo-cache"

# --save-model onto a path it cannot replace (a directory): one line, the directory as it was,
# and no temporary file left beside it (refused before training since the output paths are
# checked first).
mkdir -p "$work/saves/enc.pt"
case_ "--save-model onto a directory" 2 "$good" "$bin/recycle-train" --data fashion-mnist --split test --limit 100 --width 4 --recycle 0 --epochs 1 --eval-split none --save-model "$work/saves/enc.pt"
if [ ! -d "$work/saves/enc.pt" ] || [ "$(ls -A "$work/saves" | wc -l)" -ne 1 ]; then
  echo "FAIL: a failed --save-model left a temporary file or replaced the directory" >&2; failures=$((failures + 1))
fi

# Augmented views: bad specs and counts refused before any work; a split of views rebuilt with
# another count, or without views, refused as stale (the views cache still verifies).
views="$work/views-cache"
"$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment hflip,crop=2 --views 2 --cache "$views" >/dev/null 2>&1 \
  || { echo "hostile_inputs: could not build the views cache" >&2; exit 1; }
case_ "--augment blur=3 (no such op)" 2 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment blur=3 --views 2 --cache "$views"
case_ "--augment crop=0" 2 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment crop=0 --views 2 --cache "$views"
case_ "--augment without --views" 2 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment hflip --cache "$views"
case_ "--views 0" 2 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment hflip --views 0 --cache "$views"
case_ "--views 3 on a split built with 2" 1 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment hflip,crop=2 --views 3 --cache "$views"
case_ "a split of views rebuilt without --augment" 1 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --cache "$views"
printf '0\tsome text\n1\tmore text\n' >"$work/aug.tsv"
case_ "--augment on text data" 2 "" "$bin/recycle-build" --data "tsv:$work/aug.tsv" --recycle 0.5 --augment hflip --views 2 --cache "$work/aug-text"
case_ "recycle-train --cache with --augment (views are built)" 2 "$views" "$bin/recycle-train" --cache "$views" --split test --augment hflip
case_ "recycle-train --preload on a split of views" 2 "$views" "$bin/recycle-train" --cache "$views" --split test --eval-split none --preload

# Shards (--sharded, docs/scale.md).
case_ "recycle-build --nproc 2 --sharded with one --cache for both ranks" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --recycle 0.5 --nproc 2 --sharded --cache "$good"
case_ "recycle-train --sharded without --cache" 2 "" "$bin/recycle-train" --data fashion-mnist --recycle 0 --sharded
case_ "recycle-train --sharded --sync async" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --nproc 2 --sharded --sync async

# A byte overwritten in an int8 cache's records file: --verify fails with one line.
"$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --codec int8 --cache "$work/flipped" >/dev/null 2>&1
sst=$(ls -S "$work/flipped"/*.sst "$work/flipped"/*.blob 2>/dev/null | head -n 1); size=$(stat -c %s "$sst")
printf '\x55' | dd of="$sst" bs=1 seek=$((size / 3)) conv=notrunc status=none
case_ "recycle-inspect --verify on an int8 cache with a byte overwritten in its records file" 1 "$good" "$bin/recycle-inspect" --cache "$work/flipped" --verify

# A byte overwritten in a blob file (records of 100 KB): verify names the one damaged record and
# notes it; a plain rerun of the build computes it again, and the cache verifies after it.
blob_build=("$bin/recycle-build" --data fashion-mnist --split test --limit 60 --width 32 --recycle 0.25 --codec fp32 --cache "$work/blob")
"${blob_build[@]}" >/dev/null 2>&1
blob=$(ls "$work/blob"/*.blob | head -n 1); size=$(stat -c %s "$blob")
printf '\x40' | dd of="$blob" bs=1 seek=$((size / 2)) conv=notrunc status=none
case_ "recycle-inspect --verify on a cache with a byte overwritten in a blob file" 1 "$good" "$bin/recycle-inspect" --cache "$work/blob" --verify
if "${blob_build[@]}" >/dev/null 2>&1 && "$bin/recycle-inspect" --cache "$work/blob" --verify >/dev/null 2>&1; then
  echo "ok: a plain rerun of the build computes the damaged record again; the cache verifies"
else
  echo "FAIL: after a plain rerun of the build, the cache with a damaged record does not verify"
  failures=$((failures + 1))
fi

# A data-parallel flag refused before any rendezvous.
case_ "--master with an IPv6 address without brackets" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --eval-split none --batch 10 --threads 1 --epochs 1 --world-size 2 --timeout 20 --rank 1 --master ::1:29400

# Data-parallel jobs started by hand on 127.0.0.1 (each case runs one process; the others of its
# job run in the background). Needs python3 for free ports and the stand-in services. The
# port of each case reads PORT in the table. Only with --write-doc: ctest runs the same
# refusals as tests/e2e/rendezvous_test.cc (Rendezvous.*), so the suite does not run them twice.
if [ "$write_doc" -eq 1 ] && command -v python3 >/dev/null 2>&1; then
  free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  # serve KIND PORT: a stand-in service on 127.0.0.1:PORT (silent: accepts and never answers;
  # http: answers every request with 400), in the background until killed.
  serve() {
    python3 - "$1" "$2" <<'PY' &
import socket, sys, time
kind, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(16)
held = []
while True:
    c, _ = s.accept(); held.append(c)
    if kind == "http":
        c.settimeout(5)
        try:
            c.recv(4096); c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
PY
    sleep 1
  }
  base=("$bin/recycle-train" --cache "$good" --split test --eval-split none --batch 10 --threads 1)
  dp=("${base[@]}" --epochs 1 --world-size 2 --timeout 20)
  port=$(free_port)
  case_ "a rank started by hand without RECYCLE_JOB_TOKEN" 2 "$good" env -u RECYCLE_JOB_TOKEN "${dp[@]}" --rank 0 --master "127.0.0.1:$port"
  export RECYCLE_JOB_TOKEN=hostile-inputs  # every job below has one
  # rank1 PORT ARGS...: rank 1 of the job at 127.0.0.1:PORT in the background
  rank1() { local p=$1; shift; "${dp[@]}" --rank 1 --master "127.0.0.1:$p" "$@" >/dev/null 2>&1 & }
  port=$(free_port); rank1 "$port" --seed 2
  case_ "two ranks started with a different --seed (rank 0's line)" 1 "$good" "${dp[@]}" --rank 0 --master "127.0.0.1:$port" --seed 1; wait
  port=$(free_port); rank1 "$port" --bucket-mb 0.01
  case_ "two ranks with --bucket-mb 1 and 0.01" 1 "$good" "${dp[@]}" --rank 0 --master "127.0.0.1:$port" --bucket-mb 1; wait
  port=$(free_port); "${base[@]}" --epochs 1 --world-size 3 --timeout 20 --rank 1 --master "127.0.0.1:$port" >/dev/null 2>&1 &
  case_ "rank 1 started with --world-size 3, rank 0 with 2" 1 "$good" "${dp[@]}" --rank 0 --master "127.0.0.1:$port"; wait
  port=$(free_port); RECYCLE_JOB_TOKEN=beta rank1 "$port"
  case_ "rank 1 with another RECYCLE_JOB_TOKEN than rank 0's" 1 "$good" env RECYCLE_JOB_TOKEN=alpha "${dp[@]}" --rank 0 --master "127.0.0.1:$port"; wait
  port=$(free_port); serve silent "$port"; pid=$!
  case_ "--master port already in use (rank 0)" 1 "$good" "${dp[@]}" --rank 0 --master "127.0.0.1:$port"
  case_ "--master at a listener that never answers (rank 1)" 1 "$good" "${base[@]}" --epochs 1 --world-size 2 --timeout 3 --rank 1 --master "127.0.0.1:$port"
  kill "$pid"; wait "$pid" 2>/dev/null
  port=$(free_port); serve http "$port"; pid=$!
  case_ "--master at an HTTP server (rank 1)" 1 "$good" "${dp[@]}" --rank 1 --master "127.0.0.1:$port"
  kill "$pid"; wait "$pid" 2>/dev/null
  port=$(free_port)
  "${base[@]}" --epochs 300 --world-size 2 --timeout 20 --rank 0 --master "127.0.0.1:$port" >/dev/null 2>&1 & r0=$!
  "${base[@]}" --epochs 300 --world-size 2 --timeout 20 --rank 1 --master "127.0.0.1:$port" >/dev/null 2>&1 & r1=$!
  # The job's two ranks joined (rank 0's store has both as clients, and rank 0 itself) before
  # the second rank 1 comes: a fixed pause is not enough on a loaded machine.
  joined() { [ "$(ss -Htn state established "( sport = :$port )" 2>/dev/null | wc -l)" -ge 2 ]; }
  for _ in $(seq 1 120); do joined && break; sleep 0.5; done
  sleep 1
  case_ "a second process with --rank 1 in a running job" 1 "$good" "${dp[@]}" --rank 1 --master "127.0.0.1:$port"
  kill "$r0" "$r1" 2>/dev/null; wait "$r0" "$r1" 2>/dev/null
  case_ "--master at a host that does not resolve" 1 "$good" "${dp[@]}" --rank 1 --master no-such-host.invalid:29400
  port=""
  unset RECYCLE_JOB_TOKEN
elif [ "$write_doc" -eq 1 ]; then
  echo "skipped: the data-parallel cases need python3"
fi

# Inputs that are not numbers: float32 npy arrays holding a NaN or an infinity (written with
# python3's struct, no numpy needed).
if command -v python3 >/dev/null 2>&1; then
  # npy(path, descr, shape, data): a .npy file (format 1.0) of `shape` holding `data`'s bytes.
  cat >"$work/npyfile.py" <<'PY'
import struct
def npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join(f"{s}, " for s in shape))
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
PY
  for bad in nan inf; do
    PYTHONPATH="$work" python3 - "$work/npy-$bad" "$bad" <<'PY'
import os, struct, sys
from npyfile import npy
d, bad = sys.argv[1], float(sys.argv[2])
os.makedirs(d, exist_ok=True)
vals = [0.5] * (4 * 28 * 28)
vals[28 * 28 + 3] = bad
npy(f"{d}/train_x.npy", "<f4", (4, 1, 28, 28), struct.pack(f"<{len(vals)}f", *vals))
npy(f"{d}/train_y.npy", "|u1", (4,), bytes([0, 1, 0, 1]))
PY
    case_ "npy float32 inputs holding $bad (sample 1)" 1 "$good" "$bin/recycle-build" --data "npy:$work/npy-$bad" --split train --recycle 0.5 --cache "$work/npy-$bad-cache"
  done
fi

# TorchScript files, output paths, flags that need
# data-parallel training, progressive freezing on text, test splits with fewer classes, TSV
# header lines.
case_ "--model torchscript:FILE,xxh3=<a stale digest>" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --model "torchscript:$work/enc.pt,xxh3=00000000000000000000000000000000" --recycle 0.5 --cache "$work/ts-cache"
case_ "--model torchscript:/dev/zero (a device)" 2 "$good" timeout 60 "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --model torchscript:/dev/zero --recycle 0.5 --cache "$work/ts-cache"
case_ "--save-head in a folder that does not exist (checked before training)" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --eval-split none --save-head "$work/missing/head.pt"
case_ "--save-model in a folder that does not exist" 2 "" "$bin/recycle-train" --data fashion-mnist --split test --limit 100 --width 4 --recycle 0 --eval-split none --save-model "$work/missing/enc.pt"
case_ "--save-head ''" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --save-head ''
case_ "--grad-compression fp16 without data-parallel training" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --grad-compression fp16
case_ "--sync average:2 without data-parallel training" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --sync average:2
mkdir -p "$work/text"
three=(ant bee cat) two=(ant cat) wrong=(ant dog)
{ printf 'label\ttext\n'; for i in $(seq 1 30); do printf '%s\twords of %s, line %d\n' "${three[i % 3]}" "${three[i % 3]}" "$i"; done; } >"$work/text/train.tsv"
for i in $(seq 1 6); do printf '%s\twords, line %d\n' "${two[i % 2]}" "$i"; done >"$work/text/test.tsv"
for i in $(seq 1 6); do printf '%s\twords, line %d\n' "${wrong[i % 2]}" "$i"; done >"$work/text/other.tsv"
text_model=(--model transformer:d_model=16,layers=2,heads=2,ff=32,max_tokens=32 --threads 1)
case_ "--freeze on text data" 2 "" "$bin/recycle-train" --data "tsv:$work/text" "${text_model[@]}" --recycle 0 --freeze auto --levels "$work/text-levels"
if ! "$bin/recycle-build" --data "tsv:$work/text" --split train "${text_model[@]}" --recycle 0.5 --cache "$work/text/cache" >/dev/null 2>&1 \
   || ! "$bin/recycle-build" --data "tsv:$work/text" --split test "${text_model[@]}" --recycle 0.5 --cache "$work/text/cache" >/dev/null 2>&1; then
  echo "FAIL: a test split with fewer classes than the train split was refused" >&2; failures=$((failures + 1))
elif ! "$bin/recycle-inspect" --cache "$work/text/cache" --json | tail -n 1 | jq -e '.classes == ["ant", "bee", "cat"]' >/dev/null; then
  echo "FAIL: the TSV header line became a class, or the classes are not the train split's" >&2; failures=$((failures + 1))
fi
case_ "a test split with a class the train split lacks" 1 "$work/text/cache" "$bin/recycle-build" --data "tsv:$work/text" --split other "${text_model[@]}" --recycle 0.5 --cache "$work/text/cache"

# Image bombs, split folders, predict's outputs and flags, devices,
# npy shapes that overflow, augmentations larger than the image, text files in other encodings
# or with a repeated header. PNGs are written with python3's zlib (no imaging library needed).
if command -v python3 >/dev/null 2>&1; then
  python3 - "$work/folder" <<'PY'
import os, struct, sys, zlib
root = sys.argv[1]
def png(path, width, height, depth, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
for c in ("ankle", "boot"):
    os.makedirs(f"{root}/good/{c}", exist_ok=True)
    for i in range(3):
        png(f"{root}/good/{c}/{i}.png", 8, 8, 8, b"".join(b"\x00" + bytes([(i * 40 + c.__len__() * 9) % 256] * 8) for _ in range(8)))
os.makedirs(f"{root}/bomb/a", exist_ok=True)
os.makedirs(f"{root}/bomb/b", exist_ok=True)
png(f"{root}/bomb/a/small.png", 8, 8, 8, b"".join(b"\x00" + bytes(8) for _ in range(8)))
# 32768 x 32768 16-bit gray declared, its rows of zeros compressed: about 2 MB on disk.
png(f"{root}/bomb/b/bomb.png", 32768, 32768, 16, bytes(8 * (1 + 2 * 32768)))
PY
  case_ "a PNG declaring 32768x32768 16-bit pixels (a decompression bomb)" 1 "$good" "$bin/recycle-build" --data "imagefolder:$work/folder/bomb" --recycle 0.5 --cache "$work/bomb-cache"
  case_ "imagefolder --split test on a folder without split folders" 2 "$good" "$bin/recycle-build" --data "imagefolder:$work/folder/good" --split test --recycle 0.5 --cache "$work/folder-cache"
  case_ "imagefolder --split valdation (a typo) on a folder without split folders" 2 "$good" "$bin/recycle-build" --data "imagefolder:$work/folder/good" --split valdation --recycle 0.5 --cache "$work/folder-cache"
  PYTHONPATH="$work" python3 - "$work/npy-huge" <<'PY'
import os, sys
from npyfile import npy
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
npy(f"{d}/train_x.npy", "|u1", (2 ** 32, 1, 2 ** 32, 16), b"")
npy(f"{d}/train_y.npy", "|u1", (2,), bytes([0, 1]))
PY
  case_ "npy shape whose byte count overflows 64 bits (2^32 x 1 x 2^32 x 16)" 1 "$good" "$bin/recycle-build" --data "npy:$work/npy-huge" --recycle 0.5 --cache "$work/npy-huge-cache"
fi
case_ "--device tpu" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --device tpu
case_ "--device cuda on this machine (no GPU here, or a LibTorch without CUDA)" 2 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 10 --recycle 0.5 --device cuda --cache "$work/cuda-cache"
case_ "--augment crop=20 on 28x28 images (views mostly padding)" 2 "$views" "$bin/recycle-build" --data fashion-mnist --split test --limit 60 --recycle 0.5 --augment crop=20 --views 2 --cache "$work/crop-cache"
printf '{"text": "caf\xe9 au lait", "label": 1}\n' >"$work/latin1.jsonl"
case_ "JSONL in Latin-1 (invalid UTF-8)" 1 "" "$bin/recycle-build" --data "jsonl:$work/latin1.jsonl" --recycle 0.5 --cache "$work/jsonl-cache"
printf 'label,text,text\n1,a,b\n' >"$work/twice.csv"
case_ "CSV header naming a column twice" 1 "" "$bin/recycle-build" --data "csv:$work/twice.csv" --recycle 0.5 --cache "$work/csv-cache"
printf 'label,text\n1,a\nlabel,text\n0,b\n' >"$work/joined.csv"
case_ "CSV files joined with cat (the header row again inside)" 1 "" "$bin/recycle-build" --data "csv:$work/joined.csv" --recycle 0.5 --cache "$work/csv-cache"
if "$bin/recycle-train" --cache "$good" --split test --eval-split none --epochs 1 --save-head "$work/head.pt" >/dev/null 2>&1; then
  cp "$work/head.pt" "$work/head.csv"
  case_ "recycle-predict --head h.csv --out h.csv (its own head)" 2 "$good" "$bin/recycle-predict" --cache "$good" --head "$work/head.csv" --data fashion-mnist --limit 10 --out "$work/head.csv"
  if ! cmp -s "$work/head.pt" "$work/head.csv"; then echo "FAIL: predict replaced its own head file" >&2; failures=$((failures + 1)); fi
  case_ "recycle-predict --top-k -1" 2 "$good" "$bin/recycle-predict" --cache "$good" --head "$work/head.pt" --data fashion-mnist --limit 10 --out "$work/p.csv" --top-k -1
  case_ "recycle-predict without --weights on a cache that records none" 2 "$good" "$bin/recycle-predict" --cache "$good" --head "$work/head.pt" --data fashion-mnist --limit 10 --out "$work/p.csv"
else
  echo "FAIL: could not train a head for the predict cases" >&2; failures=$((failures + 1))
fi

# Advice that would lose a cache, and messages that must stay one line.
if "$bin/recycle-build" --data fashion-mnist --split test --limit 50 --weights "$work/enc.pt" --recycle 0.5 \
     --cache "$work/w-built" >/dev/null 2>&1; then
  case_ "recycle-build without --weights on a cache built from --weights (never advises --rebuild)" 1 "$work/w-built" "$bin/recycle-build" --data fashion-mnist --split test --limit 50 --width 4 --recycle 0.5 --cache "$work/w-built"
  if grep -q -- --rebuild "$work/err"; then echo "FAIL: the missing --weights was answered with --rebuild" >&2; failures=$((failures + 1)); fi
else
  echo "FAIL: could not build the cache from --weights" >&2; failures=$((failures + 1))
fi
case_ "recycle-inspect --bogus (an unknown flag, and --cache missing)" 2 "" "$bin/recycle-inspect" --bogus

# A rebuild that would lose a cache, paths a cache names, files that would run code when loaded.
cp -a "$good" "$work/noted" && echo mine >"$work/noted/notes.txt"
case_ "--rebuild of a cache whose directory also holds a user's file (notes.txt)" 2 "$work/noted" "$bin/recycle-build" --data fashion-mnist --split test --limit 200 --recycle 0.5 --rebuild --cache "$work/noted"
if [ -f "$work/w-built/CURRENT" ] && [ -f "$work/head.pt" ]; then
  case_ "recycle-predict without --weights on a cache that records its weights file (never opened)" 2 "$work/w-built" "$bin/recycle-predict" --cache "$work/w-built" --head "$work/head.pt" --data fashion-mnist --limit 10 --out "$work/p.csv"
fi
mkdir -p "$work/logs" && echo mine >"$work/logs/build.log"
case_ "recycle-inspect of a directory holding only a user's build.log" 1 "" "$bin/recycle-inspect" --cache "$work/logs"
cp -a "$good" "$work/emptied" && : >"$work/emptied/CURRENT"
case_ "recycle-inspect of a cache whose CURRENT file was emptied" 1 "" "$bin/recycle-inspect" --cache "$work/emptied"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
  # The module of python/tests/test_hostile_files.py: its __setstate__ prints when loaded.
  PYTHONPATH=python/tests /usr/bin/python3 -c "import sys, torch; from test_hostile_files import Printing; torch.jit.script(Printing()).save(sys.argv[1])" "$work/crafted.pt"
  ran_nothing() {
    if grep -q RAN-CODE "$work/out" "$work/err"; then echo "FAIL: $1 ran the file's code" >&2; failures=$((failures + 1)); fi
  }
  case_ "--weights: a TorchScript file whose loading prints (older format, never loaded)" 1 "$good" "$bin/recycle-build" --data fashion-mnist --split test --limit 20 --weights "$work/crafted.pt" --recycle 0.5 --cache "$work/crafted-cache"
  ran_nothing "recycle-build --weights"
  if [ -f "$work/w-built/CURRENT" ]; then
    case_ "--head: a TorchScript file whose loading prints (older format, never loaded)" 1 "$work/w-built" "$bin/recycle-predict" --cache "$work/w-built" --head "$work/crafted.pt" --weights "$work/enc.pt" --data fashion-mnist --limit 10 --out "$work/p.csv"
    ran_nothing "recycle-predict --head"
  fi
  cp "$work/crafted.pt" "$work/crafted.ckpt"
  case_ "--checkpoint: a TorchScript file whose loading prints (older format, never loaded)" 1 "$good" "$bin/recycle-train" --cache "$good" --split test --eval-split none --epochs 1 --checkpoint "$work/crafted.ckpt"
  ran_nothing "recycle-train --checkpoint"
fi
case_ "--device with a newline in it (cpu, newline, cpu)" 2 "$good" "$bin/recycle-train" --cache "$good" --split test --device "cpu
cpu"

# A read-only cache directory and a full disk (small tmpfs filesystems).
if [ "$(id -u)" -eq 0 ] && mkdir -p "$work/ro" && mount -t tmpfs -o size=8m tmpfs "$work/ro" 2>/dev/null; then
  mounts+=("$work/ro")
  cp -a "$good" "$work/ro/cache"
  mount -o remount,ro "$work/ro"
  case_ "a cache on a read-only filesystem (build)" 1 "$work/ro/cache" "$bin/recycle-build" --data fashion-mnist --split train --limit 100 --recycle 0.5 --cache "$work/ro/cache"
  mkdir -p "$work/full" && mount -t tmpfs -o size=256m tmpfs "$work/full" && mounts+=("$work/full")
  "$bin/recycle-build" --data fashion-mnist --split test --limit 100 --recycle 0.5 --cache "$work/full/cache" >/dev/null 2>&1
  case_ "a disk filling up during a build (256 MB filesystem, 24,000 records of 12.5 KB)" 1 "$work/full/cache" "$bin/recycle-build" --data fashion-mnist --split train --limit 24000 --recycle 0.5 --cache "$work/full/cache"
  if ! "$bin/recycle-inspect" --cache "$work/full/cache" --verify --json | tail -n 1 \
       | jq -e '.splits.test.complete and .splits.test.samples == 100 and .corrupt == 0' >/dev/null; then
    echo "FAIL: the split built before the disk filled is no longer complete" >&2; failures=$((failures + 1))
  fi
else
  echo "skipped: read-only and full-disk cases need root and tmpfs mounts"
fi

if [ "$write_doc" -eq 1 ]; then
  {
    echo "# Hostile and broken input"
    echo
    echo "Made by \`bash scripts/hostile_inputs.sh --write-doc\`, which runs every case below with the real"
    echo "tools and checks: a non-zero exit (1 for failures, 2 for bad usage), exactly one line on"
    echo "stderr, and that a cache built before the case still passes \`recycle-inspect --verify\`. The"
    echo "test suite runs the same script (ctest test \`hostile_inputs\`), without the data-parallel cases"
    echo "started by hand (from \"a rank started by hand without RECYCLE_JOB_TOKEN\" to \"--master at a host"
    echo "that does not resolve\"), which tests/e2e/rendezvous_test.cc checks there. TMP stands for a"
    echo "temporary directory."
    echo
    echo "| input | exit | message (stderr) |"
    echo "| --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    echo
    torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$bin/CMakeCache.txt" 2>/dev/null)
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    echo "Written by the tools built against the LibTorch in \`${torch_dir:-?}\`, on ${cpu:-an unknown CPU}:"
    echo "${#rows[@]} cases, $failures failed."
  } >docs/hostile-inputs.md
  echo "wrote docs/hostile-inputs.md"
fi
echo "hostile inputs: ${#rows[@]} cases, $failures failed"
[ "$failures" -eq 0 ]
