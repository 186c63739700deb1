#!/usr/bin/env bash
# Installs nnc from ./build into a fresh prefix, builds examples/host_app against the
# installed CMake package (find_package(nnc CONFIG)), and runs it on the digits model
# from 8 threads at once. Run after tools/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d /tmp/nnc-install.XXXXXX)
trap 'rm -rf "$prefix" build-host-app' EXIT
cmake --install build --prefix "$prefix" >/dev/null
cmake -S examples/host_app -B build-host-app -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-host-app -j"$(nproc)" >/dev/null
NNC_CACHE=off build-host-app/host_app examples/digits/digits.nn examples/digits/digits.safetensors 5
