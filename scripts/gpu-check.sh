#!/usr/bin/env bash
# Everything sacplan can only check on a GPU, in one command, with a JSON
# summary (docs/gpu.md says how to read it). Steps run in this order, what
# no GPU run has verified first, so a lease that ends early still answers
# the open questions:
#  1. builds with CUDA (preset "default", CUPTI profiler on) and checks that
#     the CUDA profiler was built, or takes a build staged elsewhere by
#     scripts/gpu-bundle.sh (SACPLAN_GPU_CHECK_PREBUILT);
#  2. offload in the C++ executor: profiles wan2.1-1.3b with --device cuda
#     at the full 72,000 tokens (77 frames at 720x1280), plans full, then
#     the optimal plan with offload at full's predicted peak within the
#     host budget this machine can give (--host-budget auto), trains it
#     (device and host peaks, step, exposed copy time) and trains full
#     beside it (the step to beat);
#  3. the PyTorch bridge on CUDA (scripts/gpu_bridge_check.py): the Wan
#     example (bridge) and the MoE example (bridge_moe): capture, presets,
#     the optimal and offload plans, auto_checkpoint's measured choice;
#  4. the kernels' parity with ATen and the CUDA profiler's tests (ctest -L
#     gpu) and the kernels' speed-up (bench_kernels);
#  5. what earlier runs verified: a reduced profile, none and attn_only
#     trained, the optimal plan at attn_only's measured peak, and the CUPTI
#     overhead on step time (attn_only trained while CUPTI collects).
# Without a GPU it says so in one line on stderr and exits 2, before
# building or writing anything.
#
# Every step's exit status is checked; a failed step is recorded (its log
# is kept) and the steps that need its output are skipped, the others still
# run. Each step runs within the time left (SACPLAN_GPU_CHECK_SECONDS,
# counted from the end of the build or its check); a step that would start with under 20 s left is skipped as
# "out of time". The summary is rewritten after every step, so a run that
# dies midway leaves the results so far. Exit status: 0 when every step
# passed, 1 otherwise, 2 without a GPU.
#
# Usage: scripts/gpu-check.sh [--only STEP,STEP,...]
#   --only   run only these steps (names as in steps.tsv, e.g. train_offload,
#            bridge_moe; a step whose input is missing is skipped). The
#            build (or the staged build's check) always runs.
#
# Settings (environment):
#   SACPLAN_GPU_CHECK_DIR     outputs and logs (default out/gpu-check)
#   SACPLAN_GPU_CHECK_TOKENS  tokens of the reduced profile (default 9000)
#   SACPLAN_GPU_CHECK_STEPS   training steps per plan (default 3)
#   SACPLAN_GPU_CHECK_SECONDS the whole run's bound (default 345: 6 minutes
#                             on one H200 with the summary's seconds)
#   SACPLAN_GPU_CHECK_JOBS    build jobs (default: all cores)
#   SACPLAN_GPU_CHECK_PREBUILT  a folder made by scripts/gpu-bundle.sh: run its
#                             programs instead of building (for a machine
#                             with PyTorch and CUDA but no build dependencies)
set -uo pipefail
cd "$(dirname "$0")/.."

only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || { echo "gpu-check: --only needs a list of steps" >&2; exit 2; }
      only=",$2,"; shift 2 ;;
    --only=*) only=",${1#--only=},"; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (usage: scripts/gpu-check.sh [--only STEP,...])" >&2
      exit 2 ;;
  esac
done
steps_known="profile_full plan_full plan_offload train_offload train_full bridge bridge_moe
  gpu_tests kernel_bench profile_reduced plan_none train_none plan_attn_only train_attn_only
  plan_optimal train_optimal train_attn_only_cupti"
IFS=, read -r -a chosen <<<"${only//[[:space:]]/}"
for step in "${chosen[@]}"; do
  [ -z "$step" ] && continue
  [[ " $(echo $steps_known) " == *" $step "* || "$step" == gpu_tests_* ]] || {
    echo "gpu-check: --only: no step '$step' (steps: $(echo $steps_known))" >&2
    exit 2
  }
