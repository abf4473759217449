#!/usr/bin/env bash
# The main job on a built-in default: Wan2.1-T2V-1.3B at 72,000 tokens
# (77 frames at 720x1280) on an H100 roofline profile. Installs what is
# missing, builds, profiles, compares every preset with the optimal plan
# (without and with offload to host memory) at a budget, and writes the
# optimal plan. Outputs land in out/.
#
# The budget defaults to the simulated peak of attn_only (FastVideo's
# policy): the question a Wan trainer asks is "same memory, faster step?".
# Override with: SACPLAN_BUDGET=40GB bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j 2 --target sacplan
sacplan=build/cli/sacplan
mkdir -p out

"$sacplan" profile --model wan2.1-1.3b --frames 77 --height 720 --width 1280 \
  --device h100 -o out/profile.json

budget="${SACPLAN_BUDGET:-}"
if [ -z "$budget" ]; then
  "$sacplan" plan --profile out/profile.json --preset attn_only \
    -o out/plan_attn_only.json >/dev/null
  # attn_only's simulated peak in bytes, read without needing jq.
  budget=$("$sacplan" simulate --profile out/profile.json \
             --plan out/plan_attn_only.json --json |
           sed -n 's/.*"peak_bytes":\([0-9]*\).*/\1/p')
fi

echo
# The offload row: the optimal plan with a third choice, sending kept
# activations to the h100's share of its node's RAM (docs/memory_model.md).
# Planning offloads by default where the profile has a host link, as the
# h100 roofline's does; `plan` below does too (--host-budget 0: it won't).
"$sacplan" compare --profile out/profile.json --budget "$budget"
echo
"$sacplan" plan --profile out/profile.json --budget "$budget" -o out/plan.json
echo
"$sacplan" simulate --profile out/profile.json --plan out/plan.json
