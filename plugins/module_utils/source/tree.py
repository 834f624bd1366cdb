"""Source access and static evaluation: the sglang package as parsed modules, never imported."""
from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path
from typing import Any


class Unresolved(Exception):
    pass


class Module:
    """One parsed source file: module-level assignments, imports and classes."""

    def __init__(self, tree: Tree, rel: str):
        self.rel = rel
        self.text = (tree.root / rel).read_text(encoding="utf-8", errors="replace")
        self.ast = ast.parse(self.text)
        self.lines = self.text.splitlines()
        self.assigns: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, str]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self._index(self.ast.body)

    def _index(self, body):
        for node in body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.assigns[t.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                prev = self.assigns.get(node.target.id)
                if prev is not None:
                    self.assigns[node.target.id] = ast.BinOp(prev, node.op, node.value)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, (ast.If, ast.Try)):  # e.g. `if TYPE_CHECKING:` / try-imports
                self._index(node.body)

    def seg(self, node) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)


class Tree:
    """The installed ``sglang/`` package: lazily parsed modules, static evaluation."""

    def __init__(self, sglang_dir: Path):
        self.pkg = sglang_dir
        self.root = sglang_dir.parent
        self._mods: dict[str, Module | None] = {}

    def module(self, dotted_or_rel: str) -> Module | None:
        rel = dotted_or_rel
        if not rel.endswith(".py"):
            base = rel.replace(".", "/")
            rel = base + ".py" if (self.root / (base + ".py")).is_file() else base + "/__init__.py"
        if rel not in self._mods:
            self._mods[rel] = Module(self, rel) if (self.root / rel).is_file() else None
        return self._mods[rel]

    # -- static evaluation ------------------------------------------------------------
    def lookup(self, mod: Module, name: str, depth: int = 0):
        """(module, node) that defines ``name`` as seen from ``mod``."""
        if depth > 8:
            raise Unresolved(name)
        if name in mod.assigns:
            return mod, mod.assigns[name]
        if name in mod.classes:
            return mod, mod.classes[name]
        if name in mod.imports:
            src_mod, src_name = mod.imports[name]
            if src_mod.split(".")[0] == "sglang":
                other = self.module(src_mod)
                if other is not None:
                    return self.lookup(other, src_name, depth + 1)
        raise Unresolved(name)

    def eval(self, node, mod: Module, local: dict | None = None, depth: int = 0):
        """Evaluate a constant-ish expression; raise Unresolved when it needs run time."""
        if depth > 30:
            raise Unresolved("depth")
        for kinds, how in _EVALUATORS:
            if isinstance(node, kinds):
                return how(self, node, mod, local, depth)
        raise Unresolved(type(node).__name__)

    # One evaluator per kind of node; each raises Unresolved(<node kind>) for a form it does not know.
    def _eval_constant(self, node, mod, local, depth):
        return node.value

    def _eval_sequence(self, node, mod, local, depth):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(self.eval(e.value, mod, local, depth + 1))
            else:
                out.append(self.eval(e, mod, local, depth + 1))
        return tuple(out) if isinstance(node, ast.Tuple) else out

    def _eval_dict(self, node, mod, local, depth):
        return {self.eval(k, mod, local, depth + 1): self.eval(v, mod, local, depth + 1)
                for k, v in zip(node.keys, node.values) if k is not None}

    def _eval_unary(self, node, mod, local, depth):
        if isinstance(node.op, ast.USub):
            return -self.eval(node.operand, mod, local, depth + 1)
        raise Unresolved(type(node).__name__)

    def _eval_binop(self, node, mod, local, depth):
        left, right = self.eval(node.left, mod, local, depth + 1), self.eval(node.right, mod, local, depth + 1)
        if type(node.op) in _BINOPS:
            try:
                return _BINOPS[type(node.op)](left, right)
            except TypeError as e:
                raise Unresolved("binop") from e
        raise Unresolved(type(node).__name__)

    def _eval_fstring(self, node, mod, local, depth):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else str(self.eval(v.value, mod, local, depth + 1))
                       for v in node.values)

    def _eval_name(self, node, mod, local, depth):
        if local is not None and node.id in local:
            val = local[node.id]
            if isinstance(val, Unresolved):
                raise val
            return val
        if node.id in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[node.id]
        m, n = self.lookup(mod, node.id)
        if isinstance(n, ast.ClassDef):
            return _ClassRef(m, n)
        return self.eval(n, m, None, depth + 1)

    def _eval_attribute(self, node, mod, local, depth):
        base = self.eval(node.value, mod, local, depth + 1)
        if isinstance(base, _ClassRef):
            return base.attr(self, node.attr, depth)
        if node.attr == "value" and isinstance(base, _EnumMember):
            return base.value
        raise Unresolved(node.attr)

    def _eval_call(self, node, mod, local, depth):
        """The calls a flag table uses: conversions, empty containers, dict/str methods, ``field(default=)``."""
        ev = functools.partial(self.eval, mod=mod, local=local, depth=depth + 1)
        fname = node.func.id if isinstance(node.func, ast.Name) else (
            node.func.attr if isinstance(node.func, ast.Attribute) else None)
        if fname in _CONVERSIONS and len(node.args) == 1 and not node.keywords:
            val = ev(node.args[0])
            if isinstance(val, _ClassRef):
                val = val.members(self)
            return _CONVERSIONS[fname](val)
        if fname in ("list", "tuple", "dict", "set") and not node.args and not node.keywords:
            return {"list": list, "tuple": tuple, "dict": dict, "set": set}[fname]()
        if isinstance(node.func, ast.Attribute) and fname in ("keys", "values", "lower", "upper"):
            base = ev(node.func.value)
            if isinstance(base, dict) and fname in ("keys", "values"):
                return list(getattr(base, fname)())
            if isinstance(base, str) and fname in ("lower", "upper"):
                return getattr(base, fname)()
        if fname in ("field",) and node.keywords:
            return self._eval_field(node, ev)
        raise Unresolved(type(node).__name__)

    def _eval_field(self, node, ev):
        """A dataclass ``field(...)``'s default."""
        kw = {k.arg: k.value for k in node.keywords}
        if "default" in kw:
            return ev(kw["default"])
        if "default_factory" in kw:
            fac = kw["default_factory"]
            if isinstance(fac, ast.Name) and fac.id in ("list", "dict", "set", "tuple"):
                return {"list": [], "dict": {}, "set": set(), "tuple": ()}[fac.id]
            if isinstance(fac, ast.Lambda):
                return ev(fac.body)
        raise Unresolved(type(node).__name__)

    def _eval_listcomp(self, node, mod, local, depth):
        """``[expr for name in iterable]`` (one generator, no condition)."""
        if len(node.generators) == 1:
            gen = node.generators[0]
            if isinstance(gen.target, ast.Name) and not gen.ifs:
                it = self.eval(gen.iter, mod, local, depth + 1)
                if isinstance(it, _ClassRef):
                    it = it.enum_members(self)
                return [self.eval(node.elt, mod, {**(local or {}), gen.target.id: item}, depth + 1)
                        for item in it]
        raise Unresolved(type(node).__name__)


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Mult: lambda a, b: a * b,
           ast.Sub: lambda a, b: a - b, ast.Pow: lambda a, b: a ** b,
           ast.BitOr: lambda a, b: a | b, ast.Div: lambda a, b: a / b}
