"""Each op's backward timed by hooks on its autograd node."""

from __future__ import annotations

from typing import Callable

from .clock import Clock
from .trace import BlockTrace


class BackwardTimer:
    """Hooks the nodes of a block's ops; `mark(label)` marks the allocation
    log around each op's backward, and "bwd_start" at the first one."""

    def __init__(self, clock: Clock, mark: Callable[[str], None]):
        self.clock = clock
        self.mark = mark
        self.started = False

    def hook(self, trace: BlockTrace, node, op_id: str) -> None:
        state = {}

        def pre(grad_outputs):
            if not self.started:
                self.started = True
                self.mark("bwd_start")
            self.mark(f"{trace.index}:bwd:{op_id}:begin")
            state["t"] = self.clock.start()

        def post(grad_inputs, grad_outputs):
            if "t" in state:
                trace.bwd_spans[op_id].append(self.clock.stop(state.pop("t")))
                self.mark(f"{trace.index}:bwd:{op_id}:end")

        node.register_prehook(pre)
        node.register_hook(post)
