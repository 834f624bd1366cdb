"""Read an installed SGLang package's source (text + ``ast``, never ``import sglang``).

Stdlib only and self-contained: this file is copied to lab hosts and imported there by the
SGLang simulator without Ansible.

    src = load_source("/opt/sglang/lib/python3.11/site-packages/sglang")
    src.version, src.era, src.flags          # flag table, era "A" | "B" | "C"
    build_parser(src)                        # argparse parser that accepts/rejects argv like SGLang
    validate_argv(src, argv)                 # -> [Problem] before anything changes on a host
    normalise_argv(src, argv)                # -> {dest: value}  ("--tp 2" -> {"tp_size": 2})
    predict(src, args, hardware, model_config)   # -> [Finding], one per optimisation

Three layouts of the flag definitions ("eras"):
  A (<= 0.5.13.post1): ``@dataclass ServerArgs`` + ``add_cli_args`` with ``parser.add_argument``.
  B (0.5.14 - 0.5.19): fields ``name: A[T, "help" | Arg(...)] = d`` registered by
     ``add_cli_args_from_dataclass``; deprecated aliases still added by hand.
  C (>= 0.5.20): the same annotations in ``msgspec.Struct`` classes under
     ``sglang/srt/arg_groups/fields/*.py``, listed in ``_INPUT_NAMESPACES``.

Exactness: the option strings, dests, actions, nargs and static choices/defaults are read from
the AST and reproduce SGLang's argparse setup. Choices or defaults computed at run time (plugin
registries, environment, ``ServerArgs`` properties) are marked ``Runtime(expr)``; for choices the
parser then accepts any value. The option set was compared with the real parser built from the
wheel (heavy imports stubbed) for the releases listed in tests/source/test_real_parser.py.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any

__all__ = [
    "FLAG_HISTORY", "Finding", "Flag", "Problem", "Rule", "Runtime", "SglangSource",
    "UnknownLayout", "build_parser", "load_source", "normalise_argv", "predict", "validate_argv",
]


class UnknownLayout(Exception):
    """The installed sglang tree does not match any known flag layout (era)."""


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A value SGLang computes at run time; ``expr`` is its source text."""

    expr: str

    def __repr__(self):
        return f"<runtime: {self.expr}>"


@dataclasses.dataclass
class Flag:
    """One ``add_argument`` call of SGLang's server parser, as read from source."""

    option_strings: list[str]
    dest: str
    type: str | None = None            # "str", "int", "float", or a function name
    choices: list | Runtime | None = None
    default: Any = None                # static value, or Runtime(expr)
    action: str = "store"              # "store", "store_true", "BooleanOptionalAction", ...
    nargs: Any = None
    const: Any = None
    required: bool = False
    help: str | None = None
    deprecated_alias_of: str | None = None   # the flag/dest this one now maps to
    removed_message: str | None = None       # DeprecatedAction(error_message=...): parser.error
    file: str = ""                     # relative to the site-packages folder: sglang/srt/...
    line: int = 0
    field: str = ""                    # ServerArgs field the value ends in (from_cli_args renames)

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append", "extend", "DeprecatedAliasStoreAction",
                               "LoRAPathAction") or self.nargs not in (None, 0)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("choices", "default"):
            if isinstance(getattr(self, k), Runtime):
                d[k] = {"runtime": getattr(self, k).expr}
        return d


@dataclasses.dataclass
class Problem:
    """Something in an argv that the installed release would reject or misread."""

    flag: str
    kind: str          # unknown | removed | renamed | ambiguous | bad_choice | bad_type | missing_value
    message: str
    suggestion: list[str] = dataclasses.field(default_factory=list)
    # "error": the release's parser rejects the argv; "warning": accepted (deprecated alias)
    severity: str = "error"


@dataclasses.dataclass
class Rule:
    """An auto-adjust rule found in the installed source."""

    name: str
    file: str
    line: int
    text: str          # the condition's source line(s), stripped
    data: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Finding:
    """What the installed release will do with one optimisation, and why."""

    name: str
    status: str        # "on" | "auto-disabled" | "unavailable on this hardware" | "off by default"
    value: Any = None
    reason: str = ""
    rule_file: str | None = None
    rule_line: int | None = None
    override: str | None = None
    how_to_enable: str | None = None


# --------------------------------------------------------------------------------------
# Source access and static evaluation
# --------------------------------------------------------------------------------------

class _Unresolved(Exception):
    pass


class _Module:
    """One parsed source file: module-level assignments, imports and classes."""

    def __init__(self, tree: _Tree, rel: str):
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
            elif isinstance(node, ast.If) or isinstance(node, ast.Try):  # e.g. `if TYPE_CHECKING:` / try-imports
                self._index(node.body)

    def seg(self, node) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)


