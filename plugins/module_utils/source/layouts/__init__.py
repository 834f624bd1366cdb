"""The flag layouts ("eras") of SGLang's server_args, one module each, tried in the order of LAYOUTS
(newest first: a newer layout keeps traces of the older ones, e.g. a layout-C ServerArgs still calls
add_cli_args_from_dataclass, so B's detect() says yes there too).

A new layout: a new module here (a ``Layout`` subclass with its own ``detect``, and the hooks that
differ: ``field_classes``, ``is_input_field``, ``order_fields``) plus one entry in LAYOUTS.
"""
from __future__ import annotations

from ..model import UnknownLayout
from . import era_a, era_b, era_c
from .base import Layout, add_cli_args

# Tried in order: the first whose detect() says yes reads the release.
LAYOUTS: list[Layout] = [era_c.LAYOUT, era_b.LAYOUT, era_a.LAYOUT]
BY_NAME = {layout.name: layout for layout in LAYOUTS}


def detect(ex) -> Layout:
    """The layout of the parsed server_args.py (``ex``: extract.Extractor), or UnknownLayout saying
    what is missing."""
    for layout in LAYOUTS:
        if layout.detect(ex):
            return layout
    if ex.sa.classes.get("ServerArgs") is None:
        raise UnknownLayout(f"{ex.sa.rel}: no class ServerArgs and no _INPUT_NAMESPACES; "
                            "unknown sglang flag layout")
    if add_cli_args(ex) is None:
        raise UnknownLayout(f"{ex.sa.rel}: ServerArgs has no add_cli_args(); unknown flag layout")
    raise UnknownLayout(f"{ex.sa.rel}: ServerArgs.add_cli_args neither calls parser.add_argument "
                        "on a @dataclass nor add_cli_args_from_dataclass; unknown flag layout")


__all__ = ["BY_NAME", "LAYOUTS", "Layout", "detect"]