done

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
steps="${SACPLAN_GPU_CHECK_STEPS:-3}"
bound_s="${SACPLAN_GPU_CHECK_SECONDS:-345}"
jobs="${SACPLAN_GPU_CHECK_JOBS:-$(nproc)}"
build="${SACPLAN_GPU_CHECK_PREBUILT:-build}"
sacplan="$build/cli/sacplan"
mkdir -p "$out/logs"
# A full run starts clean, so no step reads an earlier run's outputs; with
# --only, earlier outputs are the inputs of the steps chosen.
[ -z "$only" ] && rm -rf "${out:?}"/*.json "${out:?}"/*.xml "${out:?}/bridge_moe"
: >"$out/steps.tsv"
clock_start=0
summary() { python3 scripts/gpu_check_summary.py "$out" "$tokens"; }

skip() {
  printf '%s\tskipped\t0\t%s\n' "$1" "$2" >>"$out/steps.tsv"
  echo "gpu-check: $1 skipped: $2"
}
# run NAME COMMAND...: runs the step within the time left, logs its output,
# records its status. A step --only leaves out returns 3 without a record;
# one that would start with under 20 s left is skipped (status 4).
run() {
  local name=$1
  shift
  if [ -n "$only" ] && [[ "$only" != *",$name,"* ]] && [ "${always:-0}" -ne 1 ]; then
    return 3
  fi
  local left=$((bound_s - (SECONDS - clock_start)))
  # The build (or the staged build's check) runs whatever the bound.
  [ "${unbounded:-0}" -eq 1 ] || [ "${always:-0}" -eq 1 ] && left=86400
  if [ "$left" -lt 20 ]; then
    skip "$name" "out of time (SACPLAN_GPU_CHECK_SECONDS=$bound_s)"
    return 4
  fi
  local log="$out/logs/$name.log" start=$SECONDS status
  echo "gpu-check: $name ..."
  if declare -F "$1" >/dev/null; then
    "$@" >"$log" 2>&1  # a function of this script: short, and timeout cannot run it
  else
    timeout --kill-after=5 "$left" "$@" >"$log" 2>&1
  fi
  status=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - start))" "$log" >>"$out/steps.tsv"
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "gpu-check: $name stopped at the run's bound (${bound_s} s)" | tee -a "$log"
  elif [ "$status" -ne 0 ]; then
    echo "gpu-check: $name failed (exit $status): $(tail -n 1 "$log")"
  fi
  summary
  return "$status"
}
measured_peak() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["measured"]["peak_bytes"])' "$1"
}
predicted_peak() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' "$1"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
  >"$out/device.txt" 2>&1

# 1. Build with CUDA, or take the staged build with the libraries it
# carries, LibTorch's and CUDA's from python3's torch, and the toolkit's.
built=0
always=1
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
else
  # A build from source is not held to the run's bound.
  unbounded=1
  if run configure cmake --preset default -DSACPLAN_WITH_CUPTI=ON; then
    if grep -q "CUDA profiler (CUPTI) built" "$out/logs/configure.log"; then
      run build cmake --build --preset default -j "$jobs" && built=1
    else
      echo "configure: the CUDA profiler was not built (see the log)" >>"$out/logs/configure.log"
      printf 'cuda_profiler\t1\t0\t%s\n' "$out/logs/configure.log" >>"$out/steps.tsv"
    fi
  fi
  unbounded=0
fi
always=0
clock_start=$SECONDS
if [ "$built" -ne 1 ]; then
  skip everything_else "the build failed"
  python3 scripts/gpu_check_summary.py "$out" "$tokens" --print
  exit $?
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
train() {  # train NAME PLAN [extra train flags]
  local name=$1 plan=$2
  shift 2
  run "train_$name" "$sacplan" train "${wan[@]}" "${full[@]}" --device cuda \
    --plan "$plan" --steps "$steps" --log "$out/run_$name.json" "$@"
}

# 2. Offload in the C++ executor at 72,000 tokens, within the host memory
# this machine can give, beside full checkpointing.
run profile_full "$sacplan" profile "${wan[@]}" "${full[@]}" --device cuda \
  -o "$out/profile_full.json"
if [ -f "$out/profile_full.json" ]; then
  run plan_full "$sacplan" plan --profile "$out/profile_full.json" --preset full \
    -o "$out/plan_full.json"
  if [ -f "$out/plan_full.json" ]; then
    # The C++ path predicts full's peak within 0.25%: its predicted peak
    # stands in for the measured one, so offload need not wait for full.
    run plan_offload "$sacplan" plan --profile "$out/profile_full.json" \
      --budget "$(predicted_peak "$out/plan_full.json")" --host-budget auto \
      -o "$out/plan_offload.json"
    [ -f "$out/plan_offload.json" ] &&
      train offload "$out/plan_offload.json" --profile "$out/profile_full.json"
    train full "$out/plan_full.json"
  fi
else
  skip offload "no full-size profile"
fi

# 3. The PyTorch bridge on CUDA: the Wan example, then the MoE example.
bridge_ready=1
if [ -n "$only" ] && [[ "$only" != *",bridge,"* ]] && [[ "$only" != *",bridge_moe,"* ]]; then
  bridge_ready=0
elif ! planner_importable && ! run planner_extension build_planner_extension; then
  skip bridge "the planner extension did not build"
  bridge_ready=0
fi
if [ "$bridge_ready" -eq 1 ]; then
  run bridge python3 scripts/gpu_bridge_check.py --sacplan "$sacplan" --out "$out"
  run bridge_moe python3 scripts/gpu_bridge_check.py --sacplan "$sacplan" \
    --out "$out/bridge_moe" --setup python/examples/moe_block.py:setup --arg size=gpu
fi

# 4. The tests that need a GPU (ctest label gpu: the kernels' parity with
# ATen, the CUDA profiler's own) and the kernels' benchmark. A staged build
# has no ctest files: its test programs run directly, each writing its own
# JUnit file.
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
fi

# 5. What earlier runs verified: a reduced profile, the presets trained,
# the optimal plan at attn_only's measured peak, CUPTI's overhead.
run profile_reduced "$sacplan" profile "${wan[@]}" --tokens "$tokens" \
  --device cuda -o "$out/profile_reduced.json"
if [ -f "$out/profile_full.json" ]; then
  for preset in none attn_only; do
    run "plan_$preset" "$sacplan" plan --profile "$out/profile_full.json" \
      --preset "$preset" -o "$out/plan_$preset.json" &&
      train "$preset" "$out/plan_$preset.json"
  done
  if [ -f "$out/run_attn_only.json" ]; then
    # Keep or recompute only: offload is step 2's.
    run plan_optimal "$sacplan" plan --profile "$out/profile_full.json" \
      --budget "$(measured_peak "$out/run_attn_only.json")" --host-budget 0 \
      -o "$out/plan_optimal.json" &&
      train optimal "$out/plan_optimal.json"
    train attn_only_cupti "$out/plan_attn_only.json" --cupti
  fi
fi

# Prints predicted beside measured; exits 1 if a step failed.
python3 scripts/gpu_check_summary.py "$out" "$tokens" --print
