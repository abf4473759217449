"""Writes tests/conformance/cases/: plan/profile pairs that `sacplan simulate`
(tests/cli/conformance_test.cc) and `sacplan_torch.apply_plan`
(python/tests/test_conformance.py) must accept or refuse alike, with the same
message.

Each case is a folder with plan.json (or plan.txt when it is not JSON) and
expect.json: {"profile": path from the repository root, "accept": bool,
"message": the refusal with the plan's path written as <plan>, "step":
whether apply_plan must also agree without the profile, through a training
step}. The plans start from ones `sacplan plan` wrote for the captured
profiles in bench/data and tests/conformance/profiles and change one thing
each. The message is what the CLI says, checked here against the words each
case is about.

The dropout profile (random ops, a host link, so plans that offload and
record copy triggers) is captured here when it is missing, from
python/tests/unseen_blocks.py's dropout model (needs torch and
sacplan_torch on the path):

    python3 tests/conformance/make_cases.py build/cli/sacplan
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"
PROFILES = {
    "wan": "bench/data/wan_block_small.captured.json",
    "flux": "bench/data/flux_double_stream_small.captured.json",
    "dropout": "tests/conformance/profiles/dropout_small.captured.json",
}
# The double-stream profile takes the cases its two streams could change.
FLUX_CASES = {"as_written", "blocks_reversed", "no_semantics", "nothing_saved",
              "no_fingerprint", "index_repeated", "fewer_blocks", "save_unknown_op",
              "save_module_path", "other_fingerprint", "other_model_name",
              "other_param_count", "checkpoint_false_recomputing",
              "checkpoint_false_without_recompute_list"}
# The dropout profile's plan offloads: the checkpoint flag's cases, the copy
# triggers' and random replay's.
DROPOUT_CASES = {"as_written", "checkpoint_false_recomputing",
                 "checkpoint_true_saving_all", "checkpoint_false_without_recompute_list",
                 "checkpoint_true_without_recompute_list", "no_checkpoint_flags"}
# Cases apply_plan must also judge alike without the profile, through a
# training step (python/tests/test_conformance.py): what a plan says of
# itself, and what a block finds out as its forward runs.
STEP_CASES = {"as_written", "no_checkpoint_flags", "no_recompute_lists",
              "checkpoint_false_recomputing", "checkpoint_true_saving_all",
              "recompute_names_saved_op", "triggers_none", "trigger_other_op",
              "random_saved_then_recomputed", "random_saved_from_first_on"}
# No copy waits for a link this fast (python/tests/test_offload.py's).
HOST_LINK = {"d2h_gbps": 1e6, "h2d_gbps": 1e6, "host_memory_bytes": 1 << 30,
             "offload_host_us": 0, "fetch_host_us": 0}


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=ROOT)


def capture_dropout_profile(path: Path) -> None:
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import sacplan_torch
    import unseen_blocks

    setup = unseen_blocks.setup("dropout", "small")
    path.parent.mkdir(parents=True, exist_ok=True)
    sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                          optimizer=setup.make_optimizer(setup.model), name=setup.name,
                          warmup=1, repeats=1, host_link=HOST_LINK, path=str(path))


def base_plan(binary, profile, semantics, tmp, host_budget="0"):
    presets = {}
    for preset in ("full", "none"):
        out = tmp / f"{preset}.json"
        result = run(binary, "plan", "--profile", profile, "--preset", preset,
                     "--semantics", semantics, "-o", str(out))
        assert result.returncode == 0, result.stderr
        presets[preset] = json.loads(out.read_text())["predicted"]["peak_bytes"]
    out = tmp / "optimal.json"
    budget = (presets["full"] + presets["none"]) // 2
    result = run(binary, "plan", "--profile", profile, "--budget", str(budget),
                 "--semantics", semantics, "--host-budget", host_budget, "-o", str(out))
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def set_path(doc, path, value):
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is DELETE:
        del doc[last]
    else:
        doc[last] = value


DELETE = object()


def save_nothing(plan):
    for block in plan["blocks"]:
        block["save"] = []
        del block["recompute"], block["checkpoint"]


def drop_triggers(plan):
    for block in plan["blocks"]:
        for field in ("spill_trigger", "lead_trigger", "lead"):
            block.pop(field, None)


def move(block, ids, to):
    """Moves op ids between a block's save and recompute lists."""
    other = "recompute" if to == "save" else "save"
    for op_id in ids:
        block[other].remove(op_id)
        block[to].append(op_id)


