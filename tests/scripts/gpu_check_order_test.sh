#!/usr/bin/env bash
# scripts/gpu-check.sh's order, --only and time bound, played with fakes: an
# nvidia-smi that lists a GPU, a python3 that answers yes to
# torch.cuda.is_available() and runs everything else, and a staged build
# whose sacplan writes the smallest files the next steps read and logs each
# call. Checks that the unverified offload steps come first and in order,
# that --only runs the chosen steps and no others, and that a step that
# would start past the bound is skipped as "out of time".
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "$*"; failures=$((failures + 1)); }

real_python=$(command -v python3)
mkdir -p "$tmp/bin" "$tmp/staged/cli"
printf '#!/usr/bin/env bash\necho "GPU 0: NVIDIA H200 (UUID: GPU-0)"\n' >"$tmp/bin/nvidia-smi"
cat >"$tmp/bin/python3" <<PY
#!/usr/bin/env bash
[[ "\$*" == *"torch.cuda.is_available"* ]] && exit 0
exec "$real_python" "\$@"
PY
cat >"$tmp/staged/cli/sacplan" <<'SACPLAN'
#!/usr/bin/env bash
echo "$1 $*" >>"$FAKE_CALLS"
[ "$1" = profile ] && sleep "${FAKE_PROFILE_S:-0}"
while [ $# -gt 0 ]; do
  case "$1" in
    -o) if [[ "$2" == *plan_* ]]; then echo '{"predicted": {"peak_bytes": 1000}}' >"$2"
        else echo '{}' >"$2"; fi; shift ;;
    --log) echo '{"measured": {"peak_bytes": 900}}' >"$2"; shift ;;
  esac
  shift
done
SACPLAN
chmod +x "$tmp/bin/"* "$tmp/staged/cli/sacplan"

# run_check CASE [gpu-check args]: runs with the fakes; steps.tsv in $tmp/CASE.
run_check() {
  local case_dir="$tmp/$1"
  shift
  mkdir -p "$case_dir"
  PATH="$tmp/bin:$PATH" FAKE_CALLS="$case_dir/calls" SACPLAN_GPU_CHECK_DIR="$case_dir/out" \
    SACPLAN_GPU_CHECK_PREBUILT="$tmp/staged" \
    bash "$root/scripts/gpu-check.sh" "$@" >"$case_dir/stdout" 2>&1
}
steps_run() { cut -f1 "$tmp/$1/out/steps.tsv" | grep -v '^prebuilt$' | tr '\n' ' '; }

# --only the C++ offload steps: exactly those, profile, plans, then training.
run_check offload --only profile_full,plan_full,plan_offload,train_offload,train_full
expected="profile_full plan_full plan_offload train_offload train_full "
[ "$(steps_run offload)" = "$expected" ] ||
  fail "offload: steps '$(steps_run offload)', expected '$expected'"
grep -q -- "--budget 1000 --host-budget auto" "$tmp/offload/calls" ||
  fail "offload: not planned at full's predicted peak with --host-budget auto"
grep -q "train .*plan_offload.json.* --profile" "$tmp/offload/calls" ||
  fail "offload: not trained with its profile"

# The bound: the profile takes 2 s of a 21 s run, so the steps after it
# would start with under 20 s left.
FAKE_PROFILE_S=2 SACPLAN_GPU_CHECK_SECONDS=21 run_check bound --only profile_full,plan_full
grep -q "^plan_full	skipped	0	out of time" "$tmp/bound/out/steps.tsv" ||
  fail "bound: plan_full was not skipped as out of time: $(cat "$tmp/bound/out/steps.tsv")"

[ "$failures" -eq 0 ] && echo "gpu-check order, --only and bound: as documented"
exit $((failures > 0))