_CONVERSIONS = {"list": list, "tuple": tuple, "sorted": sorted, "set": set, "frozenset": frozenset}
# (node kinds, evaluator), in the order Tree.eval tries them
_EVALUATORS = (
    (ast.Constant, Tree._eval_constant),
    ((ast.List, ast.Tuple, ast.Set), Tree._eval_sequence),
    (ast.Dict, Tree._eval_dict),
    (ast.UnaryOp, Tree._eval_unary),
    (ast.BinOp, Tree._eval_binop),
    (ast.JoinedStr, Tree._eval_fstring),
    (ast.Name, Tree._eval_name),
    (ast.Attribute, Tree._eval_attribute),
    (ast.Call, Tree._eval_call),
    (ast.ListComp, Tree._eval_listcomp),
)


@dataclasses.dataclass
class _EnumMember:
    name: str
    value: Any


class _ClassRef:
    """A class seen during evaluation: attribute access reads its class-level assignments."""

    def __init__(self, mod: Module, node: ast.ClassDef):
        self.mod, self.node = mod, node

    def _body(self):
        out = {}
        for st in self.node.body:
            if isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        out[t.id] = st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value:
                out[st.target.id] = st.value
        return out

    def is_enum(self):
        return any("Enum" in ast.unparse(b) for b in self.node.bases)

    def attr(self, tree: Tree, name: str, depth: int):
        body = self._body()
        if name not in body:
            raise Unresolved(name)
        local = _ClassLocals(self, tree, body, depth)
        if self.is_enum():
            return _EnumMember(name, tree.eval(body[name], self.mod, local, depth + 1))
        return tree.eval(body[name], self.mod, local, depth + 1)

    def enum_members(self, tree: Tree):
        if not self.is_enum():
            raise Unresolved("not an enum")
        return [_EnumMember(k, tree.eval(v, self.mod)) for k, v in self._body().items()
                if not k.startswith("_")]

    def members(self, tree: Tree):
        return self.enum_members(tree)


class _ClassLocals(dict):
    """Names visible inside a class body (other class attributes), evaluated on demand."""

    def __init__(self, ref: _ClassRef, tree: Tree, body: dict, depth: int):
        super().__init__()
        self.ref, self.tree, self.body, self.depth = ref, tree, body, depth

    def __contains__(self, key):
        return key in self.body

    def __getitem__(self, key):
        if self.depth > 20:
            raise Unresolved(key)
        return self.tree.eval(self.body[key], self.ref.mod, self, self.depth + 1)


def py_value(v):
    """An evaluated value as plain Python (enum members -> their value)."""
    if isinstance(v, _EnumMember):
        return v.value
    if isinstance(v, list):
        return [py_value(x) for x in v]
    if isinstance(v, tuple):
        return tuple(py_value(x) for x in v)
    if isinstance(v, (set, frozenset)):  # a set's order changes with each process's hash seed: sort it
        return sorted((py_value(x) for x in v), key=lambda x: (type(x).__name__, str(x)))
    return v
