"""Layout C (>= 0.5.20): the same annotated fields in ``msgspec.Struct`` classes under
``sglang/srt/arg_groups/fields/*.py``, listed in ``_INPUT_NAMESPACES`` of server_args.py, in the order
of ``arg_groups/field_order.py`` ``POSITIONAL_FIELD_ORDER``."""
from __future__ import annotations

import ast

from ..model import UnknownLayout
from ..tree import Unresolved
from .base import Layout


class EraC(Layout):
    name = "C"
    releases = ">= 0.5.20"

    def detect(self, ex) -> bool:
        return "_INPUT_NAMESPACES" in ex.sa.assigns

    def field_classes(self, ex) -> list:
        out = []
        node = ex.sa.assigns["_INPUT_NAMESPACES"]
        for e in getattr(node, "elts", []):
            if not isinstance(e, ast.Name):
                raise UnknownLayout(f"{ex.sa.rel}: _INPUT_NAMESPACES entry {ast.unparse(e)} is not a name")
            try:
                m, cls = ex.tree.lookup(ex.sa, e.id)
            except Unresolved as exc:
                raise UnknownLayout(f"{ex.sa.rel}: cannot find class {e.id} of _INPUT_NAMESPACES") from exc
            if not isinstance(cls, ast.ClassDef):
                raise UnknownLayout(f"{ex.sa.rel}: {e.id} in _INPUT_NAMESPACES is not a class")
            out.append((m, cls))
        sa_cls = ex.sa.classes.get("ServerArgs")
        if sa_cls is not None:
            out.append((ex.sa, sa_cls))
        return out

    def is_input_field(self, cls: ast.ClassDef) -> bool:
        return cls.name != "ServerArgs"  # not an input field of the assembled record

    def order_fields(self, ex, items: list) -> list:
        order_mod = ex.tree.module("sglang/srt/arg_groups/field_order.py")
        order = []
        if order_mod is not None and "POSITIONAL_FIELD_ORDER" in order_mod.assigns:
            order = list(ex.tree.eval(order_mod.assigns["POSITIONAL_FIELD_ORDER"], order_mod))
        pos = {n: i for i, n in enumerate(order)}
        known = sorted((it for it in items if it[0] in pos), key=lambda it: pos[it[0]])
        return known + [it for it in items if it[0] not in pos]


LAYOUT = EraC()