def flag_edits(plan):
    """The checkpoint flag and the recompute list against the save set."""
    blocks = plan["blocks"]
    ci = next(i for i, b in enumerate(blocks) if b["checkpoint"] and len(b["recompute"]) > 1)
    li = next(i for i, b in enumerate(blocks) if not b["checkpoint"])
    return [
        ("checkpoint_false_recomputing", lambda p: p["blocks"][ci].update(checkpoint=False),
         "checkpoint: false"),
        ("checkpoint_true_saving_all", lambda p: p["blocks"][li].update(checkpoint=True),
         "checkpoint: true"),
        ("checkpoint_false_without_recompute_list", lambda p: [
            p["blocks"][ci].update(checkpoint=False), p["blocks"][ci].pop("recompute")],
         "has checkpoint false"),
        ("checkpoint_true_without_recompute_list", lambda p: [
            p["blocks"][li].update(checkpoint=True), p["blocks"][li].pop("recompute")],
         "has checkpoint true"),
        ("checkpoint_string", lambda p: p["blocks"][0].update(checkpoint="yes"), "checkpoint"),
        ("no_checkpoint_flags", lambda p: [b.pop("checkpoint") for b in p["blocks"]], None),
        ("no_recompute_lists", lambda p: [b.pop("recompute") for b in p["blocks"]], None),
        ("recompute_names_saved_op", lambda p: p["blocks"][ci]["recompute"].append(
            p["blocks"][ci]["save"][0]), "which the block saves"),
        ("recompute_leaves_op_out", lambda p: p["blocks"][ci]["recompute"].pop(),
         "recompute list leaves it out"),
        ("recompute_unknown_op", lambda p: p["blocks"][ci]["recompute"].append("no_such_op"),
         "no_such_op"),
        ("recompute_string", lambda p: p["blocks"][0].update(recompute="add"), "recompute"),
    ]


def offload_edits(plan, profile):
    """A plan that offloads (the dropout profile's): copy triggers and
    random replay."""
    blocks = plan["blocks"]
    ci = next(i for i, b in enumerate(blocks) if b["checkpoint"] and b.get("offload"))
    other_op = next(op for op in blocks[ci]["recompute"] if op != blocks[ci]["spill_trigger"])
    random = [op["id"] for op in profile["blocks"][ci]["ops"] if op.get("random")]
    # Saving the first random op and recomputing the next draws other numbers.
    saved_first = [op for op in random[:1] if op in blocks[ci]["recompute"]]
    assert saved_first and random[1] in blocks[ci]["recompute"], (random, blocks[ci])
    return [
        ("triggers_none", drop_triggers, None),
        ("trigger_missing_on_one_block", lambda p: p["blocks"][ci].pop("spill_trigger"),
         "has no spill_trigger"),
        ("trigger_unknown_op", lambda p: p["blocks"][ci].update(spill_trigger="no_such_op"),
         "no_such_op"),
        ("trigger_other_op", lambda p: p["blocks"][ci].update(spill_trigger=other_op), None),
        ("trigger_not_string", lambda p: p["blocks"][ci].update(lead_trigger=3), "lead_trigger"),
        ("lead_not_bool", lambda p: p["blocks"][ci].update(lead="yes"), "lead"),
        ("offload_not_saved", lambda p: p["blocks"][ci]["offload"].append(
            p["blocks"][ci]["recompute"][0]), "not saved"),
        ("random_saved_then_recomputed", lambda p: move(p["blocks"][ci], saved_first, "save"),
         "recomputes random op"),
        ("random_saved_from_first_on", lambda p: move(
            p["blocks"][ci], [op for op in random if op in p["blocks"][ci]["recompute"]], "save"),
         None),
    ]