class _Tree:
    """The installed ``sglang/`` package: lazily parsed modules, static evaluation."""

    def __init__(self, sglang_dir: Path):
        self.pkg = sglang_dir
        self.root = sglang_dir.parent
        self._mods: dict[str, _Module | None] = {}

    def module(self, dotted_or_rel: str) -> _Module | None:
        rel = dotted_or_rel
        if not rel.endswith(".py"):
            base = rel.replace(".", "/")
            rel = base + ".py" if (self.root / (base + ".py")).is_file() else base + "/__init__.py"
        if rel not in self._mods:
            self._mods[rel] = _Module(self, rel) if (self.root / rel).is_file() else None
        return self._mods[rel]

    # -- static evaluation ------------------------------------------------------------
    def lookup(self, mod: _Module, name: str, depth: int = 0):
        """(module, node) that defines ``name`` as seen from ``mod``."""
        if depth > 8:
            raise _Unresolved(name)
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
        raise _Unresolved(name)

    def eval(self, node, mod: _Module, local: dict | None = None, depth: int = 0):
        """Evaluate a constant-ish expression; raise _Unresolved when it needs run time."""
        if depth > 30:
            raise _Unresolved("depth")
        ev = functools.partial(self.eval, mod=mod, local=local, depth=depth + 1)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    out.extend(ev(e.value))
                else:
                    out.append(ev(e))
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            return {ev(k): ev(v) for k, v in zip(node.keys, node.values) if k is not None}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            left, right = ev(node.left), ev(node.right)
            ops = {ast.Add: lambda a, b: a + b, ast.Mult: lambda a, b: a * b,
                   ast.Sub: lambda a, b: a - b, ast.Pow: lambda a, b: a ** b,
                   ast.BitOr: lambda a, b: a | b, ast.Div: lambda a, b: a / b}
            if type(node.op) in ops:
                try:
                    return ops[type(node.op)](left, right)
                except TypeError as e:
                    raise _Unresolved("binop") from e
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                else:
                    parts.append(str(ev(v.value)))
            return "".join(parts)
        if isinstance(node, ast.Name):
            if local is not None and node.id in local:
                val = local[node.id]
                if isinstance(val, _Unresolved):
                    raise val
                return val
            if node.id in ("None", "True", "False"):
                return {"None": None, "True": True, "False": False}[node.id]
            m, n = self.lookup(mod, node.id)
            if isinstance(n, ast.ClassDef):
                return _ClassRef(m, n)
            return self.eval(n, m, None, depth + 1)
        if isinstance(node, ast.Attribute):
            base = ev(node.value)
            if isinstance(base, _ClassRef):
                return base.attr(self, node.attr, depth)
            if node.attr == "value" and isinstance(base, _EnumMember):
                return base.value
            raise _Unresolved(node.attr)
        if isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else None)
            if fname in ("list", "tuple", "sorted", "set") and len(node.args) == 1 and not node.keywords:
                val = ev(node.args[0])
                if isinstance(val, _ClassRef):
                    val = val.members(self)
                return {"list": list, "tuple": tuple, "sorted": sorted, "set": set}[fname](val)
            if fname in ("list", "tuple", "dict", "set") and not node.args and not node.keywords:
                return {"list": list, "tuple": tuple, "dict": dict, "set": set}[fname]()
            if isinstance(node.func, ast.Attribute) and fname in ("keys", "values", "lower", "upper"):
                base = ev(node.func.value)
                if isinstance(base, dict) and fname in ("keys", "values"):
                    return list(getattr(base, fname)())
                if isinstance(base, str) and fname in ("lower", "upper"):
                    return getattr(base, fname)()
            if fname in ("field",) and node.keywords:
                kw = {k.arg: k.value for k in node.keywords}
                if "default" in kw:
                    return ev(kw["default"])
                if "default_factory" in kw:
                    fac = kw["default_factory"]
                    if isinstance(fac, ast.Name) and fac.id in ("list", "dict", "set", "tuple"):
                        return {"list": [], "dict": {}, "set": set(), "tuple": ()}[fac.id]
                    if isinstance(fac, ast.Lambda):
                        return ev(fac.body)
        if isinstance(node, ast.ListComp) and len(node.generators) == 1:
            gen = node.generators[0]
            if isinstance(gen.target, ast.Name) and not gen.ifs:
                it = ev(gen.iter)
                if isinstance(it, _ClassRef):
                    it = it.enum_members(self)
                out = []
                for item in it:
                    out.append(self.eval(node.elt, mod, {**(local or {}), gen.target.id: item},
                                         depth + 1))
                return out
        raise _Unresolved(type(node).__name__)


@dataclasses.dataclass
class _EnumMember:
    name: str
    value: Any


class _ClassRef:
    """A class seen during evaluation: attribute access reads its class-level assignments."""

    def __init__(self, mod: _Module, node: ast.ClassDef):
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

    def attr(self, tree: _Tree, name: str, depth: int):
        body = self._body()
        if name not in body:
            raise _Unresolved(name)
        local = _ClassLocals(self, tree, body, depth)
        if self.is_enum():
            return _EnumMember(name, tree.eval(body[name], self.mod, local, depth + 1))
        return tree.eval(body[name], self.mod, local, depth + 1)

    def enum_members(self, tree: _Tree):
        if not self.is_enum():
            raise _Unresolved("not an enum")
        return [_EnumMember(k, tree.eval(v, self.mod)) for k, v in self._body().items()
                if not k.startswith("_")]

    def members(self, tree: _Tree):
        return self.enum_members(tree)


class _ClassLocals(dict):
    """Names visible inside a class body (other class attributes), evaluated on demand."""

    def __init__(self, ref: _ClassRef, tree: _Tree, body: dict, depth: int):
        super().__init__()
        self.ref, self.tree, self.body, self.depth = ref, tree, body, depth

    def __contains__(self, key):
        return key in self.body

    def __getitem__(self, key):
        if self.depth > 20:
            raise _Unresolved(key)
        return self.tree.eval(self.body[key], self.ref.mod, self, self.depth + 1)


