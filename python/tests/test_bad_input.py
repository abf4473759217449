"""Bad input to the bridge: one SacplanError line naming the problem, no
file left behind, and exit status 2 with one line from
`python -m sacplan_torch`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import sacplan_cli
import toy_transformer
from sacplan_cli import REPO

from sacplan_torch import SacplanError, apply_plan, capture, measure_peak
from sacplan_torch.plan_doc import load_plan

SIZES = dict(dim=16, heads=2, hidden=32, blocks=2, inputs=8, outputs=4)
X = torch.randn(2, 8, 8, generator=torch.Generator().manual_seed(1))


def make_net():
    return toy_transformer.make_net(**SIZES)


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "\r" not in message, repr(message)
    return message


def quick_capture(path):
    return capture(make_net(), X, blocks="blocks", path=path, warmup=0, repeats=1)


def test_capture_to_a_directory(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(SacplanError, match="is a directory") as exc:
        quick_capture(str(target))
    one_line(exc)
    assert list(tmp_path.rglob("*")) == [target]


def test_capture_to_an_empty_path(tmp_path):
    with pytest.raises(SacplanError, match="empty") as exc:
        quick_capture("")
    one_line(exc)


def test_capture_to_a_name_too_long(tmp_path):
    path = tmp_path / ("p" * 300 + ".json")
    with pytest.raises(SacplanError, match="cannot write .*File name too long") as exc:
        quick_capture(str(path))
    one_line(exc)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("blocks", [5, 2.5, [5]])
def test_blocks_of_the_wrong_type(blocks):
    with pytest.raises(SacplanError, match="blocks: ") as exc:
        capture(make_net(), X, blocks=blocks)
    one_line(exc)
    with pytest.raises(SacplanError, match="blocks: "):
        apply_plan(make_net(), {"schema": "sacplan.plan/1",
                                "blocks": [{"index": 0, "save": []}]}, blocks=blocks)


def wan_tiny_plan(tmp_path) -> dict:
    """`sacplan plan --preset full` on the built-in wan-tiny."""
    profile = str(tmp_path / "wan.json")
    sacplan_cli.run("profile", "--model", "wan-tiny", "--device", "h100", "-o", profile)
    return sacplan_cli.plan(profile, str(tmp_path / "wan-plan.json"), preset="full")


def test_plan_of_a_built_in_model(tmp_path):
    plan = wan_tiny_plan(tmp_path)
    with pytest.raises(SacplanError, match="'wan-tiny' was not captured from pytorch") as exc:
        apply_plan(make_net(), plan, blocks="blocks")
    one_line(exc)


def test_plan_naming_ops_of_another_model(tmp_path):
    """A PyTorch plan whose recompute list names ops the block does not run
    (another model's) is refused at the first forward."""
    path = str(tmp_path / "profile.json")
    quick_capture(path)
    plan = sacplan_cli.plan(path, str(tmp_path / "plan.json"), preset="full")
    plan["blocks"][1]["recompute"].append("cross_attn.q.addmm")
    net = make_net()
    apply_plan(net, plan, blocks="blocks")
    with pytest.raises(SacplanError, match=r"blocks\[1\]\.recompute names op ids the block "
                                           r"does not run: cross_attn\.q\.addmm$"):
        net(X)


def test_op_id_with_a_newline_stays_on_one_line():
    net = make_net()
    plan = {"schema": "sacplan.plan/1",
            "blocks": [{"index": i, "save": ["attn\nqkv.addmm"]} for i in range(2)]}
    with pytest.raises(SacplanError, match=r"attn\\nqkv") as exc:
        apply_plan(net, plan, blocks="blocks")
    one_line(exc)


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_plan_not_in_utf8(tmp_path, encoding):
    path = tmp_path / "plan.json"
    path.write_bytes(json.dumps({"schema": "sacplan.plan/1", "model": "é",
                                 "blocks": []}).replace("\\u00e9", "é").encode(encoding))
    # sacplan's plan reader (the command line's) refuses it as JSON.
    with pytest.raises(SacplanError, match=f"{path}: not valid JSON") as exc:
        load_plan(str(path))
    one_line(exc)


def test_plan_nested_too_deeply(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SacplanError, match="JSON nested deeper than 64 levels") as exc:
        load_plan(str(path))
    one_line(exc)


def test_measure_peak_on_a_loss_that_is_not_a_scalar():
    net = make_net()
    with pytest.raises(SacplanError, match=r"scalar loss tensor, not \[2, 8, 4\]") as exc:
        measure_peak(net, lambda m: m(X), steps=1)
    one_line(exc)


def run_bridge(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "sacplan_torch", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_command_line_capture_to_a_directory(tmp_path):
    done = run_bridge("capture", "--setup", str(REPO / "python/examples/wan_block.py") +
                      ":setup", "-o", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"sacplan_torch: error: {tmp_path}: is a directory; name the profile file to write"]
    assert list(tmp_path.iterdir()) == []


def test_command_line_setup_that_raises(tmp_path):
    setup = tmp_path / "broken.py"
    setup.write_text("def setup():\n    raise RuntimeError('no GPU here\\nat all')\n")
    done = run_bridge("capture", "--setup", f"{setup}:setup", "-o",
                      str(tmp_path / "p.json"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "sacplan_torch: error: RuntimeError: no GPU here\\nat all"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__pycache__", "broken.py"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["broken.py"]
