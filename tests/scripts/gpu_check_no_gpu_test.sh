#!/usr/bin/env bash
# scripts/gpu-check.sh on a machine without a usable GPU: one line on
# stderr naming the reason, exit status 2, nothing on stdout, nothing
# written. A fake nvidia-smi first on PATH plays each missing-GPU case, so
# this runs the same on machines with and without a GPU.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect_no_gpu CASE NEEDLE: runs the script with the fake tools in
# $tmp/CASE/bin and checks the outcome.
expect_no_gpu() {
  local case_dir="$tmp/$1" needle=$2
  local out_dir="$case_dir/out"
  PATH="$case_dir/bin:$PATH" SACPLAN_GPU_CHECK_DIR="$out_dir" \
    bash "$root/scripts/gpu-check.sh" >"$case_dir/stdout" 2>"$case_dir/stderr"
  local status=$?
  local lines
  lines=$(wc -l <"$case_dir/stderr")
  if [ "$status" -ne 2 ]; then
    echo "$1: exit status $status, expected 2"; failures=$((failures + 1))
  fi
  if [ "$lines" -ne 1 ] || ! grep -q "^gpu-check: no GPU: .*$needle" "$case_dir/stderr"; then
    echo "$1: stderr is not one line naming '$needle':"; cat "$case_dir/stderr"
    failures=$((failures + 1))
  fi
  if [ -s "$case_dir/stdout" ] || [ -e "$out_dir" ]; then
    echo "$1: wrote output without a GPU"; failures=$((failures + 1))
  fi
}

fake_tool() {  # fake_tool CASE NAME BODY
  mkdir -p "$tmp/$1/bin"
  printf '#!/usr/bin/env bash\n%s\n' "$3" >"$tmp/$1/bin/$2"
  chmod +x "$tmp/$1/bin/$2"
}

# The driver does not answer (what nvidia-smi does in a container without GPUs).
fake_tool driver_down nvidia-smi \
  'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."; exit 9'
expect_no_gpu driver_down "nvidia-smi failed"

# The driver answers but lists no GPU.
fake_tool no_devices nvidia-smi 'exit 0'
expect_no_gpu no_devices "lists no GPU"

# A GPU is listed but LibTorch cannot use it.
fake_tool torch_blind nvidia-smi 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"'
fake_tool torch_blind python3 'exit 1'
expect_no_gpu torch_blind "torch.cuda.is_available"

[ "$failures" -eq 0 ] && echo "gpu-check without a GPU: all cases exit 2 with one line"
exit $((failures > 0))
