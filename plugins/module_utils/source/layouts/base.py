"""What every flag layout ("era") of SGLang's server_args provides; one module per layout."""
from __future__ import annotations

import ast


class Layout:
    """One way SGLang lays out its server flags. Subclasses say how to recognise it (``detect``)
    and where its fields are; the flag reading itself is shared (extract.py)."""

    name = "?"          # the era letter, SglangSource.era
    releases = ""       # the releases that use it, for messages and docs

    def detect(self, ex) -> bool:
        """True when ``ex.sa`` (srt/server_args.py, parsed) is laid out this way. Never raises."""
        raise NotImplementedError

    def field_classes(self, ex) -> list:
        """[(module, ast.ClassDef)] whose annotated fields are ServerArgs' fields (defaults, and the
        flags of add_cli_args_from_dataclass)."""
        return [(ex.sa, ex.sa.classes["ServerArgs"])]

    def is_input_field(self, cls: ast.ClassDef) -> bool:
        """Whether the fields of ``cls`` (one of field_classes) are parser inputs."""
        return True

    def order_fields(self, ex, items: list) -> list:
        """The parser's order of the fields [(name, module, AnnAssign)], as registered."""
        return items

    def __repr__(self):
        return f"<layout {self.name} ({self.releases})>"


def method(klass: ast.ClassDef, name: str):
    for st in klass.body:
        if isinstance(st, ast.FunctionDef) and st.name == name:
            return st
    return None


def add_cli_args(ex):
    """ServerArgs.add_cli_args of the parsed server_args.py, or None."""
    cls = ex.sa.classes.get("ServerArgs")
    return method(cls, "add_cli_args") if cls is not None else None


def calls_in(node) -> list:
    return [c for c in ast.walk(node) if isinstance(c, ast.Call)]
