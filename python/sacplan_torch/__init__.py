"""sacplan_torch: the bridge between PyTorch trainers and the sacplan planner.

- auto_checkpoint(): capture, plan for a budget, check the plan by
  measurement against the presets that fit, and apply, in one call
- capture(): one real training step of your nn.Module -> profile.json
- apply_plan(): plan.json -> selective activation checkpointing of your blocks
- measure_peak(): the exact peak memory of a training step
- plan(), simulate(), compare(), frontier(): the planner in this process
- explain(): what the applied plan decided for every op; SACPLAN_TRACE=1
  logs what the checkpoint policy decided, once per op id and pass
- `python -m sacplan_torch capture|check`: the same from the command line
"""

from .apply import AppliedPlan, apply_plan
from .auto import AutoCheckpoint, BlockDecision, auto_checkpoint
from .blocks import find_blocks
from .capture import capture
from .errors import SacplanError
from .explain import Explanation, OpDecision, explain
from .memory import Measurement, measure_peak
from .plan_check import MeasuredPlan
from .planner import compare, frontier, plan, simulate
from .setup_spec import Setup, as_dtype, load_setup

__all__ = ["AppliedPlan", "apply_plan", "AutoCheckpoint", "auto_checkpoint", "BlockDecision",
           "explain", "Explanation", "OpDecision", "capture", "compare", "find_blocks", "frontier",
           "Measurement", "MeasuredPlan", "measure_peak", "plan", "SacplanError", "Setup",
           "simulate", "as_dtype", "load_setup"]
