"""Which submodules of a model are the blocks a plan talks about."""

from __future__ import annotations

import difflib
from typing import Callable, Dict, List, Sequence, Tuple, Union

from torch import nn

from .errors import SacplanError, one_line

# Where the blocks are:
# - a module path ("blocks", "model.layers"): a container yields its
#   children, any other module itself;
# - a container module (`model.model.layers`): its children;
# - a predicate (qualified name, module) -> bool;
# - a list of any of: block modules, containers, module paths, lists of
#   block modules; concatenated in the order given.
BlockSpec = Union[str, nn.Module, Callable[[str, nn.Module], bool],
                  Sequence[Union[str, nn.Module, Sequence[nn.Module]]]]

Found = List[Tuple[str, nn.Module]]


def _has_forward(module: nn.Module) -> bool:
    return type(module).forward is not nn.Module.forward


def _is_container(module: nn.Module) -> bool:
    """A module holding blocks: one with no forward of its own (ModuleList,
    ModuleDict), or a Sequential, which runs its children in order."""
    return isinstance(module, nn.Sequential) or not _has_forward(module)


def _children(name: str, container: nn.Module) -> Found:
    found = [(f"{name}.{child}" if name else child, module)
             for child, module in container.named_children()]
    if not found:
        raise SacplanError(f"blocks: '{one_line(name)}' holds no modules")
    return found


def _suggestion(model: nn.Module, path: str) -> str:
    """`; did you mean 'model.layers'?` for a path that is not in the model:
    the containers whose path ends like `path` (by name, then by likeness),
    then any module's when no container comes close."""
    depth = path.count(".") + 1
    modules = [(name, module) for name, module in model.named_modules() if name]
    for pool in ([name for name, module in modules if _is_container(module)],
                 [name for name, _ in modules]):
        scored = []
        for name in pool:
            tail = ".".join(name.split(".")[-depth:])
            score = 1.0 if tail == path else \
                difflib.SequenceMatcher(None, path, tail).ratio()
            if score >= 0.8:
                scored.append((-score, len(name), name))
        if scored:
            picks = [f"'{one_line(name)}'" for _, _, name in sorted(scored)[:3]]
            return f"; did you mean {' or '.join(picks)}?"
    return "; give a path that model.named_modules() lists"


def _by_path(model: nn.Module, path: str) -> Found:
    try:
        module = model.get_submodule(path)
    except AttributeError:
        raise SacplanError(f"blocks: model has no submodule '{one_line(path)}'"
                           f"{_suggestion(model, path)}") from None
    return _children(path, module) if _is_container(module) else [(path, module)]


def _name_in(model: nn.Module, names: Dict[int, str], module: nn.Module) -> str:
    if not names:
        names.update((id(m), name) for name, m in model.named_modules())
    if id(module) not in names:
        raise SacplanError(f"blocks: a {type(module).__name__} given as blocks is not a "
                           "submodule of the model")
    return names[id(module)]


def _one_module(model: nn.Module, names: Dict[int, str], module: nn.Module) -> SacplanError:
    """The error for one block module given alone: an nn.Module is callable,
    so it cannot pass for a predicate, and one block alone is more often a
    slip (the model's trunk, or one layer of the list) than a plan."""
    name = _name_in(model, names, module)
    parent = name.rpartition(".")[0]
    inner = [n for n, m in module.named_modules() if n and _is_container(m)]
    if parent and _is_container(model.get_submodule(parent)):
        fix = f"pass its container '{one_line(parent)}'"
    elif inner:
        fix = f"pass the container of its blocks, '{one_line(f'{name}.{inner[0]}'.lstrip('.'))}'"
    else:
        fix = "pass the container of the blocks"
    return SacplanError(
        f"blocks: got one module, {one_line(name) or 'the model'} ({type(module).__name__}), "
        f"not a container of blocks: {fix}, or [module] to make it the only block")


def _from_list(model: nn.Module, names: Dict[int, str], items) -> Found:
    found: Found = []
    for item in items:
        if isinstance(item, str):
            found += _by_path(model, item)
        elif isinstance(item, nn.Module):
            name = _name_in(model, names, item)
            # In a list a Sequential is a block: it has a forward of its own.
            found += _children(name, item) if not _has_forward(item) else [(name, item)]
        elif isinstance(item, (list, tuple)):
            found += _from_list(model, names, item)
        else:
            raise SacplanError(f"blocks: the list holds an item of type {type(item).__name__}; "
                               "give modules, module paths or lists of modules")
    return found


def _by_predicate(model: nn.Module, predicate) -> Found:
    found: Found = []
    inside: Tuple[str, ...] = ()
    for name, module in model.named_modules():
        if any(name.startswith(prefix + ".") for prefix in inside):
            continue
        if module is not model and predicate(name, module):
            found.append((name, module))
            inside += (name,)
    if not found:
        raise SacplanError("blocks: the predicate matches no submodule of the model")
    return found


def _check_distinct(found: Found) -> None:
    """A block given twice, or inside another block, would be captured and
    checkpointed twice over."""
    where = {id(module): name for name, module in found}
    if len(where) != len(found):
        seen = set()
        for name, module in found:
            if id(module) in seen:
                raise SacplanError(f"blocks: '{one_line(name)}' is given twice")
            seen.add(id(module))
    for name, module in found:
        for inner in module.modules():
            if inner is not module and id(inner) in where:
                raise SacplanError(f"blocks: '{one_line(where[id(inner)])}' is inside "
                                   f"another block, '{one_line(name)}'")


def find_blocks(model: nn.Module, blocks: BlockSpec) -> Found:
    """Returns (qualified name, module) for each block, in the order given,
    which must be the order the forward runs them (capture refuses a step
    that runs them in another).

    `blocks` is one of:
    - a module path ("blocks", "model.layers"): a container (a Sequential,
      or a module without a forward of its own: ModuleList, ModuleDict)
      yields its children, any other module itself;
    - a container module (`model.model.layers`): its children;
    - a predicate (qualified name, module) -> bool, tried on every
      submodule in registration order; a match's own descendants are not
      tried (a block does not contain blocks);
    - a list (or tuple) of block modules, containers (without a forward of
      their own: a Sequential in a list is a block), module paths and
      lists of these, concatenated in the order given: Flux's
      `[model.transformer_blocks, model.single_transformer_blocks]`.
    One block module alone (not in a list) is refused: pass its container,
    or `[module]` for a model of one block.

    Raises SacplanError when nothing matches, for a module outside the
    model, for a path the model lacks (naming the nearest paths it has),
    and for a block given twice or inside another.
    """
    names: Dict[int, str] = {}
    if isinstance(blocks, str):
        found = _by_path(model, blocks)
    elif isinstance(blocks, nn.Module):
        # Before `callable`: a module is callable but is no predicate.
        if not _is_container(blocks):
            raise _one_module(model, names, blocks)
        found = _children(_name_in(model, names, blocks), blocks)
    elif callable(blocks):
        found = _by_predicate(model, blocks)
    elif isinstance(blocks, (list, tuple)):
        found = _from_list(model, names, blocks)
        if not found:
            raise SacplanError("blocks: the list of block modules is empty")
    else:
        raise SacplanError(
            "blocks: expected a module path, a container module, a predicate "
            f"(name, module) -> bool or a list of modules, not {type(blocks).__name__}")
    _check_distinct(found)
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
