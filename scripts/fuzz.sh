#!/usr/bin/env bash
# Builds the libFuzzer harnesses in fuzz/ with clang (libFuzzer + ASan + UBSan) into
# build-fuzz/, a CMake build dir of the project with RECYCLE_BUILD_FUZZERS=ON (the harnesses
# link recycle_data and recycle_cache as targets, instrumented too), then runs each one for a
# bounded time on a scratch copy of its seed corpus (fuzz/corpus/<target>/ is never modified)
# and prints, per harness, the number of executions
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
# Installs the project's packages (scripts/setup.sh), clang, its OpenMP and its libFuzzer
# runtime with apt-get when they are missing.
# Exits non-zero when a build fails or any harness crashes.
set -euo pipefail
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
# The project's own packages (the whole CMake project is configured, though only the harnesses
# and the libraries they link are built), then clang and its OpenMP (recycle_keyers links it).
bash scripts/setup.sh >&2
missing=()
installed libomp-dev || missing+=(libomp-dev)
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
# fuzz/CMakeLists.txt (option RECYCLE_BUILD_FUZZERS) makes each harness an executable linking
# the libraries it needs by target; the flags below instrument those libraries too (coverage,
# ASan, UBSan), and the harnesses add -fsanitize=fuzzer when linking.
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $t "*) ;;
    *) echo "fuzz: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done
sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
mkdir -p "$out"
cmake -S . -B "$out" -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DRECYCLE_BUILD_FUZZERS=ON -DRECYCLE_BUILD_TESTS=OFF -DRECYCLE_BUILD_EXAMPLES=OFF \
  -DRECYCLE_BUILD_BENCH=OFF >"$out/configure.log" 2>&1 ||
  { cat "$out/configure.log" >&2; echo "fuzz: configure failed" >&2; exit 1; }
# Two cores: at most two compilers at a time.
cmake --build "$out" -j 2 --target "${targets[@]/%/_fuzz}" >&2 ||
  { echo "fuzz: build failed" >&2; exit 1; }
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