def edits(plan):
    """(name, profile key, edit of a copy of the plan or raw text, words the
    refusal must contain or None to accept)."""
    n = len(plan["blocks"])
    first_saved = next(b["save"][0] for b in plan["blocks"] if b["save"])
    return flag_edits(plan) + [
        ("as_written", lambda p: None, None),
        ("blocks_reversed", lambda p: p["blocks"].reverse(), None),
        ("blocks_rotated", lambda p: p["blocks"].append(p["blocks"].pop(0)), None),
        ("no_semantics", lambda p: set_path(p, ["semantics"], DELETE), None),
        ("semantics_sacplan", lambda p: set_path(p, ["semantics"], "sacplan"), None),
        ("no_fingerprint", lambda p: set_path(p, ["graph_fingerprint"], DELETE), None),
        ("no_model_config", lambda p: set_path(p, ["model_config"], DELETE), None),
        ("no_predicted", lambda p: set_path(p, ["predicted"], DELETE), None),
        ("no_method_or_budget", lambda p: [set_path(p, [k], DELETE) for k in
                                           ("method", "budget_bytes", "budget_kind")], None),
        ("nothing_saved", save_nothing, None),
        ("extra_field", lambda p: set_path(p, ["note"], "written by hand"), None),
        ("block_extra_field", lambda p: p["blocks"][0].update(comment="x"), None),
        ("not_json", "{\"schema\": ", "not valid JSON"),
        ("empty_file", "", "JSON"),
        ("top_level_array", lambda p: [], "expected an object"),
        ("no_schema", lambda p: set_path(p, ["schema"], DELETE), "schema"),
        ("schema_v3", lambda p: set_path(p, ["schema"], "sacplan.plan/3"), "schema"),
        ("schema_v2", lambda p: set_path(p, ["schema"], "sacplan.plan/2"), None),
        ("offload_in_schema_v1", lambda p: p["blocks"][0].update(offload=[first_saved]),
         "offload"),
        ("profile_schema", lambda p: set_path(p, ["schema"], "sacplan.profile/1"), "schema"),
        ("no_blocks", lambda p: set_path(p, ["blocks"], DELETE), "blocks"),
        ("blocks_object", lambda p: set_path(p, ["blocks"], {"0": []}), "blocks"),
        ("block_not_object", lambda p: set_path(p, ["blocks", 0], 7), "blocks[0]"),
        ("no_index", lambda p: set_path(p, ["blocks", 0, "index"], DELETE), "index"),
        ("index_string", lambda p: set_path(p, ["blocks", 0, "index"], "0"), "index"),
        ("index_float", lambda p: set_path(p, ["blocks", 0, "index"], 0.5), "index"),
        ("index_negative", lambda p: set_path(p, ["blocks", 0, "index"], -1), "index"),
        ("index_past_end", lambda p: set_path(p, ["blocks", 0, "index"], n), "out of range"),
        ("index_repeated", lambda p: set_path(p, ["blocks", 1, "index"], 0), "repeated"),
        ("fewer_blocks", lambda p: p["blocks"].pop(), "blocks"),
        ("more_blocks", lambda p: p["blocks"].append(
            dict(copy.deepcopy(p["blocks"][0]), index=n)), "blocks"),
        ("no_save", lambda p: set_path(p, ["blocks", 0, "save"], DELETE), "save"),
        ("save_string", lambda p: set_path(p, ["blocks", 0, "save"], first_saved), "save"),
        ("save_number", lambda p: set_path(p, ["blocks", 0, "save"], [3]), "save"),
        ("save_unknown_op", lambda p: p["blocks"][0]["save"].append("no_such_op"),
         "no_such_op"),
        ("save_module_path", lambda p: p["blocks"][0]["save"].append("self_attn.q"),
         "self_attn.q"),
        ("save_op_of_other_block_type", lambda p: p["blocks"][0]["save"].append("ffn.0"),
         "ffn.0"),
        ("semantics_unknown", lambda p: set_path(p, ["semantics"], "torch"), "semantics"),
        ("semantics_number", lambda p: set_path(p, ["semantics"], 1), "semantics"),
        ("budget_kind_unknown", lambda p: set_path(p, ["budget_kind"], "free"), "budget_kind"),
        ("budget_negative", lambda p: set_path(p, ["budget_bytes"], -1), "budget_bytes"),
        ("predicted_list", lambda p: set_path(p, ["predicted"], [1]), "predicted"),
        ("predicted_step_negative", lambda p: set_path(p, ["predicted", "step_ms"], -1.0),
         "step_ms"),
        ("model_config_list", lambda p: set_path(p, ["model_config"], []), "model_config"),
        ("other_model_name", lambda p: set_path(p, ["model"], "wan2.1-1.3b"), "model"),
        ("other_block_count_config", lambda p: set_path(p, ["model_config", "blocks"], n + 1),
         "model_config.blocks"),
        ("other_param_count", lambda p: set_path(
            p, ["model_config", "param_count"], p["model_config"]["param_count"] + 1),
         "param_count"),
        ("other_fingerprint", lambda p: set_path(p, ["graph_fingerprint"], "0123456789abcdef"),
         "graph_fingerprint"),
    ]


