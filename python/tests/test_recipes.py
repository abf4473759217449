"""The recipes of docs/python.md ("Recipes"), run as written: each fenced
block after a `<!-- recipe: NAME -->` line, in a fresh interpreter (the
FSDP2 one under torchrun on two gloo ranks). A recipe that raises, or
whose auto_checkpoint plans nothing, fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchrun import torchrun

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def recipes() -> dict:
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"<!-- recipe: (\w+) -->\n```python\n(.*?)```", text, re.S)
    return dict(found)


def test_docs_hold_the_three_recipes():
    assert set(recipes()) == {"diffusers", "fsdp", "torchtitan"}


@pytest.mark.parametrize("name", ["diffusers", "torchtitan"])
def test_recipe_runs(name, tmp_path):
    script = tmp_path / f"recipe_{name}.py"  # not diffusers.py: it would shadow the library
    script.write_text(recipes()[name], encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # explain() lists each block's ops: a plan was applied and some op of it
    # is recomputed (the budgets need checkpointing).
    assert "recompute" in proc.stdout, proc.stdout[-3000:]


def test_fsdp_recipe_runs_on_two_ranks(tmp_path, free_port):
    script = tmp_path / "recipe_fsdp.py"
    script.write_text(recipes()["fsdp"], encoding="utf-8")
    torchrun(script, 2, [], free_port, timeout_s=600)
