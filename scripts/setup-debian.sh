#!/usr/bin/env bash
# Installs what dtplan needs on Debian 12 (bookworm), as root. Idempotent: when every package
# is already installed it changes nothing and does not touch the network.
set -euo pipefail
packages=(
  g++ cmake ninja-build make pkg-config python3 python3-venv shellcheck clang-format chromium
  clang libclang-rt-14-dev
  libyaml-cpp-dev libfmt-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup-debian: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
echo "setup-debian: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
