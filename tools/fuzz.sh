#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang 14 (AddressSanitizer and
# UndefinedBehaviorSanitizer, -fsanitize=fuzzer-no-link on all of nnc's code) into
# build-fuzz/, then runs each for SECONDS (default 60) from its committed seed corpus
# tests/fuzz/corpus/<target>/, one process and one worker at a time. New inputs go to
# build-fuzz/corpus/<target>/ (not committed); a crash leaves its input in
# build-fuzz/artifacts/ and fails the script: make it a regression test.
#
#   bash tools/fuzz.sh [SECONDS] [TARGET...]     targets: frontend safetensors npy raw_input weight_map
#
# Needs clang-14 and libclang-rt-14-dev (libFuzzer, the sanitizer runtimes); installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frontend safetensors npy raw_input weight_map)

if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
fi

# clang 14 cannot compile one header that ANTLR 4.9's umbrella header pulls in
# (misc/InterpreterDataReader.h: "call to implicitly-deleted default constructor");
# nnc uses nothing from it. The shim is the umbrella header without that one line, put
# on the include path ahead of the real one (which is a -isystem directory).
shim="$PWD/build-fuzz/antlr-shim"
mkdir -p "$shim"
grep -v 'misc/InterpreterDataReader.h' /usr/include/antlr4-runtime/antlr4-runtime.h > "$shim/antlr4-runtime.h"

flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -I$shim"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNNC_FUZZ=ON \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-fuzz -j2 --target $(printf 'fuzz_%s ' "${targets[@]}")

mkdir -p build-fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== fuzz_$t for ${seconds}s"
  # -timeout (wall clock): a program at the front end's limit of 1,000,000 layers is a
  # valid input and takes ~11 s of CPU under the sanitizers and coverage (~2 s in a
  # Release build), longer on a loaded machine: 60 s for the front end, 10 s for the
  # readers. -rss_limit_mb: nnc's own limits keep a run far below it.
  timeout=10
  [ "$t" = frontend ] && timeout=60
  NNC_CACHE=off ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-fuzz/tests/fuzz/fuzz_$t" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" \
      -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/${t}-" 2>"build-fuzz/fuzz_$t.log" || status=1
  grep -E '^#[0-9]+ +(DONE|INITED)|stat::number_of_executed_units|stat::peak_rss_mb|ERROR|SUMMARY' "build-fuzz/fuzz_$t.log" || true
done
exit $status
