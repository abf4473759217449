#!/usr/bin/env bash
# scripts/check_house.py on small trees of its own: a tree that keeps the
# rules passes, and each kind of breach (an include between planner rooms
# running back up, one between layers running sideways, a file over the
# line limit) fails with a line naming the file. Then the checkout itself.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

# make_tree DIR: a git tree with one good file per layer it names.
make_tree() {
  mkdir -p "$1/planner/ir" "$1/planner/search" "$1/executor/src" "$1/profiler/src"
  echo '#include "sacplan/status_macros.h"' >"$1/planner/ir/graph.cc"
  echo '#include "sacplan/planner/ir/graph.h"' >"$1/planner/search/solver.cc"
  echo '#include "sacplan/planner/search/solver.h"' >"$1/executor/src/run.cc"
  echo '#include "sacplan/models/wan.h"' >"$1/profiler/src/measure.cc"
  git -C "$1" init -q
}

# expect CASE STATUS NEEDLE: runs the checker on $tmp/CASE.
expect() {
  git -C "$tmp/$1" add -A
  python3 "$root/scripts/check_house.py" "$tmp/$1" >"$tmp/$1.out" 2>&1
  local status=$?
  if [ "$status" -ne "$2" ] || ! grep -q -- "$3" "$tmp/$1.out"; then
    echo "$1: exit status $status (expected $2), output without '$3':"; cat "$tmp/$1.out"
    failures=$((failures + 1))
  fi
}

make_tree "$tmp/good"
expect good 0 "every include points down"

make_tree "$tmp/room_up"
echo '#include "sacplan/planner/search/solver.h"' >>"$tmp/room_up/planner/ir/graph.cc"
expect room_up 1 "planner/ir/graph.cc: .*planner/ir -> planner/search runs back up"

make_tree "$tmp/internal_up"
echo '#include "search/candidates.h"' >>"$tmp/internal_up/planner/ir/graph.cc"
expect internal_up 1 "planner/ir -> planner/search runs back up"

make_tree "$tmp/sideways"
echo '#include "sacplan/executor/memory_meter.h"' >>"$tmp/sideways/profiler/src/measure.cc"
expect sideways 1 "profiler -> executor runs sideways"

make_tree "$tmp/long"
seq 451 | sed 's#^#// line #' >"$tmp/long/planner/search/long.cc"
expect long 1 "planner/search/long.cc: 451 lines, over 450"

python3 "$root/scripts/check_house.py" "$root" || failures=$((failures + 1))
[ "$failures" -eq 0 ] && echo "check_house: all cases as expected"
exit $((failures > 0))
