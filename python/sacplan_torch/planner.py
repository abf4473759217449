"""The planner in this process: plan, simulate, compare and frontier.

Each runs sacplan's C++ planner through the extension `_planner` (built by
`pip install ./python`): no `sacplan` binary and no subprocess, and the
same bytes the command line writes (plan.json, `simulate --json`,
compare's table, frontier.json), because both run the same code.

A profile or plan is a dict (capture's return value, a loaded plan) or the
path of its JSON file. Semantics default to "torch-sac", how apply_plan
applies a plan (the command line's default is "sacplan"). Bad input raises
one SacplanError with the command line's message.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from .errors import SacplanError
from .json_io import check_output_path, write_text_atomically

Document = Union[Dict[str, Any], str, "os.PathLike[str]"]


def _planner():
    try:
        from . import _planner as extension
    except ImportError as exc:
        raise SacplanError("the planner extension sacplan_torch._planner is not built: "
                           "install the package with `pip install ./python`") from exc
    return extension


def _source(doc: Document, what: str):
    """A document as the extension takes it: a path, or JSON text."""
    extension = _planner()
    if isinstance(doc, (str, os.PathLike)):
        path = os.fspath(doc)
        if not path:
            raise SacplanError(f"{what}: expected a dict or a file name, got an empty name")
        return extension.Source(path, True, path)
    if isinstance(doc, dict):
        try:
            text = json.dumps(doc, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SacplanError(f"{what}: not a JSON document ({exc})") from exc
        return extension.Source(text, False, what)
    raise SacplanError(f"{what}: expected a dict or a file name, not {type(doc).__name__}")


def _budget_text(budget, what: str = "budget") -> str:
    if isinstance(budget, bool) or not isinstance(budget, (int, str)):
        raise SacplanError(f"{what}: expected bytes (int) or a size such as '70GB', "
                           f"not {type(budget).__name__}")
    return str(budget)


def _host_budget_text(host_budget) -> str:
    """0 (no offload), "auto" (the profile's host memory), bytes or "200GB";
    None: the command line's default, auto when the profile has a host link
    and no offload when it has none."""
    if host_budget is None:
        return ""
    return _budget_text(host_budget, "host_budget")


def _call(function, *args):
    try:
        return function(*args)
    except _planner().PlannerError as exc:
        raise SacplanError(str(exc)) from None


def _written(text: str, path: Optional[str]) -> str:
    """`text`, written to `path` (checked by the caller) when given."""
    if path is not None:
        write_text_atomically(text, path)
    return text


def plan(profile: Document, *, budget: Union[int, str, None] = None,
         preset: Optional[str] = None, semantics: str = "torch-sac",
         budget_kind: str = "allocated", host_budget: Union[int, str, None] = None,
         path=None) -> Dict[str, Any]:
    """`sacplan plan`: the fastest plan whose simulated peak fits `budget`
    (bytes, or "70GB", "29GiB"), or a fixed policy (`preset`: none, full,
    attn_only, ...). Returns the plan document; with `path`, also writes it
    there, byte for byte what `sacplan plan -o` writes. An unmeetable budget
    raises SacplanError naming the smallest feasible one. `host_budget`
    (`--host-budget`): the host memory offloaded activations may take, 0
    for none, "auto" for the profile's `device.host_link.host_memory_bytes`
    (the profile needs a host link: capture's `host_link`, measured on a
    GPU); None, the default, is "auto" when the profile has a host link and
    0 when it has none, as on the command line."""
    if not isinstance(semantics, str) or not isinstance(budget_kind, str):
        raise SacplanError("semantics and budget_kind: expected strings")
    if preset is not None and not isinstance(preset, str):
        raise SacplanError(f"preset: expected a name, not {type(preset).__name__}")
    budget_text = "" if budget is None else _budget_text(budget)
    host_text = _host_budget_text(host_budget)
    path = check_output_path(path) if path is not None else None
    name = path if path is not None else "plan"
    text, _summary = _call(_planner().plan, _source(profile, "profile"), budget_text,
                           budget_kind, preset or "", semantics, host_text, name)
    return json.loads(_written(text, path))


def simulate(profile: Document, plan_doc: Document, *,
             semantics: Optional[str] = None) -> Dict[str, Any]:
    """`sacplan simulate --json`: the step `plan_doc` gives on `profile`
    (peak, reserved peak, times, whether the plan's prediction holds),
    under `semantics` or the plan's own."""
    if semantics is not None and not isinstance(semantics, str):
        raise SacplanError("semantics: expected a string")
    text = _call(_planner().simulate, _source(profile, "profile"), _source(plan_doc, "plan"),
                 semantics)
    return json.loads(text)


def applied_plan(plan_doc: Document, profile: Optional[Document] = None,
                 model_name: Optional[str] = None,
                 model_config: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """What apply_plan acts on, as sacplan's C++ derives it from `plan_doc`
    (sacplan/api/bridge_rules.h): {"semantics", "blocks": per block, by
    index, {"index", "save", "recompute", "offload", "checkpoint",
    "spill_trigger", "lead_trigger", "block_before_leads"}}. With
    `profile`, the plan is first checked as `sacplan simulate` checks it
    (same message), checkpoint and recompute follow its save set on the
    profile's blocks, and each block also lists the ops whose outputs plain
    autograd keeps ("autograd_keeps"); without, the plan's own word for
    them. With
    `model_config` (the facts plan_doc.model_fingerprint reads off a live
    model), the plan must have been made for that model (and `model_name`,
    when given). Raises SacplanError."""
    config = None if model_config is None else json.dumps(model_config)
    text = _call(_planner().applied_plan, _source(plan_doc, "plan"),
                 None if profile is None else _source(profile, "profile"), model_name or "",
                 config)
    return json.loads(text)


def check_random_draws(index: int, draws: List[Tuple[str, bool]]) -> None:
    """Raises SacplanError, with `sacplan simulate`'s message for a profile
    that marks these ops random, when block `index`'s random calls (in the
    order its forward ran them, each with whether the policy saved it)
    would draw other numbers in the re-run: a saved one before a recomputed
    one (docs/memory_model.md, "Random ops")."""
    _call(_planner().check_random_draws, index, draws)


def outside_block_bytes(**measured: int) -> Dict[str, int]:
    """The profile's head_bytes, head_fwd_only_bytes, head_bwd_only_bytes
    and embedding_bwd_workspace_bytes from what a step measured outside
    the blocks (the fields of sacplan/planner/memory/outside_blocks.h's
    MeasuredOutsideBlocks, by name): the inversion of the simulator's
    accounting that the CPU profiler uses too."""
    fields = _planner().MeasuredOutsideBlocks()
    for name, value in measured.items():
        setattr(fields, name, int(value))
    return dict(_planner().outside_block_bytes(fields))


def copy_setup_us(copy_ms: float, nbytes: int, gbps: float) -> float:
    """The copy engine's fixed time per copy, in microseconds, from one
    copy of `nbytes` timed at `copy_ms` over a link of `gbps`: the planner's
    copy time inverted (HostLink::CopySetupUs)."""
    return _planner().copy_setup_us(copy_ms, nbytes, gbps)


def compared_preset_names() -> List[str]:
    """The presets `sacplan compare` measures plans against (none, full,
    torchtitan, attn_only, megatron, every_nth:2, every_nth:4)."""
    return list(_planner().compared_preset_names())


def compare(profile: Document, budget: Union[int, str], *,
            semantics: str = "torch-sac", host_budget: Union[int, str, None] = None) -> str:
    """`sacplan compare`: the table of every preset and the optimal plan at
    `budget`, as the command prints it; with a `host_budget`, also the
    optimal plan with offload."""
    if not isinstance(semantics, str):
        raise SacplanError("semantics: expected a string")
    return _call(_planner().compare, _source(profile, "profile"), _budget_text(budget),
                 semantics, _host_budget_text(host_budget))


def frontier(profile: Document, *, points: int = 64, semantics: str = "torch-sac",
             host_budget: Union[int, str, None] = None, path=None) -> Dict[str, Any]:
    """`sacplan frontier`: the optimal plans from the smallest feasible peak
    to the fastest step, and the presets beside them (schema
    sacplan.frontier/1). With `path`, also writes frontier.json there.
    `points`: between 2 and 1000, checked by the planner as on the command
    line."""
    if isinstance(points, bool) or not isinstance(points, int):
        raise SacplanError(f"points: expected an int, not {type(points).__name__}")
    if not isinstance(semantics, str):
        raise SacplanError("semantics: expected a string")
    host_text = _host_budget_text(host_budget)
    path = check_output_path(path) if path is not None else None
    # As text: the C++ checks the range of an int of any size.
    text, _summary = _call(_planner().frontier, _source(profile, "profile"), str(points),
                           semantics, host_text)
    return json.loads(_written(text, path))
