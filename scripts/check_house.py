#!/usr/bin/env python3
"""Checks that every #include in sacplan's C++ and CUDA sources points down
the drawing of the layers (docs/architecture.md): a file may include its own
folder's headers and those of any folder on a lower floor, never a folder on
its own floor or above. Prints each include that runs sideways or back up,
one line each, and exits 1 if there is any; exits 0 and prints a summary
otherwise.

Usage: scripts/check_house.py [repository root, default: this checkout]
"""
import pathlib
import re
import subprocess
import sys

# Bottom to top. The planner's four rooms are floors of their own, so the
# IR never reaches into the memory model, the memory model never into the
# search, and the search never into the JSON readers and writers.
FLOORS = [
    ["status", "kernels"],
    ["planner/ir"],
    ["planner/memory"],
    ["planner/search"],
    ["planner/plan_io"],
    ["models", "api", "reports", "metering"],
    ["executor", "profiler"],
    ["orchestration"],
    ["cli", "python"],
]
# Tests, benchmarks and fuzzers sit above everything and may use any layer;
# cmake/ holds build support (the precompiled LibTorch header).
UNCHECKED = {"tests", "bench", "fuzz", "build", "out", "cmake"}
PLANNER_ROOMS = ("ir", "memory", "search", "plan_io")
# A file longer than this does more than one job (STYLE.md, small files).
MAX_LINES = 450
SIZED_SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".inc", ".py", ".sh", ".cmake"}
SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".inc"}

FLOOR_OF = {folder: n for n, floor in enumerate(FLOORS) for folder in floor}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_of_file(rel):
    """The layer a source file belongs to, or None when it is not checked."""
    parts = rel.parts
    if parts[0] in UNCHECKED:
        return None
    if parts[0] == "planner":
        if parts[1] == "include":  # include/sacplan/planner/<room>/x.h
            return "planner/" + parts[4] if len(parts) > 5 else "planner"
        return "planner/" + parts[1] if len(parts) > 2 else "planner"
    return parts[0]


def folder_of_include(target, own_folder):
    """The layer an include names: sacplan/<lib>/..., a planner room's
    internal header as "<room>/x.h", or (anything else) the file's own
    folder."""
    parts = target.split("/")
    if parts[0] == "sacplan" and len(parts) > 2:
        if parts[1] == "planner" and len(parts) > 3:
            return "planner/" + parts[2]
        return parts[1]
    if own_folder.startswith("planner/") and parts[0] in PLANNER_ROOMS and len(parts) > 1:
        return "planner/" + parts[0]
    return own_folder


def tracked_files(root):
    return subprocess.check_output(["git", "ls-files"], cwd=root, text=True).split()


def oversized(root, files):
    found = []
    for name in files:
        if pathlib.PurePosixPath(name).suffix not in SIZED_SUFFIXES:
            continue
        lines = (root / name).read_text(errors="replace").count("\n")
        if lines > MAX_LINES:
            found.append(f"{name}: {lines} lines, over {MAX_LINES}")
    return found


def layer_breaches(root, files):
    found, checked = [], 0
    for name in files:
        rel = pathlib.PurePosixPath(name)
        if rel.suffix not in SOURCE_SUFFIXES or len(rel.parts) < 2:
            continue
        own = folder_of_file(rel)
        if own is None:
            continue
        if own not in FLOOR_OF:
            found.append(f"{name}: folder {own} has no floor in scripts/check_house.py")
            continue
        checked += 1
        text = (root / name).read_text(errors="replace")
        for target in INCLUDE.findall(text):
            dest = folder_of_include(target, own)
            if dest == own:
                continue
            if dest not in FLOOR_OF:
                found.append(f'{name}: includes "{target}" from {dest}, which has no floor')
            elif FLOOR_OF[dest] >= FLOOR_OF[own]:
                way = "sideways" if FLOOR_OF[dest] == FLOOR_OF[own] else "back up"
                found.append(f'{name}: includes "{target}": {own} -> {dest} runs {way}')
    return found, checked


def main():
    here = pathlib.Path(__file__).resolve().parent.parent
    root = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else here
    files = tracked_files(root)
    found, checked = layer_breaches(root, files)
    found += oversized(root, files)
    for line in found:
        print(line)
    if found:
        print(f"check_house: {len(found)} breach(es) of the house rules", file=sys.stderr)
        return 1
    print(f"check_house: {checked} sources, every include points down; "
          f"no file over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
