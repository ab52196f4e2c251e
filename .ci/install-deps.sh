#!/usr/bin/env bash
# Install the Debian 12 packages lcextend needs, only those missing (needs root or sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config
      libjansson-dev libzstd-dev zlib1g-dev libxxhash-dev libopenblas-dev libopenmpi-dev openmpi-bin libyaml-dev libpcre2-dev
      clang libclang-rt-14-dev zstd bible-kjv bible-kjv-text python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
