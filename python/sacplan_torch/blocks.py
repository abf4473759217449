"""Which submodules of a model are the blocks a plan talks about."""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple, Union

from torch import nn

from .errors import SacplanError

# A module path ("blocks", "transformer.layers"), a predicate over
# (qualified name, module), or the block modules themselves.
BlockSpec = Union[str, Callable[[str, nn.Module], bool], Sequence[nn.Module]]


def find_blocks(model: nn.Module, blocks: BlockSpec) -> List[Tuple[str, nn.Module]]:
    """Returns (qualified name, module) for each block, in execution order.

    A path naming a container (ModuleList, Sequential, ModuleDict) yields its
    children; a path naming any other module yields that module alone. A
    predicate is tried on every submodule; a match's own descendants are not
    tried (a block does not contain blocks). Raises SacplanError when nothing
    matches.
    """
    if isinstance(blocks, str):
        try:
            container = model.get_submodule(blocks)
        except AttributeError as exc:
            raise SacplanError(f"blocks: model has no submodule '{blocks}'") from exc
        if isinstance(container, (nn.ModuleList, nn.Sequential, nn.ModuleDict)):
            found = [(f"{blocks}.{name}", child) for name, child in container.named_children()]
        else:
            found = [(blocks, container)]
        if not found:
            raise SacplanError(f"blocks: '{blocks}' holds no modules")
        return found
    if callable(blocks):
        found = []
        inside: Tuple[str, ...] = ()
        for name, module in model.named_modules():
            if any(name.startswith(prefix + ".") for prefix in inside):
                continue
            if module is not model and blocks(name, module):
                found.append((name, module))
                inside += (name,)
        if not found:
            raise SacplanError("blocks: the predicate matches no submodule of the model")
        return found
    if not isinstance(blocks, (list, tuple, nn.ModuleList)):
        raise SacplanError(
            "blocks: expected a module path, a predicate (name, module) -> bool or a list "
            f"of the block modules, not {type(blocks).__name__}")
    names = {id(module): name for name, module in model.named_modules()}
    found = []
    for module in blocks:
        if not isinstance(module, nn.Module):
            raise SacplanError(f"blocks: the list holds a {type(module).__name__}, not a module")
        if id(module) not in names:
            raise SacplanError("blocks: a module in the list is not a submodule of the model")
        found.append((names[id(module)], module))
    if not found:
        raise SacplanError("blocks: the list of block modules is empty")
    return found


def _is_wrapper(module: nn.Module) -> bool:
    return type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod")


def compiled_how(module: nn.Module) -> str | None:
    """How `module` is compiled, or None when it runs eagerly:
    `torch.compile(block)` returns a wrapper (an OptimizedModule holding the
    block as `_orig_mod`); `block.compile()` compiles in place."""
    if _is_wrapper(module):
        return "torch.compile(block)"
    if getattr(module, "_compiled_call_impl", None) is not None:
        return "block.compile()"
    return None


def eager_block(module: nn.Module) -> nn.Module:
    """The block a `torch.compile(block)` wrapper compiles, or the module."""
    return module._orig_mod if _is_wrapper(module) else module


def refuse_compiled(index: int, name: str, how: str | None, doing: str, fix: str) -> None:
    """Raises SacplanError for a compiled block (`how`, from compiled_how).
    Under capture's dispatch mode dynamo runs compiled code eagerly, so a
    capture of a compiled block would describe and time the eager block
    while claiming the compiled one (docs/python.md, "torch.compile")."""
    if how is not None:
        raise SacplanError(f"blocks[{index}] ({name}) is compiled ({how}): {doing} needs "
                           f"the eager block; {fix} (docs/python.md, \"torch.compile\")")
