#!/usr/bin/env bash
# Everything sacplan can only check on a GPU, in one command, with a JSON
# summary (docs/gpu.md says how to read it):
#  1. builds with CUDA (preset "default", CUPTI profiler on) and checks that
#     the CUDA profiler was built, or takes a build staged elsewhere by
#     scripts/gpu-bundle.sh (SACPLAN_GPU_CHECK_PREBUILT);
#  2. the kernels' parity with ATen and the CUDA profiler's tests (ctest -L
#     gpu) and the kernels' speed-up (bench_kernels), or "not built" when
#     this build has none: short, so they run before the long steps;
#  3. the PyTorch bridge on CUDA (scripts/gpu_bridge_check.py): capture,
#     plans, apply, allocated and reserved peaks and step time;
#  4. profiles wan2.1-1.3b with --device cuda at a reduced size and at the
#     full 72,000 tokens (77 frames at 720x1280);
#  5. plans none, full and attn_only from the full profile and trains a few
#     steps under each; then plans the optimal plan at attn_only's measured
#     peak and trains under it; predicted beside measured for allocated
#     peak, reserved peak and step time;
#  6. the CUPTI overhead on step time: attn_only trained again while CUPTI
#     collects (train --cupti);
#  7. offload: the optimal plan at full's measured peak with a host budget
#     (the profile's measured host link), trained with its profile; device
#     and host peaks, step and exposed copy time predicted beside measured.
# Without a GPU it says so in one line on stderr and exits 2, before
# building or writing anything.
#
# Every step's exit status is checked; a failed step is recorded (its log
# is kept) and the steps that need its output are skipped, the others still
# run. The summary is rewritten after every step, so a run that dies midway
# leaves the results so far. Exit status: 0 when every step passed, 1
# otherwise, 2 without a GPU.
#
# Settings (environment):
#   SACPLAN_GPU_CHECK_DIR     outputs and logs (default out/gpu-check)
#   SACPLAN_GPU_CHECK_TOKENS  tokens of the reduced profile (default 9000)
#   SACPLAN_GPU_CHECK_STEPS   training steps per plan (default 5)
#   SACPLAN_GPU_CHECK_JOBS    build jobs (default: all cores)
#   SACPLAN_GPU_CHECK_PREBUILT  a folder made by scripts/gpu-bundle.sh: run its
#                             programs instead of building (for a machine
#                             with PyTorch and CUDA but no build dependencies)
set -uo pipefail
cd "$(dirname "$0")/.."

no_gpu() {
  echo "gpu-check: no GPU: $*" >&2
  exit 2
}
command -v nvidia-smi >/dev/null 2>&1 ||
  no_gpu "nvidia-smi not found (no NVIDIA driver on this machine)"
gpu_list=$(nvidia-smi -L 2>/dev/null) ||
  no_gpu "nvidia-smi failed (the NVIDIA driver does not answer)"
grep -q '^GPU ' <<<"$gpu_list" || no_gpu "nvidia-smi lists no GPU"
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
  >/dev/null 2>&1 ||
  no_gpu "python3 torch.cuda.is_available() is false (LibTorch cannot use the GPU)"

out="${SACPLAN_GPU_CHECK_DIR:-out/gpu-check}"
tokens="${SACPLAN_GPU_CHECK_TOKENS:-9000}"
steps="${SACPLAN_GPU_CHECK_STEPS:-5}"
jobs="${SACPLAN_GPU_CHECK_JOBS:-$(nproc)}"
build="${SACPLAN_GPU_CHECK_PREBUILT:-build}"
sacplan="$build/cli/sacplan"
mkdir -p "$out/logs"
: >"$out/steps.tsv"
summary() { python3 scripts/gpu_check_summary.py "$out" "$tokens"; }

