#!/usr/bin/env bash
# Builds the libFuzzer harnesses in fuzz/ with clang (libFuzzer + ASan + UBSan) into
# build-fuzz/, then runs each one for a bounded time on a scratch copy of its seed corpus
# (fuzz/corpus/<target>/ is never modified) and prints, per harness, the number of executions
# and crashes. A crash (sanitizer report, failed check, unexpected exception, OOM, timeout)
# leaves its input in build-fuzz/artifacts/<target>/.
#
# Usage: scripts/fuzz.sh [target ...]        (targets: idx_reader tsv_reader record manifest)
#   FUZZ_SECONDS=60   seconds per harness (libFuzzer -max_total_time)
#   FUZZ_FLAGS=...    extra libFuzzer flags, e.g. "-rss_limit_mb=4096"
#   FUZZ_KEEP_GOING=1 keep fuzzing after a crash (libFuzzer -fork=1 -ignore_crashes=1 ...), to
#                     count every crash in the time given; executions are then read from the
#                     last "#N: cov: ..." line, as fork mode prints no final stats
#   FUZZ_BUILD_ONLY=1 build and stop
# Installs clang and its libFuzzer runtime with apt-get when they are missing.
# Exits non-zero when a build fails or any harness crashes.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

all_targets=(idx_reader tsv_reader record manifest)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
seconds="${FUZZ_SECONDS:-60}"
out=build-fuzz

# ---- what we need ----------------------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
apt_install() {
  local sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  echo "fuzz: installing $*" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "$@" >&2
}
# Headers and libraries the harnesses compile against (c10's half-float header comes with
# libtorch-dev; nothing of LibTorch is linked).
missing=()
for p in zlib1g-dev libxxhash-dev nlohmann-json3-dev libtorch-dev; do
  installed "$p" || missing+=("$p")
done
command -v clang++ >/dev/null || missing+=(clang)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
# libFuzzer's runtime ships separately (libclang-rt-N-dev) on Debian: try a trivial link.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/p.cc"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/p.cc" -o "$probe_dir/p" 2>/dev/null; then
  major=$(clang++ -dumpversion | cut -d. -f1)
  apt_install "libclang-rt-${major}-dev"
  clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/p.cc" -o "$probe_dir/p"
fi

# ---- build -----------------------------------------------------------------------------------
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
cxxflags=(-std=c++17 -O1 -g -I. -Wall -Wextra -Wno-unused-parameter "${sanitize[@]}")
# The project sources each harness needs (compiled once, instrumented for coverage).
declare -A sources=(
  [idx_reader]="engine/data/idx_reader.cc"
  [tsv_reader]="engine/data/tsv_reader.cc"
  [record]="cache/record.cc cache/record_layout.cc cache/codec.cc"
  [manifest]="cache/manifest.cc cache/record_layout.cc cache/record.cc cache/codec.cc"
)
mkdir -p "$out/obj"
# cache/codec.cc picks its F16C path with __builtin_cpu_supports("f16c"), which clang 14
# rejects; such a clang gets an equivalent CPUID check force-included (no source change).
declare -A extra_flags=()
printf 'int main() { return __builtin_cpu_supports("f16c"); }\n' >"$probe_dir/cpu.cc"
if ! clang++ -c "$probe_dir/cpu.cc" -o "$probe_dir/cpu.o" 2>/dev/null; then
  extra_flags[cache/codec.cc]="-include fuzz/cpu_supports_compat.h"
fi

# Compiles $1 to $2 unless $2 is newer than $1 and every header it included last time.
compile() {
  local src=$1 obj=$2 extra=$3 dep="${2%.o}.d" stale=0
  if [ ! -f "$obj" ] || [ ! -f "$dep" ] || [ "$self" -nt "$obj" ]; then  # flags live here
    stale=1
  else
    for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$dep"); do
      if [ "$f" -nt "$obj" ]; then stale=1; break; fi
    done
  fi
  [ $stale -eq 1 ] || return 0
  echo "fuzz: compiling $src" >&2
  # shellcheck disable=SC2086
  clang++ "${cxxflags[@]}" $extra -MMD -MF "$dep" -c "$src" -o "$obj"
}

