"""The host-side parts of scripts/gpu-check.sh: the bridge check
(scripts/gpu_bridge_check.py, run here on the CPU) and the summary's
reading of a staged build's GoogleTest XML, of bench_kernels' counters
and of bridge.json."""

from __future__ import annotations

import json
import subprocess
import sys

from sacplan_cli import REPO, sacplan_binary

SCRIPTS = REPO / "scripts"

# GoogleTest's own XML, as a staged build's test programs write it: the
# suite in classname, parameterised names with slashes.
KERNEL_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" failures="1" name="AllTests">
  <testsuite name="Dtypes/FusedGpuTest" tests="2" failures="1">
    <testcase name="Rope/float32" status="run" result="completed"
              classname="Dtypes/FusedGpuTest"/>
    <testcase name="Rope/bfloat16" status="run" result="completed"
              classname="Dtypes/FusedGpuTest">
      <failure message="max error 0.5"/>
    </testcase>
  </testsuite>
</testsuites>
"""
PROFILER_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="1" failures="0" name="AllTests">
  <testsuite name="CudaProfilerTest" tests="1" failures="0">
    <testcase name="TimesEveryOpFromItsKernels" status="run" result="completed"
              classname="CudaProfilerTest"/>
  </testsuite>
</testsuites>
"""


def test_summary_reads_gtest_xml_and_the_bridge(tmp_path):
    (tmp_path / "gpu_tests_kernels_gpu_test.xml").write_text(KERNEL_XML)
    (tmp_path / "gpu_tests_cuda_profiler_test.xml").write_text(PROFILER_XML)
    bridge = {"schema": "sacplan.gpu-bridge/1", "plans": {"full": {
        "predicted": {"peak_bytes": 100, "reserved_peak_bytes": 120, "step_ms": 2.0},
        "measured": {"peak_bytes": 101, "reserved_peak_bytes": 110, "step_ms": 2.5}}}}
    (tmp_path / "bridge.json").write_text(json.dumps(bridge))
    bench = {"benchmarks": [{"name": "BM_Rope/72000/iterations:1/manual_time",
                             "run_type": "iteration", "real_time": 0.69,
                             "fused_ms": 0.69, "aten_ms": 2.61, "speedup": 3.78}]}
    (tmp_path / "bench_kernels.json").write_text(json.dumps(bench))
    (tmp_path / "plan_offload.json").write_text(json.dumps({"predicted": {
        "peak_bytes": 100, "step_ms": 2.0, "offloaded_bytes": 50, "host_peak_bytes": 50,
        "exposed_copy_ms": 0.5}}))
    (tmp_path / "run_offload.json").write_text(json.dumps({"measured": {
        "peak_bytes": 99, "step_ms": 2.1, "host_peak_bytes": 48}}))
    (tmp_path / "steps.tsv").write_text(
        f"gpu_tests_kernels_gpu_test\t1\t2\t{tmp_path}/k.log\nbridge\t0\t30\t{tmp_path}/b.log\n")
    done = subprocess.run([sys.executable, str(SCRIPTS / "gpu_check_summary.py"),
                           str(tmp_path), "9000", "--print"], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr  # a step failed
    summary = json.loads((tmp_path / "gpu-check.json").read_text())
    assert summary["kernels"]["parity"] == {"tests": 2,
                                            "failed": ["Dtypes/FusedGpuTest.Rope/bfloat16"]}
    assert summary["cuda_profiler_tests"] == {"CudaProfilerTest.TimesEveryOpFromItsKernels": True}
    assert summary["kernels"]["speedup"]["speedups"] == [
        {"benchmark": "BM_Rope/72000", "fused_ms": 0.69, "aten_ms": 2.61, "speedup": 3.78}]
    assert summary["bridge"]["plans"]["full"]["measured"]["peak_bytes"] == 101
    offload = summary["training"]["offload"]
    assert offload["predicted"]["host_peak_bytes"] == 50
    assert offload["predicted"]["exposed_copy_ms"] == 0.5
    assert offload["measured"]["host_peak_bytes"] == 48
    assert abs(offload["error"]["peak_bytes"] + 0.01) < 1e-9
    assert "bridge full" in done.stdout


def test_bridge_check_on_the_cpu(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_bridge_check.py"), "--sacplan", sacplan_binary(),
         "--out", str(tmp_path), "--device", "cpu", "--arg", "size=small", "--steps", "1",
         "--cpu-host-link", "1000000"],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "bridge.json").read_text())
    plans = report["plans"]
    assert sorted(plans) == ["attn_only", "full", "none", "offload", "optimal"]
    for name, entry in plans.items():
        assert entry["measured"]["reserved_peak_bytes"] is None  # no caching allocator on CPU
        assert abs(entry["error"]["peak_bytes"]) < 0.02, (name, entry)
        assert entry["measured"]["host_peak_bytes"] == (entry["predicted"]["host_peak_bytes"] or 0)
    # Offload beats full checkpointing at full's own peak.
    assert plans["offload"]["predicted"]["host_peak_bytes"] > 0
    assert plans["offload"]["predicted"]["step_ms"] < plans["full"]["predicted"]["step_ms"]
    # The optimal plan's budget lies between full's and none's peaks, and
    # its predicted peak fits it.
    budget = report["optimal_budget_bytes"]
    assert plans["full"]["predicted"]["peak_bytes"] < budget
    assert budget < plans["none"]["predicted"]["peak_bytes"]
    assert plans["optimal"]["predicted"]["peak_bytes"] <= budget
    # Plans change memory, not what the step computes.
    assert len({entry["first_loss"] for entry in plans.values()}) == 1
    # auto_checkpoint at the optimal budget kept the fastest plan it
    # measured within the budget, and that plan trains within it.
    auto = report["auto"]
    checked = auto["checked"]
    assert auto["chosen"] in checked and len(checked) >= 2, auto
    fitting = [m["step_ms"] for m in checked.values() if m["fits"]]
    assert checked[auto["chosen"]]["step_ms"] == min(fitting), auto
    assert auto["measured"]["peak_bytes"] <= budget, auto