# run NAME COMMAND...: runs the step, logs its output, records its status.
run() {
  local name=$1
  shift
  local log="$out/logs/$name.log" start=$SECONDS status
  echo "gpu-check: $name ..."
  "$@" >"$log" 2>&1
  status=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" "$log" >>"$out/steps.tsv"
  if [ "$status" -ne 0 ]; then
    echo "gpu-check: $name failed (exit $status): $(tail -n 1 "$log")"
  fi
  summary
  return "$status"
}
skip() {
  printf '%s\tskipped\t0\t%s\n' "$1" "$2" >>"$out/steps.tsv"
  echo "gpu-check: $1 skipped: $2"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  >"$out/device.txt" 2>&1

# 1. Build with CUDA, or take the staged build with the libraries it
# carries, LibTorch's and CUDA's from python3's torch, and the toolkit's.
built=0
if [ -n "${SACPLAN_GPU_CHECK_PREBUILT:-}" ]; then
  found_libs=$(python3 -c '
import glob, os, torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
dirs = [lib] + sorted(glob.glob(os.path.join(lib, "..", "..", "nvidia", "*", "lib")))
dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/extras/CUPTI/lib64"]
print(":".join(d for d in dirs if os.path.isdir(d)))')
  export LD_LIBRARY_PATH="$(cd "$build" && pwd)/lib:$found_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Each staged program must find every library it loads.
  missing() { ! ldd "$build"/cli/* "$build"/tests/*/*_test "$build"/bench/* | grep "not found"; }
  run prebuilt missing && built=1
elif run configure cmake --preset default -DSACPLAN_WITH_CUPTI=ON; then
  if grep -q "CUDA profiler (CUPTI) built" "$out/logs/configure.log"; then
    run build cmake --build --preset default -j "$jobs" && built=1
  else
    echo "configure: the CUDA profiler was not built (see the log)" >>"$out/logs/configure.log"
    printf 'cuda_profiler\t1\t0\t%s\n' "$out/logs/configure.log" >>"$out/steps.tsv"
  fi
fi

# The bridge's planner extension is built for this machine's python3 when
# python/ does not hold one it can import: against a staged build's deps/
# (scripts/gpu-bundle.sh) or this machine's own packages.
planner_importable() {
  (cd python && python3 -c 'import sacplan_torch._planner') >/dev/null 2>&1
}
build_planner_extension() {
  local work=/tmp/sacplan-planner-extension prefix
  prefix="$(python3 -m nanobind --cmake_dir)"
  [ -d "$build/deps/usr" ] && prefix="$(cd "$build/deps/usr" && pwd);$prefix"
  cmake -S python -B "$work" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DPython_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$work" --target _planner -j "$jobs" &&
    cp "$work"/_planner*.so python/sacplan_torch/ &&
    planner_importable
}

wan=(--model wan2.1-1.3b)
full=(--frames 77 --height 720 --width 1280)
if [ "$built" -eq 1 ]; then
  # 2. The tests that need a GPU (ctest label gpu: the kernels' parity with
  # ATen, the CUDA profiler's own) and the kernels' benchmark. A staged
  # build has no ctest files: its test programs run directly, each writing
  # its own JUnit file.
  if [ -f "$build/CTestTestfile.cmake" ]; then
    run gpu_tests ctest --test-dir "$build" -L gpu --output-on-failure \
      --output-junit "$PWD/$out/gpu_tests.xml"
  else
    for test_program in "$build"/tests/*/*_test; do
      name=$(basename "$test_program")
      run "gpu_tests_${name#sacplan_}" "$test_program" \
        --gtest_output="xml:$out/gpu_tests_${name#sacplan_}.xml"
    done
  fi
  if [ -x "$build/bench/bench_kernels" ]; then
    run kernel_bench "$build/bench/bench_kernels" --benchmark_format=json \
      --benchmark_out="$out/bench_kernels.json" --benchmark_out_format=json
  else
    skip kernel_bench "not built"
  fi

  # 3. The PyTorch bridge on CUDA.
  if planner_importable || run planner_extension build_planner_extension; then
    run bridge python3 scripts/gpu_bridge_check.py --sacplan "$sacplan" --out "$out"
  else
    skip bridge "the planner extension did not build"
  fi

  # 4. Profiles on the GPU.
  run profile_reduced "$sacplan" profile "${wan[@]}" --tokens "$tokens" \
    --device cuda -o "$out/profile_reduced.json"
  profiled=0
  run profile_full "$sacplan" profile "${wan[@]}" "${full[@]}" --device cuda \
    -o "$out/profile_full.json" && profiled=1

  # 5. Train under the presets, then the optimal plan at attn_only's peak.
  if [ "$profiled" -eq 1 ]; then
    for preset in none full attn_only; do
      run "plan_$preset" "$sacplan" plan --profile "$out/profile_full.json" \
        --preset "$preset" -o "$out/plan_$preset.json" &&
        run "train_$preset" "$sacplan" train "${wan[@]}" "${full[@]}" --device cuda \
          --plan "$out/plan_$preset.json" --steps "$steps" --log "$out/run_$preset.json"
    done
    if [ -f "$out/run_attn_only.json" ]; then
      budget=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["measured"]["peak_bytes"])' \
        "$out/run_attn_only.json")
      # Keep or recompute only: offload, on by default where the profile has
      # a host link (a CUDA profile measures one), is step 7's.
      run plan_optimal "$sacplan" plan --profile "$out/profile_full.json" \
        --budget "$budget" --host-budget 0 -o "$out/plan_optimal.json" &&
        run train_optimal "$sacplan" train "${wan[@]}" "${full[@]}" --device cuda \
          --plan "$out/plan_optimal.json" --steps "$steps" --log "$out/run_optimal.json"
      # 7. Offload at full checkpointing's measured peak.
      if [ -f "$out/run_full.json" ]; then
        full_peak=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["measured"]["peak_bytes"])' \
          "$out/run_full.json")
        run plan_offload "$sacplan" plan --profile "$out/profile_full.json" \
          --budget "$full_peak" --host-budget auto -o "$out/plan_offload.json" &&
          run train_offload "$sacplan" train "${wan[@]}" "${full[@]}" --device cuda \
            --plan "$out/plan_offload.json" --profile "$out/profile_full.json" \
            --steps "$steps" --log "$out/run_offload.json"
      else
        skip plan_offload "full did not train"
      fi
      # 6. The same attn_only run while CUPTI collects.
      run train_attn_only_cupti "$sacplan" train "${wan[@]}" "${full[@]}" --device cuda \
        --cupti --plan "$out/plan_attn_only.json" --steps "$steps" \
        --log "$out/run_attn_only_cupti.json"
    else
      skip plan_optimal "attn_only did not train"
      skip train_attn_only_cupti "attn_only did not train"
    fi
  else
    skip training "no full-size profile"
  fi
else
  skip everything_else "the build failed"
fi

# Prints predicted beside measured; exits 1 if a step failed.
python3 scripts/gpu_check_summary.py "$out" "$tokens" --print
