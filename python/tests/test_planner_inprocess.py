"""The planner in this process (sacplan_torch.plan/simulate/compare/frontier
through the _planner extension): the command line's bytes, no subprocess,
and one SacplanError for bad input."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch
from torch import nn

import sacplan_torch
from sacplan_cli import run
from sacplan_torch import SacplanError, _planner


class GatedBlock(nn.Module):
    """A block unlike the examples': a gated MLP and a softmax mixer."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.gate = nn.Linear(dim, 3 * dim)
        self.up = nn.Linear(dim, 3 * dim)
        self.down = nn.Linear(3 * dim, dim)
        self.mix = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.norm(x)
        h = self.down(torch.sigmoid(self.gate(h)) * self.up(h))
        weights = torch.softmax(self.mix(h) @ h.transpose(1, 2) / 8.0, dim=-1)
        return x + weights @ h


class GatedNet(nn.Module):
    def __init__(self, dim: int = 24, blocks: int = 3):
        super().__init__()
        self.embed = nn.Linear(8, dim)
        self.blocks = nn.ModuleList(GatedBlock(dim) for _ in range(blocks))
        self.head = nn.Linear(dim, 2)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Built-in roofline profiles (one a many-rank job) and a captured one."""
    folder = tmp_path_factory.mktemp("profiles")
    paths = {}
    for name, args in {"wan-tiny": ["--model", "wan-tiny", "--device", "h100"],
                       "llama-tiny": ["--model", "llama-tiny", "--device", "a100"],
                       "wan14b-8ranks": ["--model", "wan2.1-14b", "--device", "h100",
                                         "--world-size", "8", "--fsdp", "--sp", "8"]}.items():
        paths[name] = str(folder / f"{name}.json")
        run("profile", *args, "-o", paths[name])
    torch.manual_seed(0)
    x = torch.randn(2, 16, 8)
    paths["captured"] = str(folder / "captured.json")
    sacplan_torch.capture(GatedNet(), lambda m: m(x).square().mean(), blocks="blocks",
                          path=paths["captured"], warmup=0, repeats=1, name="gated")
    return paths


def budget_between(profile: str, semantics: str) -> int:
    none = sacplan_torch.plan(profile, preset="none", semantics=semantics)
    full = sacplan_torch.plan(profile, preset="full", semantics=semantics)
    return (none["predicted"]["peak_bytes"] + full["predicted"]["peak_bytes"]) // 2


@pytest.mark.parametrize("semantics", ["sacplan", "torch-sac"])
@pytest.mark.parametrize("model", ["wan-tiny", "llama-tiny", "wan14b-8ranks", "captured"])
def test_the_command_lines_bytes(profiles, model, semantics, tmp_path):
    profile = profiles[model]
    budget = budget_between(profile, semantics)
    for how in (["--preset", "none"], ["--preset", "attn_only"], ["--budget", str(budget)]):
        cli_path, own_path = tmp_path / "cli.json", tmp_path / "own.json"
        run("plan", "--profile", profile, "--semantics", semantics, *how, "-o", str(cli_path))
        kwargs = {"preset": how[1]} if how[0] == "--preset" else {"budget": budget}
        document = sacplan_torch.plan(profile, semantics=semantics, path=own_path, **kwargs)
        assert own_path.read_bytes() == cli_path.read_bytes(), how
        assert document == json.loads(cli_path.read_text())

        cli_line = run("simulate", "--profile", profile, "--plan", str(cli_path), "--json")
        own_line = _planner.simulate(_planner.Source(profile, True, profile),
                                     _planner.Source(str(cli_path), True, str(cli_path)), None)
        assert own_line + "\n" == cli_line
        assert sacplan_torch.simulate(profile, document) == json.loads(cli_line)

    # As on the command line, offload is on by default where the profile
    # has a host link (the roofline presets), off where it has none (a CPU
    # capture).
    explicit = "auto" if model != "captured" else 0
    assert sacplan_torch.plan(profile, budget=budget, semantics=semantics) == sacplan_torch.plan(
        profile, budget=budget, semantics=semantics, host_budget=explicit)
    assert sacplan_torch.compare(profile, budget, semantics=semantics) == run(
        "compare", "--profile", profile, "--budget", str(budget), "--semantics", semantics)
    cli_frontier, own_frontier = tmp_path / "cli-frontier.json", tmp_path / "own-frontier.json"
    run("frontier", "--profile", profile, "--points", "12", "--semantics", semantics,
        "-o", str(cli_frontier))
    sacplan_torch.frontier(profile, points=12, semantics=semantics, path=own_frontier)
    assert own_frontier.read_bytes() == cli_frontier.read_bytes()


def test_a_profile_dict_plans_as_its_file_does(profiles):
    with open(profiles["captured"]) as f:
        document = json.load(f)
    budget = budget_between(profiles["captured"], "torch-sac")
    assert sacplan_torch.plan(document, budget=budget) == sacplan_torch.plan(
        profiles["captured"], budget=budget)


def test_no_binary_and_no_subprocess(profiles, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the in-process planner started a process")

    for module, name in ((subprocess, "Popen"), (os, "system"), (os, "fork"),
                         (os, "posix_spawn"), (os, "execv"), (os, "execve")):
        monkeypatch.setattr(module, name, forbidden)
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("SACPLAN_BIN", raising=False)
    profile = profiles["captured"]
    plan = sacplan_torch.plan(profile, budget=budget_between(profile, "torch-sac"))
    assert sacplan_torch.simulate(profile, plan)["prediction_holds"]
    assert "optimal" in sacplan_torch.compare(profile, "1GB")
    assert sacplan_torch.frontier(profile, points=4)["points"]


@pytest.mark.parametrize("call, message", [
    (lambda p: sacplan_torch.plan(p, budget="12XB"), "budget '12XB': "),
    (lambda p: sacplan_torch.plan(p, budget=1), "smallest feasible peak"),
    (lambda p: sacplan_torch.plan(p, budget=1.5), "budget: expected bytes"),
    (lambda p: sacplan_torch.plan(p), "give budget"),
    (lambda p: sacplan_torch.plan(p, preset="sometimes"), "preset 'sometimes': unknown preset"),
    (lambda p: sacplan_torch.plan(p, preset="full", semantics="sac"), "semantics 'sac'"),
    (lambda p: sacplan_torch.plan(p, preset="full", budget_kind="peak"),
     "budget_kind: unknown budget kind 'peak'"),
    (lambda p: sacplan_torch.plan(p + ".missing", preset="full"), "cannot read"),
    (lambda p: sacplan_torch.plan({"schema": "nope"}, preset="full"), "profile: "),
    (lambda p: sacplan_torch.plan({"x": float("nan")}, preset="full"), "not a JSON document"),
    (lambda p: sacplan_torch.plan(5, preset="full"), "expected a dict or a file name"),
    (lambda p: sacplan_torch.plan("", preset="full"), "empty name"),
    (lambda p: sacplan_torch.frontier(p, points=1), "points 1: must be between"),
    (lambda p: sacplan_torch.frontier(p, points=10**30), "must be between"),
    (lambda p: sacplan_torch.compare(p, "-3GB"), "budget '-3GB'"),
    (lambda p: sacplan_torch.plan(p, preset="full", path=5), "path: expected a file name"),
    (lambda p: sacplan_torch.frontier(p, path=""), "path: expected a file name"),
])
def test_bad_input_is_one_sacplan_error(profiles, call, message):
    with pytest.raises(SacplanError) as caught:
        call(profiles["captured"])
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_plan_for_another_model_is_refused(profiles):
    plan = sacplan_torch.plan(profiles["wan-tiny"], preset="full")
    with pytest.raises(SacplanError, match=r"^plan: "):
        sacplan_torch.simulate(profiles["captured"], plan)


def test_a_failed_write_leaves_no_file(profiles, tmp_path):
    target = tmp_path / "plan.json"
    with pytest.raises(SacplanError, match="smallest feasible"):
        sacplan_torch.plan(profiles["captured"], budget=1, path=target)
    assert not target.exists()
