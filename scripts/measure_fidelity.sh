#!/usr/bin/env bash
# Measured error on CPU: for configs no test names, profile on this CPU (one
# ATen thread, the process's CPU clock), plan none, full and an optimal plan
# (budget midway between their peaks) under both semantics, train each with
# `sacplan train --threads 1` and print predicted against measured peak and
# step time as a Markdown table (docs/measurements.md, "Configs no test
# names").
# Usage: scripts/measure_fidelity.sh [BUILD_DIR (default build)] [STEPS (default 8)] [REPEATS (default 5)]
set -euo pipefail
build=${1:-build}
steps=${2:-8}
repeats=${3:-5}
sacplan="$build/cli/sacplan"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

configs=(
  "wan-long-text|--model wan-tiny --tokens 256 --text-tokens 512 --batch 2 --layers 4"
  "wan-head-dim-24|--model wan-tiny --tokens 300 --text-tokens 512 --dim 96 --heads 4 --layers 2"
  "wan-6-layers|--model wan-tiny --tokens 384 --text-tokens 512 --dim 80 --heads 2 --layers 6"
  "llama-gqa-4:1|--model llama-tiny --tokens 128 --batch 2 --dim 80 --heads 4 --kv-heads 1 --layers 5"
  "llama-gqa-6:2|--model llama-tiny --tokens 256 --batch 2 --dim 96 --heads 6 --kv-heads 2 --layers 3"
)

peak_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['predicted']['peak_bytes'])" "$1"; }

echo "| config | semantics | plan | predicted peak | measured peak | error | predicted ms | measured CPU ms | error | wall ms |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
for entry in "${configs[@]}"; do
  name=${entry%%|*}
  read -r -a flags <<< "${entry#*|}"
  profile="$work/$name.profile.json"
  "$sacplan" profile "${flags[@]}" --device cpu --threads 1 --clock cpu --repeats "$repeats" -o "$profile" > /dev/null
  for semantics in sacplan torch-sac; do
    base="$work/$name.$semantics"
    "$sacplan" plan --profile "$profile" --preset none --semantics "$semantics" -o "$base.none.json" > /dev/null
    "$sacplan" plan --profile "$profile" --preset full --semantics "$semantics" -o "$base.full.json" > /dev/null
    budget=$(( ($(peak_of "$base.none.json") + $(peak_of "$base.full.json")) / 2 ))
    "$sacplan" plan --profile "$profile" --budget "$budget" --semantics "$semantics" -o "$base.optimal.json" > /dev/null
    for plan in none full optimal; do
      "$sacplan" train "${flags[@]}" --plan "$base.$plan.json" --threads 1 --steps "$steps" \
        --log "$base.$plan.run.json" > /dev/null
      python3 - "$base.$plan.run.json" "$name" "$semantics" "$plan" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
p, m = run["predicted"], run["measured"]
peak_err = 100 * (m["peak_bytes"] - p["peak_bytes"]) / p["peak_bytes"]
time_err = 100 * (m["cpu_ms"] - p["step_ms"]) / p["step_ms"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {p['peak_bytes'] / 1e6:.2f} MB | "
      f"{m['peak_bytes'] / 1e6:.2f} MB | {peak_err:+.2f}% | {p['step_ms']:.1f} | "
      f"{m['cpu_ms']:.1f} | {time_err:+.1f}% | {m['step_ms']:.1f} |")
PY
    done
  done
done
