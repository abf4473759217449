"""The one exception sacplan_torch raises for bad input."""


class SacplanError(ValueError):
    """A plan, profile, model or block selection that sacplan_torch refuses.

    The message is one line naming the problem (the field, the block, the op
    id), as the sacplan command line's `sacplan: error:` lines do.
    """