# Two cores: at most two compilers at a time.
pids=()
spawn() {
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 0.2; done
  compile "$@" &
  pids+=($!)
}
for t in "${targets[@]}"; do
  [ -n "${sources[$t]+x}" ] || { echo "fuzz: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
  for s in ${sources[$t]}; do
    spawn "$s" "$out/obj/$(echo "$s" | tr / _).o" "-fsanitize=fuzzer-no-link ${extra_flags[$s]:-}"
  done
  spawn "fuzz/${t}_fuzz.cc" "$out/obj/${t}_fuzz.o" -fsanitize=fuzzer-no-link
done
build_failed=0
for pid in "${pids[@]}"; do wait "$pid" || build_failed=1; done
[ $build_failed -eq 0 ] || { echo "fuzz: build failed" >&2; exit 1; }
for t in "${targets[@]}"; do
  objs=("$out/obj/${t}_fuzz.o")
  for s in ${sources[$t]}; do objs+=("$out/obj/$(echo "$s" | tr / _).o"); done
  clang++ "${cxxflags[@]}" -fsanitize=fuzzer "${objs[@]}" -lxxhash -lz -o "$out/${t}_fuzz"
done
echo "fuzz: built ${targets[*]} in $out/" >&2
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0

# ---- run -------------------------------------------------------------------------------------
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
declare -A dicts=([manifest]=fuzz/manifest.dict)
results=()
any_crash=0
for t in "${targets[@]}"; do
  run="$out/run/$t"
  rm -rf "$run" "$out/artifacts/$t"
  mkdir -p "$run/corpus" "$out/artifacts/$t"
  cp fuzz/corpus/"$t"/* "$run/corpus/" 2>/dev/null || true
  flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048
         -artifact_prefix="$out/artifacts/$t/")
  [ -n "${dicts[$t]+x}" ] && flags+=(-dict="${dicts[$t]}")
  keep_going="${FUZZ_KEEP_GOING:-0}"
  [ "$keep_going" = 1 ] && flags+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  echo "fuzz: running $t for ${seconds}s (log: $run/fuzz.log)" >&2
  code=0
  # shellcheck disable=SC2086
  "$out/${t}_fuzz" "${flags[@]}" ${FUZZ_FLAGS:-} "$run/corpus" >"$run/fuzz.log" 2>&1 || code=$?
  if [ "$keep_going" = 1 ]; then
    execs=$(grep -aoE '^#[0-9]+: cov:' "$run/fuzz.log" | tail -1 | tr -dc 0-9)
  else
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/fuzz.log" | tail -1)
  fi
  # Inputs that crashed, ran out of memory, timed out or leaked (slow-unit-* files are only
  # reports of slow inputs, listed apart).
  crashes=$(find "$out/artifacts/$t" -type f \( -name 'crash-*' -o -name 'oom-*' -o \
    -name 'timeout-*' -o -name 'leak-*' \) | wc -l)
  slow=$(find "$out/artifacts/$t" -type f -name 'slow-unit-*' | wc -l)
  corpus=$(find "$run/corpus" -type f | wc -l)
  if [ "$code" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without an artifact
  results+=("$(printf '%-11s executions %-10s crashes %s  slow inputs %s  corpus %s  exit %s' \
    "$t" "${execs:-?}" "$crashes" "$slow" "$corpus" "$code")")
  [ -n "$execs" ] || any_crash=1  # no statistics: something went wrong
  if [ "$crashes" -ne 0 ]; then
    any_crash=1
    echo "fuzz: $t CRASHED; inputs:" >&2
    find "$out/artifacts/$t" -type f ! -name 'slow-unit-*' >&2
    grep -a -m1 -A30 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error:|FUZZ CHECK FAILED' \
      "$run/fuzz.log" | grep -av 'NEW_FUNC' >&2 || tail -40 "$run/fuzz.log" >&2
  fi
done

echo "fuzz: results (${seconds}s each)"
printf '  %s\n' "${results[@]}"
exit $any_crash
