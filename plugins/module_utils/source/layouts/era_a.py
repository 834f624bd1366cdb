"""Layout A (<= 0.5.13.post1): ``@dataclass ServerArgs`` + ``add_cli_args`` with ``parser.add_argument``."""
from __future__ import annotations

from ..extract import callee, is_dataclass
from .base import Layout, add_cli_args, calls_in


class EraA(Layout):
    name = "A"
    releases = "<= 0.5.13.post1"

    def detect(self, ex) -> bool:
        add = add_cli_args(ex)
        return add is not None and any(callee(c) == "add_argument" for c in calls_in(add)) \
            and is_dataclass(ex.sa.classes["ServerArgs"])


LAYOUT = EraA()
