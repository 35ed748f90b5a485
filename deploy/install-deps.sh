#!/usr/bin/env bash
# Installs everything tdstore needs to build, test and run, from Debian 12
# packages only. Safe to run again: apt skips what is installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libhiredis-dev libabsl-dev libtorch-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  redis-server redis-tools
  python3 python3-numpy python3-venv  # python3-venv: deploy/python-env.sh
  zlib1g-dev
  docker-compose python3-yaml  # deploy/check.sh validates the deploy files
  clang-14 libclang-rt-14-dev  # tests/fuzz: clang and its libFuzzer/ASan/UBSan runtimes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
