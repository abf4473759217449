"""Naming a block's aten calls when torch.compile traces the block.

Dynamo turns apply_plan's `checkpoint` into a higher-order op and calls the
selective-checkpoint policy while AOTAutograd traces its body: once per
traced graph, before decompositions, so the calls are the eager block's
aten calls in the eager order. The module hooks that name calls in eager
code do not run then (dynamo cannot trace their side effects inside the
checkpoint, so they step aside while it traces); the module path comes
from the `nn_module_stack` dynamo records on every graph node instead.
"""

from __future__ import annotations

import re
from typing import Callable, Set

import torch
import torch.fx.traceback as fx_traceback
from torch import nn

from .naming import OpNamer

# `L['self'].blocks[0]`, `L['self']._modules['attn']` -> dotted parts.
_INDEX = re.compile(r"(?:\._modules)?\[['\"]?([^\]'\"]+)['\"]?\]")


class BlockNamer(OpNamer):
    """OpNamer for eager calls; `traced_name` for the calls of a trace."""

    def __init__(self, block: nn.Module):
        super().__init__(block)
        self._paths: Set[str] = {path for path, _ in block.named_modules()} - {""}
        self.tracing = False
        self.traced: Set[str] = set()
        self.check_traced: Callable[[Set[str]], None] = lambda ids: None

    def _enter(self, path):
        hook = super()._enter(path)

        def enter(module, args):
            if not torch.compiler.is_compiling():
                hook(module, args)
        return enter

    def _leave(self, path):
        hook = super()._leave(path)

        def leave(module, args, output):
            if not torch.compiler.is_compiling():
                hook(module, args, output)
        return leave

    def _traced_path(self) -> str:
        """The innermost module of the block running the traced call: the
        longest tail of the recorded module path that names a submodule of
        the block ("" for a call in the block's own forward)."""
        stack = (fx_traceback.get_current_meta() or {}).get("nn_module_stack") or {}
        if not stack:
            return ""
        parts = _INDEX.sub(r".\1", list(stack.values())[-1][0]).split(".")
        for start in range(len(parts)):
            tail = ".".join(parts[start:])
            if tail in self._paths:
                return tail
        return ""

    def begin_trace(self) -> None:
        self.reset()
        self.traced = set()
        self.tracing = True

    def traced_name(self, func) -> str:
        """The id of a call in the trace begun by `begin_trace`; recorded in
        `traced`."""
        self._stack = [self._traced_path()]
        op_id = self.name(func)
        self.traced.add(op_id)
        return op_id
