#!/usr/bin/env bash
# Installs nnc's build and test dependencies from Debian 12's packages (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(cmake make g++ ccache git default-jre-headless antlr4 libantlr4-runtime-dev llvm-19-dev
      libfmt-dev nlohmann-json3-dev libgtest-dev googletest zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