def _py(v):
    """An evaluated value as plain Python (enum members -> their value)."""
    if isinstance(v, _EnumMember):
        return v.value
    if isinstance(v, list):
        return [_py(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_py(x) for x in v)
    return v


# --------------------------------------------------------------------------------------
# Flag extraction
# --------------------------------------------------------------------------------------

_SA = "sglang/srt/server_args.py"
_DEPRECATED_ACTIONS = {"DeprecatedAction", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                       "DeprecatedAliasStoreAction"}


def _names_of(node) -> str:
    return ast.unparse(node)


class _Extractor:
    def __init__(self, tree: _Tree):
        self.tree = tree
        self.sa = tree.module(_SA)
        if self.sa is None:
            raise UnknownLayout(f"{tree.pkg}: no sglang/srt/server_args.py; is this an sglang package?")
        self.flags: list[Flag] = []

    # -- era ------------------------------------------------------------------------
    def era(self) -> str:
        cls = self.sa.classes.get("ServerArgs")
        if "_INPUT_NAMESPACES" in self.sa.assigns:
            return "C"
        if cls is None:
            raise UnknownLayout(f"{self.sa.rel}: no class ServerArgs and no _INPUT_NAMESPACES; "
                                "unknown sglang flag layout")
        add = self._method(cls, "add_cli_args")
        if add is None:
            raise UnknownLayout(f"{self.sa.rel}: ServerArgs has no add_cli_args(); unknown flag layout")
        calls = [c for c in ast.walk(add) if isinstance(c, ast.Call)]
        if any(_callee(c) == "add_cli_args_from_dataclass" for c in calls):
            return "B"
        if any(_callee(c) == "add_argument" for c in calls) and _is_dataclass(cls):
            return "A"
        raise UnknownLayout(f"{self.sa.rel}: ServerArgs.add_cli_args neither calls parser.add_argument "
                            "on a @dataclass nor add_cli_args_from_dataclass; unknown flag layout")

    @staticmethod
    def _method(cls: ast.ClassDef, name: str):
        for st in cls.body:
            if isinstance(st, ast.FunctionDef) and st.name == name:
                return st
        return None

    # -- add_cli_args walk ----------------------------------------------------------------
    def run(self, era: str) -> list[Flag]:
        cls = self.sa.classes.get("ServerArgs")
        add = self._method(cls, "add_cli_args")
        self.class_defaults = self._class_defaults(era)
        local: dict = {}
        self._walk(add.body, local, era)
        renames = self._renames(cls)
        for f in self.flags:
            f.field = renames.get(f.dest, f.dest)
        return self.flags

    def _renames(self, cls) -> dict:
        """``args.tp_size = args.tensor_parallel_size`` lines of from_cli_args: dest -> field."""
        fn = self._method(cls, "from_cli_args") if cls is not None else None
        out = {}
        for st in (fn.body if fn else []):
            if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                    and isinstance(st.targets[0], ast.Attribute) and isinstance(st.value, ast.Attribute):
                out[st.value.attr] = st.targets[0].attr
        return out

    def _walk(self, body, local, era):
        for st in body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                try:
                    local[st.targets[0].id] = self._eval(st.value, local)
                except _Unresolved as e:
                    local[st.targets[0].id] = _Unresolved(self.sa.seg(st.value))
                    del e
                continue
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                call = st.value
                if _callee(call) == "add_argument":
                    self.flags.append(self._from_add_argument(call, local, self.sa))
                elif _callee(call) == "add_cli_args_from_dataclass":
                    self.flags.extend(self._from_fields(era))
                continue
            for attr in ("body", "orelse", "finalbody"):
                sub = getattr(st, attr, None)
                if isinstance(sub, list) and not isinstance(st, (ast.FunctionDef, ast.ClassDef)):
                    self._walk(sub, local, era)

    def _eval(self, node, local, mod=None):
        return self.tree.eval(node, mod or self.sa, local)

    def _class_defaults(self, era) -> dict:
        """ServerArgs field name -> default expression node (and its module)."""
        out = {}
        for mod, cls in self._field_classes(era):
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    out[st.target.id] = (mod, st)
        return out

    def _field_classes(self, era):
        if era in ("A", "B"):
            return [(self.sa, self.sa.classes["ServerArgs"])]
        out = []
        node = self.sa.assigns["_INPUT_NAMESPACES"]
        for e in getattr(node, "elts", []):
            if not isinstance(e, ast.Name):
                raise UnknownLayout(f"{self.sa.rel}: _INPUT_NAMESPACES entry {ast.unparse(e)} is not a name")
            try:
                m, cls = self.tree.lookup(self.sa, e.id)
            except _Unresolved as exc:
                raise UnknownLayout(f"{self.sa.rel}: cannot find class {e.id} of _INPUT_NAMESPACES") from exc
            if not isinstance(cls, ast.ClassDef):
                raise UnknownLayout(f"{self.sa.rel}: {e.id} in _INPUT_NAMESPACES is not a class")
            out.append((m, cls))
        sa_cls = self.sa.classes.get("ServerArgs")
        if sa_cls is not None:
            out.append((self.sa, sa_cls))
        return out

    def _default_of(self, dest: str):
        hit = self.class_defaults.get(dest)
        if hit is None:
            raise _Unresolved(dest)
        mod, st = hit
        if st.value is None:
            return None
        return _py(self.tree.eval(st.value, mod))

    # -- manual add_argument ---------------------------------------------------------------
    def _from_add_argument(self, call: ast.Call, local, mod: _Module) -> Flag:
        opts = []
        for a in call.args:
            try:
                opts.append(self._eval(a, local, mod))
            except _Unresolved:
                opts.append(mod.seg(a))
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        f = Flag(option_strings=list(opts), dest="", file=mod.rel, line=call.lineno)
        f.dest = self._str_kw(kw, "dest", local, mod) or _auto_dest(opts)
        self._apply_kwargs(f, kw, local, mod)
        return f

    def _str_kw(self, kw, key, local, mod):
        if key not in kw:
            return None
        try:
            return self._eval(kw[key], local, mod)
        except _Unresolved:
            return mod.seg(kw[key])

    def _apply_kwargs(self, f: Flag, kw: dict, local, mod: _Module):
        act = kw.get("action")
        if act is not None:
            f.action = act.value if isinstance(act, ast.Constant) else _last_name(act)
        if "type" in kw:
            f.type = _last_name(kw["type"]) if not isinstance(kw["type"], ast.Lambda) else "lambda"
        elif f.action == "store" and "nargs" not in kw:
            f.type = None
        if "choices" in kw:
            try:
                f.choices = list(_py(self._eval(kw["choices"], local, mod)))
            except (_Unresolved, TypeError):
                f.choices = Runtime(mod.seg(kw["choices"]))
        if "nargs" in kw:
            f.nargs = self._safe(kw["nargs"], local, mod)
        if "const" in kw:
            f.const = self._safe(kw["const"], local, mod)
        if "required" in kw:
            f.required = bool(self._safe(kw["required"], local, mod))
        if "help" in kw:
            h = self._safe(kw["help"], local, mod)
            f.help = h if isinstance(h, str) else (mod.seg(kw["help"]) if kw["help"] else None)
            if isinstance(kw["help"], ast.Attribute) and kw["help"].attr == "SUPPRESS":
                f.help = "==SUPPRESS=="
        f.default = self._default_for(f, kw, local, mod)
        if f.action == "BooleanOptionalAction":
            f.option_strings = _with_no_forms(f.option_strings)
        if "nargs" not in kw:
            f.nargs = _implicit_nargs(f.action)
        if f.action in _DEPRECATED_ACTIONS:
            new = kw.get("new_flag")
            f.deprecated_alias_of = self._safe(new, local, mod) if new is not None else None
            if f.deprecated_alias_of is None and f.action != "DeprecatedAction":
                f.deprecated_alias_of = f.dest
            if "error_message" in kw:
                f.removed_message = self._safe(kw["error_message"], local, mod)
            if "const_value" in kw:
                f.const = self._safe(kw["const_value"], local, mod)
        elif f.help and ("deprecated" in f.help.lower()[:40]) and f.deprecated_alias_of is None:
            m = re.search(r"use (--[a-z0-9-]+(?:[= ][\w{},.-]+)?)", f.help, re.IGNORECASE)
            if m:
                f.deprecated_alias_of = m.group(1)

    def _safe(self, node, local, mod):
        try:
            return _py(self._eval(node, local, mod))
        except _Unresolved:
            return Runtime(mod.seg(node))

    def _default_for(self, f: Flag, kw, local, mod):
        if "default" in kw:
            node = kw["default"]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "ServerArgs":
                try:
                    return self._default_of(node.attr)
                except _Unresolved:
                    return Runtime(mod.seg(node))
            if isinstance(node, ast.Attribute) and node.attr == "SUPPRESS":
                return "==SUPPRESS=="
            if isinstance(node, ast.Call) and _callee(node) == "_declared_default" and node.args:
                try:
                    return self._default_of(self._eval(node.args[0], local, mod))
                except _Unresolved:
                    return Runtime(mod.seg(node))
            return self._safe(node, local, mod)
        if f.action in ("store_true",):
            return False
        if f.action == "store_false":
            return True
        if f.action == "DeprecatedStoreTrueAction":
            return False
        return None

    # -- dataclass / Struct fields (eras B, C) -------------------------------------------------
    def _from_fields(self, era) -> list[Flag]:
        items = []  # (name, mod, AnnAssign)
        seen = set()
        for mod, cls in self._field_classes(era):
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    name = st.target.id
                    ann = ast.unparse(st.annotation)
                    if ann.startswith(("ClassVar", "typing.ClassVar")) or name in seen:
                        continue
                    if era == "C" and cls.name == "ServerArgs":
                        continue  # not an input field of the assembled record
                    seen.add(name)
                    items.append((name, mod, st))
        if era == "C":
            order_mod = self.tree.module("sglang/srt/arg_groups/field_order.py")
            order = []
            if order_mod is not None and "POSITIONAL_FIELD_ORDER" in order_mod.assigns:
                order = list(self.tree.eval(order_mod.assigns["POSITIONAL_FIELD_ORDER"], order_mod))
            pos = {n: i for i, n in enumerate(order)}
            known = sorted((it for it in items if it[0] in pos), key=lambda it: pos[it[0]])
            items = known + [it for it in items if it[0] not in pos]
        out = []
        for name, mod, st in items:
            f = self._field_flag(name, mod, st)
            if f is not None:
                out.append(f)
        return out

    def _field_flag(self, name: str, mod: _Module, st: ast.AnnAssign) -> Flag | None:
        ann = st.annotation
        if not (isinstance(ann, ast.Subscript) and _last_name(ann.value) in ("A", "Annotated")):
            return None
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        raw, meta = elts[0], None
        for e in elts[1:]:
            if isinstance(e, ast.Call) and _callee(e) == "Arg":
                meta = {k.arg: k.value for k in e.keywords if k.arg}
                if e.args:  # positional help
                    meta.setdefault("help", e.args[0])
                break
            if isinstance(e, ast.Call):
                continue  # NS(...), Derived(...)
            try:
                val = self.tree.eval(e, mod)
            except _Unresolved:
                continue
            if isinstance(val, str):
                meta = {"help": e}
                break
        if meta is None:
            return None
        if "no_cli" in meta and self._safe(meta["no_cli"], None, mod) is True:
            return None
        cli = self._safe(meta["cli_name"], None, mod) if "cli_name" in meta else None
        cli = cli or "--" + name.replace("_", "-")
        aliases = self._safe(meta["aliases"], None, mod) if "aliases" in meta else None
        names = [cli] + list(aliases or [])
        f = Flag(option_strings=names, dest=name, file=mod.rel, line=st.lineno)
        if st.value is not None:
            try:
                f.default = _py(self.tree.eval(st.value, mod))
            except _Unresolved:
                f.default = Runtime(mod.seg(st.value))
        missing = st.value is None
        h = self._safe(meta["help"], None, mod) if "help" in meta else ""
        f.help = h if isinstance(h, str) else None

        def set_choices(node):
            try:
                f.choices = list(_py(self.tree.eval(node, mod)))
            except (_Unresolved, TypeError):
                f.choices = Runtime(mod.seg(node))

        if "action" in meta:
            act = meta["action"]
            f.action = act.value if isinstance(act, ast.Constant) else _last_name(act)
            if "action_kwargs" in meta:
                ak = meta["action_kwargs"]
                if isinstance(ak, ast.Dict):
                    for k, v in zip(ak.keys, ak.values):
                        key = self._safe(k, None, mod)
                        if key == "choices":
                            set_choices(v)
                        elif key == "nargs":
                            f.nargs = self._safe(v, None, mod)
                        elif key == "type":
                            f.type = _last_name(v)
                        elif key == "const":
                            f.const = self._safe(v, None, mod)
                        elif key == "default":
                            f.default = self._safe(v, None, mod)
                        elif key == "new_flag":
                            f.deprecated_alias_of = self._safe(v, None, mod)
            if f.action == "BooleanOptionalAction":
                f.option_strings = _with_no_forms(names)
            if f.nargs is None:
                f.nargs = _implicit_nargs(f.action)
            if missing and f.default is None and f.action == "store_true":
                f.default = False
            return f
        inner, _opt = _unwrap_optional(raw)
        type_parser = _last_name(meta["type_parser"]) if "type_parser" in meta else None
        lit = _literal_values(inner, self.tree, mod)
        if lit is not None:
            if "choices" in meta:
                set_choices(meta["choices"])
            else:
                f.choices = lit
            f.type = type_parser or _infer_type(type(lit[0]).__name__ if lit else "str")
            if "const" in meta:
                f.const = self._safe(meta["const"], None, mod)
            return f
        if _is_list(inner) and type_parser is None:
            elem = _list_elem(inner)
            f.type = _infer_type(elem)
            f.nargs = self._safe(meta["nargs"], None, mod) if "nargs" in meta else "+"
            if "choices" in meta:
                set_choices(meta["choices"])
            if "const" in meta:
                f.const = self._safe(meta["const"], None, mod)
            return f
        if _last_name(inner) == "bool":
            f.action = "store_true"
            f.nargs = 0
            if missing:
                f.default = False
            return f
        f.type = type_parser or _infer_type(_last_name(inner))
        if "choices" in meta:
            set_choices(meta["choices"])
        if "nargs" in meta:
            f.nargs = self._safe(meta["nargs"], None, mod)
        if "const" in meta:
            f.const = self._safe(meta["const"], None, mod)
        req = self._safe(meta["required"], None, mod) if "required" in meta else None
        if (req is True or (req is None and missing)) and any(n.startswith("-") for n in names):
            f.required = True
        return f


def _callee(call: ast.Call) -> str | None:
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else (fn.id if isinstance(fn, ast.Name) else None)


def _last_name(node) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr if node.attr not in ("loads",) else ast.unparse(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ast.unparse(node)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def _auto_dest(opts) -> str:
    longs = [o for o in opts if isinstance(o, str) and o.startswith("--")]
    first = (longs or [o for o in opts if isinstance(o, str)] or ["?"])[0]
    return first.lstrip("-").replace("-", "_")


_NARGS0 = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version",
           "BooleanOptionalAction", "DeprecatedAction", "DeprecatedStoreTrueAction",
           "DeprecatedStoreConstAction"}


def _implicit_nargs(action: str):
    """argparse's nargs for an action given without nargs= (0 for flags that take no value)."""
    return 0 if action in _NARGS0 else None


def _with_no_forms(names):
    out = []
    for n in names:
        out.append(n)
        if n.startswith("--"):
            out.append("--no-" + n[2:])
    return out


def _unwrap_optional(node):
    if isinstance(node, ast.Subscript) and _last_name(node.value) == "Optional":
        return node.slice, True
    if isinstance(node, ast.Subscript) and _last_name(node.value) == "Union":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        non_none = [e for e in elts if not (isinstance(e, ast.Constant) and e.value is None)
                    and _last_name(e) != "None"]
        if len(non_none) == 1:
            return non_none[0], True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = []

        def flat(n):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                flat(n.left)
                flat(n.right)
            else:
                parts.append(n)
        flat(node)
        non_none = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(non_none) == 1:
            return non_none[0], True
    return node, False


def _literal_values(node, tree: _Tree, mod: _Module):
    if isinstance(node, ast.Subscript) and _last_name(node.value) == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        try:
            return [_py(tree.eval(e, mod)) for e in elts]
        except _Unresolved:
            return [ast.unparse(e) for e in elts]
    return None


def _is_list(node) -> bool:
    if isinstance(node, ast.Subscript):
        return _last_name(node.value) in ("List", "list")
    return _last_name(node) in ("List", "list")


def _list_elem(node) -> str:
    if isinstance(node, ast.Subscript):
        return _last_name(node.slice)
    return "str"


def _infer_type(name: str) -> str:
    return name if name in ("str", "int", "float") else "str"


# --------------------------------------------------------------------------------------
# Public: load_source
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class SglangSource:
    """What the installed release's source says: version, era, flags and auto-adjust rules."""

    path: str
    version: str
    era: str
    flags: list[Flag]
    rules: dict[str, Rule] = dataclasses.field(default_factory=dict)
    _tree: Any = dataclasses.field(default=None, repr=False)

    @functools.cached_property
    def by_option(self) -> dict[str, Flag]:
        return {o: f for f in self.flags for o in f.option_strings}

    @functools.cached_property
    def by_dest(self) -> dict[str, list[Flag]]:
        out: dict[str, list[Flag]] = {}
        for f in self.flags:
            out.setdefault(f.dest, []).append(f)
        return out

    def option_strings(self) -> list[str]:
        """Every option string the parser accepts, including -h/--help."""
        return ["-h", "--help"] + [o for f in self.flags for o in f.option_strings]

    def has(self, option: str) -> bool:
        return option in self.by_option

    def version_tuple(self) -> tuple:
        return _vtuple(self.version)


def _vtuple(v: str) -> tuple:
    out = []
    for p in re.split(r"[.+]", v):
        m = re.match(r"(\d+)", p)
        if m and p.isdigit():
            out.append(int(p))
        elif p.startswith("post") and p[4:].isdigit():
            out.append(int(p[4:]) / 1000)  # 0.5.13.post1 sorts after 0.5.13, before 0.5.14
            break
        else:
            break
    while len(out) < 3:
        out.append(0)
    return tuple(out)


def _read_version(pkg: Path) -> str:
    for rel in ("_version.py", "version.py"):
        p = pkg / rel
        if not p.is_file():
            continue
        tree = ast.parse(p.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str):
                if any(isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in node.targets):
                    return node.value.value
    # Installed without _version.py: the dist-info next to the package knows.
    for meta in sorted(pkg.parent.glob("sglang-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise UnknownLayout(f"{pkg}: cannot read the sglang version (no _version.py/version.py "
                        "with a literal __version__, no sglang-*.dist-info)")


def load_source(sglang_dir) -> SglangSource:
    """Read the sglang package at ``sglang_dir`` (the folder holding ``srt/server_args.py``)."""
    pkg = Path(sglang_dir)
    if pkg.name != "sglang" and (pkg / "sglang").is_dir():
        pkg = pkg / "sglang"
    if not (pkg / "srt" / "server_args.py").is_file():
        raise UnknownLayout(f"{pkg}: no srt/server_args.py; expected the installed sglang/ package folder")
    version = _read_version(pkg)
    tree = _Tree(pkg)
    ex = _Extractor(tree)
    era = ex.era()
    try:
        flags = ex.run(era)
    except UnknownLayout:
        raise
    except (SyntaxError, KeyError, AttributeError) as e:
        raise UnknownLayout(f"{pkg}: sglang {version} looks like era {era} but reading its flags "
                            f"failed: {type(e).__name__}: {e}") from e
    if len(flags) < 50:
        raise UnknownLayout(f"{pkg}: sglang {version} era {era}: only {len(flags)} flags found; "
                            "the flag layout changed")
    src = SglangSource(path=str(pkg), version=version, era=era, flags=flags, _tree=tree)
    src.rules = _extract_rules(src, tree)
    return src



# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------

def _human_readable_int(value: str) -> int:
    """SGLang's human_readable_int: '128k' -> 128000, '1Ki' -> 1024, '25.6k' -> 25600."""
    value = value.strip()
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suf, mul in iec.items():
        if value.endswith(suf):
            return int(value[: -len(suf)]) * mul
    for suf, mul in si.items():
        if value.endswith(suf):
            return int(float(value[: -len(suf)]) * mul)
    return int(value)


_human_readable_int.__name__ = "human_readable_int"


def _json_list_type(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list.") from e


def _nullable_str(value: str):
    return None if not value or value == "None" else value


def _parse_cuda_graph_backend_arg(raw: str) -> str:
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _opaque(name: str):
    """A type function the reader does not reproduce: accept the text as is."""
    def conv(value):
        return value
    conv.__name__ = name
    return conv


_TYPES = {"str": str, "int": int, "float": float, "json.loads": json.loads,
          "human_readable_int": _human_readable_int, "json_list_type": _json_list_type,
          "nullable_str": _nullable_str, "parse_cuda_graph_backend_arg": _parse_cuda_graph_backend_arg}


class _StoreConst(argparse.Action):
    """DeprecatedStoreTrueAction / DeprecatedStoreConstAction: no value, store a constant."""

    def __init__(self, option_strings, dest, const=True, default=None, **kwargs):
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, const=const, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


class _Removed(argparse.Action):
    """DeprecatedAction: no value; errors with the release's message or does nothing."""

    def __init__(self, option_strings, dest, error_message=None, **kwargs):
        kwargs.pop("nargs", None)
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.error_message is not None:
            parser.error(self.error_message)


def build_parser(src: SglangSource, prog: str = "sglang serve") -> argparse.ArgumentParser:
    """An argparse parser with SGLang's option strings, actions, nargs, types and choices.

    Errors use argparse's own wording ("unrecognized arguments: ...", "ambiguous option: ...",
    "argument --x: invalid choice: ..."), as the installed release's parser does. Choices computed
    at run time are not enforced.
    """
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=True)
    for f in src.flags:
        kw: dict = {"dest": f.dest}
        if f.help is not None:
            kw["help"] = argparse.SUPPRESS if f.help == "==SUPPRESS==" else f.help.replace("%", "%%")
        default = f.default
        if isinstance(default, Runtime):
            default = None
        elif default == "==SUPPRESS==":
            default = argparse.SUPPRESS
        opts = list(f.option_strings)
        act = f.action
        if act == "BooleanOptionalAction":
            opts = [o for o in opts if not o.startswith("--no-") or o[5:] and "--" + o[5:] not in opts]
            parser.add_argument(*opts, action=argparse.BooleanOptionalAction, default=default,
                                **kw)
            continue
        if act in ("store_true", "store_false"):
            parser.add_argument(*opts, action=act, default=default, **kw)
            continue
        if act == "DeprecatedAction":
            parser.add_argument(*opts, action=_Removed, error_message=f.removed_message, **kw)
            continue
        if act in ("DeprecatedStoreTrueAction", "DeprecatedStoreConstAction"):
            const = True if act == "DeprecatedStoreTrueAction" else f.const
            parser.add_argument(*opts, action=_StoreConst, const=const, default=default, **kw)
            continue
        if act in ("store_const", "append_const", "count"):
            parser.add_argument(*opts, action=act, const=f.const, default=default, **kw)
            continue
        # store, DeprecatedAliasStoreAction, LoRAPathAction and other value-taking actions
        if f.type is not None:
            kw["type"] = _TYPES.get(f.type) or _opaque(f.type)
        if isinstance(f.choices, list):
            kw["choices"] = f.choices
        if f.nargs is not None:
            kw["nargs"] = f.nargs
            if f.nargs == "?" and f.const is not None and not isinstance(f.const, Runtime):
                kw["const"] = f.const
        if f.required:
            kw["required"] = True
        parser.add_argument(*opts, action="store", default=default, **kw)
    return parser


# --------------------------------------------------------------------------------------
# Flag history (curated): flags that moved, and what replaces them in a given release
# --------------------------------------------------------------------------------------

# old flag -> (what happened, [(replacement option, value or None), ...] in order of preference).
# The first replacement the installed release accepts (option exists, value valid) is suggested.
FLAG_HISTORY: dict[str, tuple[str, list[tuple[str, str | None]]]] = {
    "--enable-piecewise-cuda-graph": (
        "opt-in piecewise CUDA graph (<= 0.5.9); piecewise became the default, then the prefill "
        "CUDA graph backend became --cuda-graph-backend-prefill (0.5.14)",
        [("--cuda-graph-backend-prefill", "tc_piecewise"), ("--cuda-graph-backend-prefill", "breakable"),
         ("--enforce-piecewise-cuda-graph", None)]),
    "--enforce-piecewise-cuda-graph": (
        "0.5.10-0.5.13 flag, a deprecated alias of --cuda-graph-backend-prefill=tc_piecewise in "
        "0.5.14-0.5.19, removed in 0.5.20; an explicit prefill backend skips the auto-disable rules",
        [("--cuda-graph-backend-prefill", "tc_piecewise"), ("--cuda-graph-backend-prefill", "breakable"),
         ("--enable-piecewise-cuda-graph", None)]),
    "--disable-piecewise-cuda-graph": (
        "0.5.10-0.5.13 flag, deprecated alias in 0.5.14-0.5.19, removed in 0.5.20",
        [("--cuda-graph-backend-prefill", "disabled")]),
    "--enable-breakable-cuda-graph": (
        "deprecated alias of --cuda-graph-backend-prefill=breakable, removed in 0.5.20",
        [("--cuda-graph-backend-prefill", "breakable")]),
    "--piecewise-cuda-graph-tokens": ("removed in 0.5.20", [("--cuda-graph-bs-prefill", None)]),
    "--piecewise-cuda-graph-max-tokens": ("removed in 0.5.20", [("--cuda-graph-max-bs-prefill", None)]),
    "--piecewise-cuda-graph-compiler": ("removed in 0.5.20", [("--cuda-graph-tc-compiler", None)]),
    "--cuda-graph-max-bs": (
        "split into --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill (0.5.14); deprecated "
        "alias until 0.5.19; from 0.5.20 an ambiguous prefix",
        [("--cuda-graph-max-bs-decode", None), ("--cuda-graph-max-bs-prefill", None)]),
    "--cuda-graph-bs": (
        "split into --cuda-graph-bs-decode / --cuda-graph-bs-prefill (0.5.14); removed in 0.5.20",
        [("--cuda-graph-bs-decode", None), ("--cuda-graph-bs-prefill", None)]),
    "--enable-flashinfer-allreduce-fusion": (
        "replaced by --flashinfer-allreduce-fusion-backend (0.5.14)",
        [("--flashinfer-allreduce-fusion-backend", "auto")]),
    "--stream-output": ("removed in 0.5.20", [("--incremental-streaming-output", None)]),
    "--nsa-prefill-backend": ("renamed (DSA), removed in 0.5.20", [("--dsa-prefill-backend", None)]),
    "--nsa-decode-backend": ("renamed (DSA), removed in 0.5.20", [("--dsa-decode-backend", None)]),
    "--speculative-dflash-draft-window-size": ("removed in 0.5.20",
                                               [("--speculative-draft-window-size", None)]),
    "--mamba-scheduler-strategy": ("removed in 0.5.20", [("--mamba-radix-cache-strategy", None)]),
    "--enable-dsa-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-nsa-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-prefill-context-parallel": ("removed in 0.5.20", [("--enable-prefill-cp", None)]),
    "--enable-gdn-replayssm-spec": ("removed in 0.5.20", [("--enable-linear-replayssm-spec", None)]),
    "--dsa-prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--nsa-prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--prefill-cp-mode": ("removed in 0.5.20", [("--cp-strategy", None)]),
    "--enable-expert-distribution-metrics": (
        "removed; use --expert-balancedness-report-mode {off,server_log,prometheus,both}",
        [("--expert-balancedness-report-mode", "prometheus")]),
    "--collect-tokens-histogram": (
        "removed in 0.5.20; token histograms are collected when --enable-metrics is set",
        [("--enable-metrics", None)]),
    "--prefill-round-robin-balance": ("removed in 0.5.20 (no effect since deprecation)", []),
    "--disable-cuda-graph": (
        "deprecated: use --cuda-graph-backend-decode disabled and --cuda-graph-backend-prefill disabled",
        [("--cuda-graph-backend-decode", "disabled")]),
}


# --------------------------------------------------------------------------------------
# Validation and normalisation
# --------------------------------------------------------------------------------------

class _ParseError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParseError(message)

    def exit(self, status=0, message=None):
        raise _ParseError(message or f"exit {status}")


def _parser(src: SglangSource, lenient: bool = False) -> argparse.ArgumentParser:
    """The release's parser (cached on ``src``), raising _ParseError instead of exiting.

    ``lenient``: no option is required (normalising a partial argv).
    """
    cache = src.__dict__.setdefault("_parser_cache", {})
    if lenient not in cache:
        p = build_parser(src)
        p.__class__ = _RaisingParser
        if lenient:
            for a in p._actions:
                a.required = False
        cache[lenient] = p
    return cache[lenient]


def _looks_like_option(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not re.fullmatch(r"-\d+(\.\d*)?([eE][-+]?\d+)?", tok)


def _resolve_option(src: SglangSource, name: str):
    """(Flag, matched option) | ("ambiguous", [candidates]) | None, with argparse's abbreviation rules."""
    if name in src.by_option:
        return src.by_option[name], name
    if name.startswith("--"):
        cands = [o for o in src.by_option if o.startswith(name)]
        if len(cands) == 1:
            return src.by_option[cands[0]], cands[0]
        if len(cands) > 1:
            return "ambiguous", cands
    return None


def _replacement(src: SglangSource, old: str) -> tuple[str | None, str]:
    """The replacement for ``old`` that THIS release accepts, and the history note."""
    note, cands = FLAG_HISTORY.get(old, ("", []))
    parser = _parser(src)
    for opt, value in cands:
        if not src.has(opt):
            continue
        if value is None:
            return opt, note
        action = next(a for a in parser._actions if opt in a.option_strings)
        try:
            parser._get_values(action, [value])
        except (argparse.ArgumentError, _ParseError):
            continue
        return f"{opt} {value}", note
    return None, note


def _fmt_cands(cands):
    return ", ".join(cands)


def validate_argv(src: SglangSource, argv: list[str]) -> list[Problem]:
    """Every problem the installed release's parser would hit in ``argv`` (not just the first).

    Deprecated aliases that still work are reported as kind "renamed" with their replacement;
    everything else (unknown, removed, ambiguous, bad_choice, bad_type, missing_value) makes
    ``sglang serve`` exit with an argparse error.
    """
    v = src.version
    out: list[Problem] = []
    parser = _parser(src)
    actions = {o: a for a in parser._actions for o in a.option_strings}
    i = 0
    argv = list(argv)
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not _looks_like_option(tok):
            out.append(Problem(tok, "unknown", f"sglang {v} takes no positional arguments: "
                               f"'{tok}' would fail with 'unrecognized arguments: {tok}'. "
                               "Put it after the flag it belongs to, or remove it.", []))
            continue
        name, eq, inline = tok.partition("=")
        hit = _resolve_option(src, name)
        if hit is None:
            out.append(_unknown_problem(src, name))
            # skip its value(s), if any: tokens up to the next option
            while i < len(argv) and not _looks_like_option(argv[i]) and not eq:
                i += 1
                break
            continue
        if hit[0] == "ambiguous":
            cands = hit[1]
            hist, _note = _replacement(src, name) if name in FLAG_HISTORY else (None, "")
            msg = (f"{name} is ambiguous in sglang {v}: argparse fails with 'ambiguous option: {name} "
                   f"could match {_fmt_cands(cands)}'. Spell the flag in full: one of "
                   f"{_fmt_cands(cands)}.")
            out.append(Problem(name, "ambiguous", msg, cands))
            while i < len(argv) and not _looks_like_option(argv[i]) and not eq:
                i += 1
            continue
        flag, opt = hit
        action = actions[opt]
        # values
        nargs = action.nargs
        if eq:
            if nargs == 0:
                out.append(Problem(opt, "bad_type", f"{opt} takes no value in sglang {v}: argparse fails "
                                   f"with 'argument {_astr(action)}: ignored explicit argument "
                                   f"'{inline}''. Write {opt} alone.", []))
                continue
            values = [inline]
        else:
            values = []
            want = {None: (1, 1), "?": (0, 1), "*": (0, None), "+": (1, None), 0: (0, 0)}.get(
                nargs, (nargs, nargs) if isinstance(nargs, int) else (1, 1))
            lo, hi = want
            while i < len(argv) and (hi is None or len(values) < hi) and not _looks_like_option(argv[i]):
                values.append(argv[i])
                i += 1
            if len(values) < lo:
                need = "expected one argument" if nargs is None else (
                    "expected at least one argument" if nargs == "+" else f"expected {nargs} arguments")
                out.append(Problem(opt, "missing_value", f"{opt} needs a value in sglang {v}: argparse "
                                   f"fails with 'argument {_astr(action)}: {need}'. Give it a value"
                                   + (f" (one of {_fmt_cands(map(str, flag.choices))})"
                                      if isinstance(flag.choices, list) else "") + ".",
                                   [str(c) for c in flag.choices] if isinstance(flag.choices, list) else []))
                continue
        if flag.removed_message:
            repl, _ = _replacement(src, name if name in FLAG_HISTORY else opt)
            out.append(Problem(opt, "removed", f"{opt} is removed in sglang {v}: it fails with "
                               f"'{flag.removed_message}'" + (f" Use {repl} instead." if repl else ""),
                               [repl] if repl else []))
            continue
        if flag.deprecated_alias_of or flag.action in _DEPRECATED_ACTIONS:
            new = flag.deprecated_alias_of
            out.append(Problem(opt, "renamed", f"{opt} is a deprecated alias in sglang {v} (still "
                               f"accepted, with a warning)" + (f"; use {new} instead." if new else
                                                               "; it has no effect, remove it."),
                               [new] if new else [], severity="warning"))
        if values and nargs != 0:
            try:
                parser._get_values(action, list(values))
            except argparse.ArgumentError as e:
                kind = "bad_choice" if "invalid choice" in str(e) else "bad_type"
                sugg = [str(c) for c in flag.choices] if isinstance(flag.choices, list) else []
                if kind == "bad_choice":
                    bad = str(e).split("invalid choice: ", 1)[1].split(" (choose", 1)[0]
                    close = difflib.get_close_matches(bad.strip("'\""), sugg, n=3, cutoff=0.5)
                    hint = f" Did you mean {', '.join(close)}?" if close else ""
                    msg = (f"{opt}: value not accepted by sglang {v}: argparse fails with '{e}'. "
                           f"Use one of: {', '.join(sugg)}.{hint}")
                else:
                    tname = flag.type or "value"
                    msg = (f"{opt}: value not accepted by sglang {v}: argparse fails with '{e}'. "
                           f"Give a valid {tname}.")
                out.append(Problem(opt, kind, msg, sugg))
    # required options (e.g. --model-path)
    given = set()
    for tok in argv:
        if _looks_like_option(tok):
            hit = _resolve_option(src, tok.partition("=")[0])
            if hit and hit[0] != "ambiguous":
                given.add(hit[0].dest)
    for a in parser._actions:
        if a.required and a.dest not in given:
            out.append(Problem(a.option_strings[0], "missing_value",
                               f"sglang {v} requires {a.option_strings[0]}: argparse fails with 'the "
                               f"following arguments are required: {_astr(a)}'. Add it.", []))
    return out


def _astr(action) -> str:
    return "/".join(action.option_strings)


def _unknown_problem(src: SglangSource, name: str) -> Problem:
    v = src.version
    if name in FLAG_HISTORY:
        repl, note = _replacement(src, name)
        kind = "removed"
        msg = (f"{name} is not a flag of sglang {v} ({note}): it fails with 'unrecognized arguments: "
               f"{name}'. " + (f"In {v} use {repl}." if repl else "Remove it; it has no replacement in "
                                                                  f"{v}."))
        return Problem(name, kind, msg, [repl] if repl else [])
    longs = [o for o in src.by_option if o.startswith("--")]
    close = difflib.get_close_matches(name, longs, n=3, cutoff=0.6)
    msg = f"{name} is not a flag of sglang {v}: it fails with 'unrecognized arguments: {name}'."
    msg += f" Did you mean {', '.join(close)}?" if close else " Remove it."
    return Problem(name, "unknown", msg, close)


def normalise_argv(src: SglangSource, argv: list[str]) -> dict:
    """``{dest: value}`` for what ``argv`` sets, resolved the way the release's parser resolves it.

    Abbreviations (``--tp 2`` -> ``tp_size: 2``), aliases (``--tensor-parallel-size``), ``--x=v``
    and ``--no-x`` forms, types and order (later wins) are all handled by argparse itself; only
    dests the argv sets appear (defaults are left out). Raises ValueError with argparse's message
    when the argv is invalid for this release.
    """
    parser = _parser(src, lenient=True)
    # parse onto a namespace where every dest is a sentinel: what changes is what argv set
    ns = argparse.Namespace(**{a.dest: _SENTINEL for a in parser._actions if a.dest != "help"})
    try:
        parser.parse_args(list(argv), namespace=ns)
    except _ParseError as e:
        raise ValueError(f"sglang {src.version}: {e}") from None
    field = {f.dest: f.field or f.dest for f in src.flags}
    return {field.get(k, k): v for k, v in vars(ns).items() if v is not _SENTINEL}


class _Sentinel:
    def __repr__(self):
        return "<unset>"


_SENTINEL = _Sentinel()


def _extract_rules(src, tree):
    return {}
