"""The one exception sacplan_torch raises for bad input."""


def one_line(message: str) -> str:
    """The message with control characters (a newline in an op id, a model
    name) written as escapes, so that it stays one line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in message)


class SacplanError(ValueError):
    """A plan, profile, model or block selection that sacplan_torch refuses.

    The message is one line naming the problem (the field, the block, the op
    id), as the sacplan command line's `sacplan: error:` lines do.
    """

    def __init__(self, message: object):
        super().__init__(one_line(str(message)))
