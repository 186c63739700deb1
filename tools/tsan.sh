#!/usr/bin/env bash
# Builds the public API's tests with clang and ThreadSanitizer (build-tsan/) and runs the
# threaded ones: one Model run from 8 threads at once, models compiled on several
# threads at once, decoders of one DecoderModel on 4 threads at once, a Model run from
# 4 threads while the free cores pack its weights, weights loaded again while threads
# run and decode, and (test_runtime) the runtime's
# model that runs while they are made, and runs handed to a thread of nnc's own from a
# small stack (KernelStack). JIT-compiled kernels and Debian's LLVM are not instrumented, so TSan
# checks nnc's own code around them (workspaces, the thread pool, the kernel cache).
# The compiler is GCC 12 with its ThreadSanitizer (libtsan, the same runtime as clang's):
# clang 14 cannot compile the ANTLR 4.9 runtime's headers that the parser includes
# (misc/InterpreterDataReader.h: "call to implicitly-deleted default constructor").
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_api test_runtime
export NNC_CACHE=off TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
build-tsan/tests/test_api --gtest_filter='Api.*Thread*:Api.*Compil*:ApiDecoder.*Thread*:ApiDecoder.WeightsLoaded*'
build-tsan/tests/test_runtime --gtest_filter='WeightsWhileRunning.*:KernelStack.*'
