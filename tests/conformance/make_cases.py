"""Writes tests/conformance/cases/: plan/profile pairs that `sacplan simulate`
(tests/cli/conformance_test.cc) and `sacplan_torch.apply_plan`
(python/tests/test_conformance.py) must accept or refuse alike, with the same
message.

Each case is a folder with plan.json (or plan.txt when it is not JSON) and
expect.json: {"profile": path from the repository root, "accept": bool,
"message": the refusal with the plan's path written as <plan>}. The plans
start from ones `sacplan plan` wrote for the captured profiles in bench/data
and change one thing each. The message is what the CLI says, checked here
against the words each case is about.

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
}
# The double-stream profile takes the cases its two streams could change.
FLUX_CASES = {"as_written", "blocks_reversed", "no_semantics", "nothing_saved",
              "no_fingerprint", "index_repeated", "fewer_blocks", "save_unknown_op",
              "save_module_path", "other_fingerprint", "other_model_name",
              "other_param_count"}


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=ROOT)


def base_plan(binary, profile, semantics, tmp):
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
                 "--semantics", semantics, "-o", str(out))
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


def edits(plan):
    """(name, profile key, edit of a copy of the plan or raw text, words the
    refusal must contain or None to accept)."""
    n = len(plan["blocks"])
    first_saved = next(b["save"][0] for b in plan["blocks"] if b["save"])
    return [
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
        ("nothing_saved", lambda p: [b.update(save=[]) for b in p["blocks"]], None),
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
    for key, profile in PROFILES.items():
        plan = base_plan(binary, profile, "torch-sac", tmp)
        for name, edit, words in edits(plan):
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
            expect = {"profile": profile, "accept": accept, "message": message}
            (folder / "expect.json").write_text(json.dumps(expect, indent=1) + "\n")
            count += 1
    shutil.rmtree(tmp)
    print(f"wrote {count} cases to {CASES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
