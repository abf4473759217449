#!/usr/bin/env bash
# scripts/test_skips.py on a ctest JUnit report (two GoogleTest cases
# skipped for want of a GPU, one parameterized, and one passed) and a pytest
# one (a skip with its reason):
# each skipped test is one line with its reason, the passed one is not
# listed, and a missing report is one line and exit 2.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "$*"; failures=$((failures + 1)); }

cat >"$tmp/ctest.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="(empty)" tests="3" failures="0" disabled="0" skipped="2">
	<testcase name="CudaOffloadTest.Plans" classname="CudaOffloadTest.Plans" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>[ RUN      ] CudaOffloadTest.Plans
/src/tests/executor/cuda_offload_test.cc:22: Skipped
needs a GPU (no NVIDIA driver on this machine)
[  SKIPPED ] CudaOffloadTest.Plans (0 ms)
</system-out>
	</testcase>
	<testcase name="Dtypes/FusedGpuTest.Rope/float32  # GetParam() = 16-byte object &lt;06-00&gt;" classname="Dtypes/FusedGpuTest.Rope/float32  # GetParam() = 16-byte object &lt;06-00&gt;" status="notrun">
		<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>
		<system-out>/src/tests/kernels/fused_gpu_test.cc:23: Skipped
needs a GPU (no CUDA device)
[  SKIPPED ] Dtypes/FusedGpuTest.Rope/float32 (0 ms)
</system-out>
	</testcase>
	<testcase name="PredictionTest.Peak" classname="PredictionTest.Peak" status="run">
		<system-out>[       OK ] PredictionTest.Peak (0 ms)</system-out>
	</testcase>
</testsuite>
XML
cat >"$tmp/pytest.xml" <<'XML'
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="1" tests="2">
<testcase classname="tests.test_find_blocks" name="test_diffusers" time="0.001">
<skipped type="pytest.skip" message="could not import 'diffusers': No module named 'diffusers'">tests/test_find_blocks.py:22</skipped>
</testcase>
<testcase classname="tests.test_apply" name="test_ok" time="0.001"/>
</testsuite></testsuites>
XML

out="$(python3 "$root/scripts/test_skips.py" "$tmp/ctest.xml" "$tmp/pytest.xml")" ||
  fail "exit status $? on two readable reports"
expected="skipped: 3 tests (they did not run here, so they did not pass)
  CudaOffloadTest.Plans: skipped: needs a GPU (no NVIDIA driver on this machine)
  Dtypes/FusedGpuTest.Rope/float32: skipped: needs a GPU (no CUDA device)
  tests.test_find_blocks::test_diffusers: skipped: could not import 'diffusers': No module named 'diffusers'"
[ "$out" = "$expected" ] || fail "summary:
$out
expected:
$expected"

out="$(python3 "$root/scripts/test_skips.py" "$tmp/pytest.xml" "$tmp/missing.xml" 2>&1)"
status=$?
[ "$status" -eq 2 ] || fail "a missing report: exit $status, expected 2"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "a missing report: not one line: $out"

[ "$failures" -eq 0 ] && echo "test_skips.py: ok"
exit "$((failures > 0))"
