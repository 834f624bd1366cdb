"""Layout B (0.5.14 - 0.5.19): fields ``name: A[T, "help" | Arg(...)] = d`` of ServerArgs, registered by
``add_cli_args_from_dataclass``; deprecated aliases still added by hand (``parser.add_argument``)."""
from __future__ import annotations

from ..extract import callee
from .base import Layout, add_cli_args, calls_in


class EraB(Layout):
    name = "B"
    releases = "0.5.14 - 0.5.19"

    def detect(self, ex) -> bool:
        add = add_cli_args(ex)
        return add is not None and any(callee(c) == "add_cli_args_from_dataclass" for c in calls_in(add))


LAYOUT = EraB()
