#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the
# Release build (preset "default", build/) with ctest, the Python bridge
# (python/) with pytest against that build, then the sanitizer build (preset
# "asan": AddressSanitizer + UndefinedBehaviorSanitizer, build-asan/).
# This is the README's test command and what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

# Warnings are errors in CI (SACPLAN_WERROR), in both builds.
cmake --preset default -DSACPLAN_WERROR=ON
cmake --build --preset default -j 2
ctest --preset default

# sacplan_torch (python/): capture, apply_plan, measure_peak, FSDP2 on two
# gloo ranks, and predicted against measured peaks through the planner just
# built.
OMP_NUM_THREADS=1 SACPLAN_BIN="$PWD/build/cli/sacplan" python3 -m pytest python/tests -q

# LeakSanitizer stops the process's threads with ptrace to scan memory, which
# some containers forbid; it works on this project's machines (checked), so
# leaks are fatal here too.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cmake --preset asan -DSACPLAN_WERROR=ON
cmake --build --preset asan -j 2
ctest --preset asan

echo "sacplan: all tests passed (Release and ASan+UBSan)"
