#!/usr/bin/env bash
# Installs what sacplan needs to build and test, from Debian's packages only.
# Shared by the README's Quick start commands and by .ci/run; safe to re-run:
# packages already present are skipped without touching the network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  nlohmann-json3-dev libeigen3-dev libabsl-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "sacplan: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
