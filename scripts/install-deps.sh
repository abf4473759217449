#!/usr/bin/env bash
# Installs what sacplan needs to build and test: Debian's packages, LibTorch
# from PyTorch's wheel on PyPI (the executor, modules and CPU profiler), and
# the Python bridge sacplan_torch (python/, editable, with its planner
# extension built from this checkout) with pytest.
# Shared by the README's Quick start commands and by .ci/run; safe to re-run:
# packages already present are skipped without touching the network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build
  nlohmann-json3-dev libeigen3-dev libabsl-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  chromium  # headless, for the report's browser test (tests/reports)
  clang libclang-rt-14-dev  # the sanitizer build (preset "asan"): sanitizers, libFuzzer
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

# LibTorch: the PyTorch wheel carries it (and its own MKL BLAS, so the slow
# reference BLAS is never used). 2.11.0 is what the GPU machines run; if that
# pin cannot be installed, take the newest wheel that can.
torch_pin=2.11.0
if ! python3 -c 'import torch' >/dev/null 2>&1; then
  echo "sacplan: installing torch==${torch_pin} from PyPI" >&2
  if ! python3 -m pip install --quiet "torch==${torch_pin}"; then
    echo "sacplan: torch==${torch_pin} did not install; trying the newest torch" >&2
    python3 -m pip install --quiet torch
  fi
fi

# Python packages the bridge and its tests import besides torch, as
# module:package. torch's wheel does not require NumPy, yet
# torch.distributed's *_object collectives (the FSDP and Ulysses tests) and
# torch's import need it; pytest-xdist runs the bridge's tests on both cores.
for pair in numpy:numpy pytest:pytest xdist:pytest-xdist; do
  module="${pair%%:*}" package="${pair#*:}"
  if ! python3 -c "import ${module}" >/dev/null 2>&1; then
    echo "sacplan: installing ${package} from PyPI" >&2
    python3 -m pip install --quiet "${package}"
  fi
done

# The libraries users build their models with, at the versions the
# real-library tests (python/tests/test_real_libraries.py) were written
# against: diffusers' video and image DiTs, transformers' LLMs.
for pin in diffusers==0.42.1 transformers==5.23.0; do
  package="${pin%%==*}" version="${pin#*==}"
  if [ "$(python3 -c "import importlib.metadata as m; print(m.version('${package}'))" 2>/dev/null)" != "${version}" ]; then
    echo "sacplan: installing ${pin} from PyPI" >&2
    python3 -m pip install --quiet "${pin}"
  fi
done

# The bridge to PyTorch trainers, installed editable from this checkout every
# time (a clone elsewhere must not keep importing an older checkout's copy).
# pip builds its planner extension (sacplan_torch._planner) with CMake from
# this checkout, fetching scikit-build-core and nanobind from PyPI for the
# build; python/build/ keeps the objects, so a re-install recompiles only
# what changed (about 90 s the first time on 2 cores).
python3 -m pip install --quiet --no-deps -e python/