def main(argv):
    binary = str(Path(argv[1]).resolve())
    shutil.rmtree(CASES, ignore_errors=True)
    CASES.mkdir(parents=True)
    tmp = CASES.parent / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    count = 0
    if not (ROOT / PROFILES["dropout"]).exists():
        capture_dropout_profile(ROOT / PROFILES["dropout"])
    for key, profile in PROFILES.items():
        offloads = key == "dropout"
        plan = base_plan(binary, profile, "torch-sac", tmp, "300KB" if offloads else "0")
        cases = edits(plan)
        if offloads:
            cases = [c for c in cases if c[0] in DROPOUT_CASES]
            cases += offload_edits(plan, json.loads((ROOT / profile).read_text()))
        for name, edit, words in cases:
            if key == "flux" and name not in FLUX_CASES:
                continue
            folder = CASES / f"{key}_{name}"
            folder.mkdir()
            if isinstance(edit, str):
                plan_path = folder / "plan.txt"
                plan_path.write_text(edit)
            else:
                doc = copy.deepcopy(plan)
                replaced = edit(doc)
                if isinstance(replaced, list) and name == "top_level_array":
                    doc = replaced
                plan_path = folder / "plan.json"
                plan_path.write_text(json.dumps(doc) + "\n")
            result = run(binary, "simulate", "--profile", profile, "--plan", str(plan_path))
            accept = result.returncode == 0
            message = ""
            if not accept:
                assert result.returncode == 2, (folder, result.returncode, result.stderr)
                lines = result.stderr.strip().splitlines()
                assert len(lines) == 1, (folder, result.stderr)
                message = lines[0].removeprefix("sacplan: error: ").replace(str(plan_path), "<plan>")
            assert accept == (words is None), (folder, result.stderr)
            assert words is None or words in message, (folder, words, message)
            expect = {"profile": profile, "accept": accept, "message": message,
                      "step": name in STEP_CASES}
            (folder / "expect.json").write_text(json.dumps(expect, indent=1) + "\n")
            count += 1
    shutil.rmtree(tmp)
    print(f"wrote {count} cases to {CASES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
