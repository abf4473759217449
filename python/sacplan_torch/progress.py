"""capture's progress bar on stderr."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled

    def advance(self, what: str) -> None:
        self.done += 1
        if self.enabled:
            width = 24
            filled = width * self.done // self.total
            sys.stderr.write(f"\rcapture [{'#' * filled}{'.' * (width - filled)}] "
                             f"{self.done}/{self.total} steps ({what})   ")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

