#!/usr/bin/env python3
"""Writes gpu-check.json from what scripts/gpu-check.sh left in its folder.

Usage: gpu_check_summary.py OUT_DIR REDUCED_TOKENS [--print]

Reads steps.tsv (one line per step: name, exit status or "skipped",
seconds, log), the profiles, plans, run logs and kernel outputs that exist,
and writes OUT_DIR/gpu-check.json (temp file, then rename). Anything missing
is reported as missing, so a partial run still gives a valid summary. With
--print it also prints predicted beside measured, and exits 0 when every
step passed (a step that ran out of GPU memory counts as a result, not a
failure), 1 otherwise. Format: docs/gpu.md.
"""
import glob
import json
import os
import re
import sys
from xml.etree import ElementTree

SCHEMA = "sacplan.gpu-check/1"
PLANS = ["none", "full", "attn_only", "optimal", "offload"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def out_of_memory(log_path):
    return re.search(r"out of memory", read_text(log_path), re.IGNORECASE) is not None


def read_steps(out):
    steps = {}
    for line in read_text(os.path.join(out, "steps.tsv")).splitlines():
        fields = line.split("\t")
        if len(fields) != 4:
            continue
        name, status, seconds, log = fields
        if status == "skipped":
            steps[name] = {"status": "skipped", "reason": log}
            continue
        step = {"status": "ok" if status == "0" else "failed", "exit": int(status),
                "seconds": int(seconds), "log": log}
        if status != "0":
            lines = read_text(log).strip().splitlines()
            step["last_line"] = lines[-1] if lines else ""
            if name.startswith("train_") and out_of_memory(log):
                step["status"] = "out_of_memory"
        steps[name] = step
    return steps


def profile_summary(doc):
    if doc is None:
        return None
    block = doc["blocks"][0]
    return {
        "device": doc.get("device", {}).get("name"),
        "tokens": doc.get("model", {}).get("config", {}).get("tokens"),
        "block_fwd_ms": sum(op["fwd_ms"] for op in block["ops"]),
        "block_bwd_ms": sum(op["bwd_ms"] for op in block["ops"]),
        "measurement": doc.get("measurement", {}),
    }


def ratio(measured, predicted):
    if measured is None or not predicted:
        return None
    return measured / predicted - 1


def training_summary(out, steps):
    training = {}
    for name in PLANS:
        plan = load(os.path.join(out, f"plan_{name}.json"))
        run = load(os.path.join(out, f"run_{name}.json"))
        predicted = (plan or {}).get("predicted", {})
        measured = (run or {}).get("measured", {})
        entry = {
            "status": steps.get(f"train_{name}", {}).get("status", "not run"),
            "predicted": {
                "peak_bytes": predicted.get("peak_bytes"),
                # Present once the planner predicts the reserved peak.
                "reserved_peak_bytes": predicted.get("reserved_peak_bytes"),
                "step_ms": predicted.get("step_ms"),
            },
            "measured": {
                "peak_bytes": measured.get("peak_bytes"),
                "reserved_peak_bytes": measured.get("peak_reserved_bytes"),
                "step_ms": measured.get("step_ms"),
            },
        }
        if predicted.get("offloaded_bytes"):
            # Offload: host bytes, and the copy time the plan expects compute
            # to wait for (measured only through the step time).
            entry["predicted"]["host_peak_bytes"] = predicted.get("host_peak_bytes")
            entry["predicted"]["exposed_copy_ms"] = predicted.get("exposed_copy_ms")
            entry["measured"]["host_peak_bytes"] = measured.get("host_peak_bytes")
        if plan is not None:
            entry["budget_bytes"] = plan.get("budget_bytes")
        entry["error"] = {
            key: ratio(entry["measured"][key], entry["predicted"][key])
            for key in ("peak_bytes", "reserved_peak_bytes", "step_ms")
        }
        training[name] = entry
    return training


def test_name(case):
    """Suite.Test: ctest's JUnit names a case so; GoogleTest's own XML puts
    the suite in classname."""
    name, suite = case.get("name"), case.get("classname")
    return name if "." in name or not suite or suite == name else f"{suite}.{name}"


def gpu_test_results(out):
    """{test name: passed} from ctest's JUnit file (gpu_tests.xml) or the
    test programs' own (gpu_tests_*.xml, a staged build); {} when none."""
    results = {}
    for path in sorted(glob.glob(os.path.join(out, "gpu_tests*.xml"))):
        try:
            root = ElementTree.parse(path).getroot()
        except (OSError, ElementTree.ParseError):
            continue
        results.update({test_name(case): case.find("failure") is None
                        and case.get("status") != "fail" for case in root.iter("testcase")})
    return results


def kernels_summary(out, steps):
    # The kernels' parity tests are the gpu-labelled tests other than the
    # CUDA profiler's own.
    parity = {name: ok for name, ok in gpu_test_results(out).items()
              if not name.startswith("CudaProfilerTest.")}
    if not parity:
        parity_out = "not built"
    else:
        parity_out = {"tests": len(parity),
                      "failed": sorted(name for name, ok in parity.items() if not ok)}
    bench = load(os.path.join(out, "bench_kernels.json"))
    if bench is None:
        speed = "not built" if steps.get("kernel_bench", {}).get("status") in (None, "skipped") \
            else {"status": steps["kernel_bench"]["status"]}
    else:
        # bench_kernels times both sides in one benchmark and reports them
        # as counters (fused_ms, aten_ms, speedup = aten / fused).
        runs = [b for b in bench.get("benchmarks", [])
                if b.get("run_type", "iteration") == "iteration"]
        times = {b["name"]: b.get("real_time") for b in runs}
        pairs = [{"benchmark": b["name"].split("/iterations")[0], "fused_ms": b["fused_ms"],
                  "aten_ms": b["aten_ms"], "speedup": b["speedup"]}
                 for b in runs if all(key in b for key in ("fused_ms", "aten_ms", "speedup"))]
        speed = {"benchmarks": times, "speedups": pairs}
    return {"parity": parity_out, "speedup": speed}


def cupti_overhead(out):
    plain = (load(os.path.join(out, "run_attn_only.json")) or {}).get("measured", {})
    traced = (load(os.path.join(out, "run_attn_only_cupti.json")) or {}).get("measured", {})
    without_ms, with_ms = plain.get("step_ms"), traced.get("step_ms")
    return {"step_ms_without": without_ms, "step_ms_with": with_ms,
            "overhead": ratio(with_ms, without_ms)}


def write_atomically(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def figures_text(entry):
    """'allocated peak 1.00 GiB predicted / 1.01 GiB measured; ...' of one run."""
    def fmt(value, unit):
        if value is None:
            return "-"
        return f"{value / 2**30:.2f} GiB" if unit == "bytes" else f"{value:.1f} ms"

    return "; ".join(
        f"{label} {fmt(entry['predicted'][key], unit)} predicted / "
        f"{fmt(entry['measured'][key], unit)} measured"
        for key, label, unit in (("peak_bytes", "allocated peak", "bytes"),
                                 ("reserved_peak_bytes", "reserved peak", "bytes"),
                                 ("step_ms", "step", "ms")))


def print_table(summary):
    print(f"gpu-check on {summary['device']}")
    for name, t in summary["training"].items():
        print(f"  {name:9s} [{t['status']}] {figures_text(t)}")
    overhead = summary["cupti_overhead"]["overhead"]
    print("  CUPTI overhead on step time: " +
          ("-" if overhead is None else f"{100 * overhead:+.1f}%"))
    speedup = summary["kernels"]["speedup"]
    print(f"  kernels: parity {json.dumps(summary['kernels']['parity'])}; speed-up "
          f"{json.dumps(speedup.get('speedups') if isinstance(speedup, dict) else speedup)}")
    for example in ("bridge", "bridge_moe"):
        for name, b in (summary[example] or {}).get("plans", {}).items():
            print(f"  {example} {name:9s} {figures_text(b)}")
        auto = (summary[example] or {}).get("auto")
        if auto:
            print(f"  {example} auto: kept {auto['chosen']}; " + "; ".join(auto["notes"][-1:]))
    failed = [n for n, s in summary["steps"].items() if s["status"] == "failed"]
    if failed:
        print(f"  failed: {', '.join(failed)}")
    else:
        print("  all steps passed" if summary["steps"] else "  no step ran")


def main(argv):
    if len(argv) < 3:
        print("usage: gpu_check_summary.py OUT_DIR REDUCED_TOKENS [--print]", file=sys.stderr)
        return 2
    out = argv[1]
    steps = read_steps(out)
    summary = {
        "schema": SCHEMA,
        "device": read_text(os.path.join(out, "device.txt")).strip() or None,
        "reduced_tokens": int(argv[2]),
        "complete": bool(steps) and all(s["status"] != "failed" for s in steps.values()),
        "steps": steps,
        "profiles": {
            "reduced": profile_summary(load(os.path.join(out, "profile_reduced.json"))),
            "full": profile_summary(load(os.path.join(out, "profile_full.json"))),
        },
        "training": training_summary(out, steps),
        "kernels": kernels_summary(out, steps),
        "cupti_overhead": cupti_overhead(out),
        "bridge": load(os.path.join(out, "bridge.json")),
        "bridge_moe": load(os.path.join(out, "bridge_moe", "bridge.json")),
        "cuda_profiler_tests": {name: ok for name, ok in gpu_test_results(out).items()
                                if name.startswith("CudaProfilerTest.")},
    }
    write_atomically(os.path.join(out, "gpu-check.json"), summary)
    if "--print" in argv[3:]:
        print_table(summary)
        print(f"wrote {os.path.join(out, 'gpu-check.json')}")
        return 0 if summary["complete"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
