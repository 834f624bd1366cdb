"""Read an installed SGLang package's source (text + ``ast``, never ``import sglang``).

Stdlib only and self-contained: this file is copied to lab hosts and imported there by the
SGLang simulator without Ansible.

    src = load_source("/opt/sglang/lib/python3.11/site-packages/sglang")
    src.version, src.era, src.flags          # flag table, era "A" | "B" | "C"
    build_parser(src)                        # argparse parser that accepts/rejects argv like SGLang
    validate_argv(src, argv)                 # -> [Problem] before anything changes on a host
    validate_argv(src, argv, model_config)   # ... plus what start-up would refuse for that model
    normalise_argv(src, argv)                # -> {dest: value}  ("--tp 2" -> {"tp_size": 2})
    predict(src, args, hardware, model_config)   # -> [Finding], one per optimisation

Three layouts of the flag definitions ("eras"):
  A (<= 0.5.13.post1): ``@dataclass ServerArgs`` + ``add_cli_args`` with ``parser.add_argument``.
  B (0.5.14 - 0.5.19): fields ``name: A[T, "help" | Arg(...)] = d`` registered by
     ``add_cli_args_from_dataclass``; deprecated aliases still added by hand.
  C (>= 0.5.20): the same annotations in ``msgspec.Struct`` classes under
     ``sglang/srt/arg_groups/fields/*.py``, listed in ``_INPUT_NAMESPACES``.

Exactness: option strings (same order), dests, actions, nargs and `required` reproduce SGLang's
argparse setup; tests/source/test_real_parser.py builds the REAL parser from the wheels of
0.4.10.post2, 0.5.3, 0.5.11, 0.5.13.post1, 0.5.15.post1, 0.5.18, 0.5.20 and 0.5.23 (sglang's own
server_args.py / arg_groups run under ``python -S``, every other import stubbed) and asserts
equality, and checks that every replacement validate_argv suggests parses with it. Choices
and defaults are read statically (module constants, enums, class attributes, registry dict keys);
those computed at run time (environment, plugin hooks, ServerArgs properties) become
``Runtime(expr)`` and the parser then accepts any value. Custom ``type=`` functions other than
int/float/str/json/human_readable_int/json_list_type/nullable_str/parse_cuda_graph_backend_arg
accept the text unchanged. Auto-adjust rules are located by pattern (file + line of THIS
release); ``predict`` evaluates the few conditions the audit needs, not SGLang's whole resolution.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import functools
import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "FLAG_HISTORY", "Finding", "Flag", "Problem", "Rule", "Runtime", "SglangSource",
    "PYTHON_FLOOR", "UnknownLayout", "UnsupportedPython", "build_parser", "load_source", "normalise_argv", "predict", "startup_refusals",
    "validate_argv",
]


class UnknownLayout(Exception):
    """The installed sglang tree does not match any known flag layout (era)."""


# The reader needs ast.unparse (3.9): the floor of the host's Python for the flag check, the audit
# and drift (tests/source/test_reader_host_pythons.py runs them under 3.8-3.13).
PYTHON_FLOOR = (3, 9)


class UnsupportedPython(UnknownLayout):
    """The host's Python is older than the reader needs."""


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
    removed_exception: str | None = None     # DeprecatedAction raises this (<= 0.5.7: ValueError(help))
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
    kind: str          # unknown | removed | renamed | ambiguous | bad_choice | bad_type | missing_value | help
    #                    | refused_at_start (parses, but ServerArgs raises at start for this model)
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
            elif isinstance(node, (ast.If, ast.Try)):  # e.g. `if TYPE_CHECKING:` / try-imports
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
            if fname in ("list", "tuple", "sorted", "set", "frozenset") and len(node.args) == 1 \
                    and not node.keywords:
                val = ev(node.args[0])
                if isinstance(val, _ClassRef):
                    val = val.members(self)
                return {"list": list, "tuple": tuple, "sorted": sorted, "set": set,
                        "frozenset": frozenset}[fname](val)
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
    if isinstance(v, (set, frozenset)):  # a set's order changes with each process's hash seed: sort it
        return sorted((_py(x) for x in v), key=lambda x: (type(x).__name__, str(x)))
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
    def _method(klass: ast.ClassDef, name: str):
        for st in klass.body:
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
            if f.action == "DeprecatedAction":
                if f.deprecated_alias_of is None and isinstance(f.help, str):
                    f.deprecated_alias_of = _help_replacement(f.help)
                raises = self._deprecated_action_raises
                if raises and f.removed_message is None:  # <= 0.5.7: the server dies at start
                    f.removed_message, f.removed_exception = f.help, raises
        elif f.help and ("deprecated" in f.help.lower()[:40]) and f.deprecated_alias_of is None:
            f.deprecated_alias_of = _help_replacement(f.help)

    @functools.cached_property
    def _deprecated_action_raises(self) -> str | None:
        """The exception this release's ``DeprecatedAction`` raises with the flag's help, if it does.

        Up to 0.5.7 its ``__call__`` is ``raise ValueError(self.help)``: giving such a flag kills the
        server at start. Later releases print a warning (or ``parser.error(error_message)``).
        """
        try:
            _mod, cls = self.tree.lookup(self.sa, "DeprecatedAction")
        except _Unresolved:
            return None
        call = self._method(cls, "__call__") if isinstance(cls, ast.ClassDef) else None
        for st in call.body if call else []:
            if isinstance(st, ast.Raise) and isinstance(st.exc, ast.Call) and st.exc.args:
                arg = st.exc.args[0]
                if isinstance(arg, ast.Attribute) and arg.attr == "help" \
                        and isinstance(arg.value, ast.Name) and arg.value.id == "self":
                    return _last_name(st.exc.func)
        return None

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


def _help_replacement(text: str) -> str | None:
    """The replacement a deprecated flag's help names, as argv text (``<name>``: --name's value).

    "Please set `--moe-runner-backend` to 'triton_kernel' instead." -> "--moe-runner-backend triton_kernel";
    "set `--ep-size` to the same value as `--tp-size`" -> "--ep-size <tp-size>";
    "Please use --swa-full-tokens-ratio instead." -> "--swa-full-tokens-ratio".
    """
    m = re.search(r"set `?(--[\w-]+)`? to the same value as `?--([\w-]+)`?", text)
    if m:
        return f"{m.group(1)} <{m.group(2)}>"
    m = re.search(r"set `?(--[\w-]+)`? to ['\"`]([^'\"`]+)['\"`]", text)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    m = re.search(r"use ['\"`]?(--[\w{},-]+(?:[= ][^\s'\"`()]+)?)", text, re.IGNORECASE)
    if m:
        return re.sub(r" instead\W*$", "", m.group(1)).rstrip(".,;:")
    return None


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
                    and isinstance(node.value.value, str) \
                    and any(isinstance(t, ast.Name) and t.id in ("__version__", "version")
                            for t in node.targets):
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
    if sys.version_info < PYTHON_FLOOR:
        raise UnsupportedPython(
            f"reading SGLang's source on the host needs Python {'.'.join(map(str, PYTHON_FLOOR))} or newer, and "
            f"Ansible runs {sys.executable} ({platform.python_version()}) there: set ansible_python_interpreter "
            "for this host to a newer Python (the ml-env venv's bin/python is one)")
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
    """DeprecatedAction: no value; raises (<= 0.5.7), errors with the release's message, or does nothing."""

    def __init__(self, option_strings, dest, error_message=None, exception=None, **kwargs):
        kwargs.pop("nargs", None)
        self.error_message = error_message
        self.exception = exception
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.exception is not None:  # SGLang: raise ValueError(self.help), uncaught
            raise ValueError(self.error_message)
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
            parser.add_argument(*opts, action=_Removed, error_message=f.removed_message,
                                exception=f.removed_exception, **kw)
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
        ("opt-in piecewise CUDA graph (<= 0.5.9); piecewise became the default, then the prefill "
        "CUDA graph backend became --cuda-graph-backend-prefill (0.5.14)"),
        [("--cuda-graph-backend-prefill", "tc_piecewise"), ("--cuda-graph-backend-prefill", "breakable"),
         ("--enforce-piecewise-cuda-graph", None)]),
    "--enforce-piecewise-cuda-graph": (
        ("0.5.10-0.5.13 flag, a deprecated alias of --cuda-graph-backend-prefill=tc_piecewise in "
        "0.5.14-0.5.19, removed in 0.5.20; an explicit prefill backend skips the auto-disable rules"),
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
        ("split into --cuda-graph-max-bs-decode / --cuda-graph-max-bs-prefill (0.5.14); deprecated "
        "alias until 0.5.19; from 0.5.20 an ambiguous prefix"),
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


_HELP = ("-h", "--help")


def _resolve_option(src: SglangSource, name: str):
    """(Flag, matched option) | ("ambiguous", [candidates]) | ("help", "--help") | None.

    argparse's abbreviation rules, with its own -h/--help among the candidates (so ``--he`` is
    --help, and ``--h`` is ambiguous between --help, --host, ...).
    """
    if name in src.by_option:
        return src.by_option[name], name
    if name in _HELP:
        return "help", name
    if name.startswith("--"):
        cands = [o for o in src.option_strings() if o.startswith(name)]
        if cands == ["--help"]:
            return "help", "--help"
        if len(cands) == 1:
            return src.by_option[cands[0]], cands[0]
        if len(cands) > 1:
            return "ambiguous", cands
    return None


def _given_value(src: SglangSource, argv, option: str):
    """The value ``argv`` gives ``option`` (last one wins; abbreviations resolved), else None."""
    flag = src.by_option.get(option)
    out = None
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        hit = _resolve_option(src, name) if flag is not None and _looks_like_option(tok) else None
        if hit and hit[0] is flag:
            if eq:
                out = inline
            elif i + 1 < len(argv) and not _looks_like_option(argv[i + 1]):
                out = argv[i + 1]
    return out


def _concrete_suggestion(src: SglangSource, text, argv=(), values=()) -> str | None:
    """SGLang's replacement text as argv that THIS release's parser accepts, else None.

    SGLang writes ``new_flag`` and help texts for people: ``--cuda-graph-backend-{decode,prefill}=disabled``
    (one option per brace item), ``--attn-dp-size <dp-size>`` (the value --dp-size has). Braces expand;
    ``<name>`` takes the value --name has in ``argv``, else its static default in this release; an
    option left without a value gets the old flag's ``values``. What still does not parse is dropped:
    a suggestion must work as written.
    """
    if not isinstance(text, str) or not text.startswith("-"):
        return None
    m = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if m:
        alts = [text[:m.start()] + alt.strip() + text[m.end():] for alt in m.group(1).split(",")]
        return _concrete_suggestion(src, " ".join(alts), argv, values)

    def fill(placeholder):
        option = "--" + placeholder.group(1)
        given = _given_value(src, argv, option)
        flag = src.by_option.get(option)
        if given is None and flag is not None and flag.default is not None \
                and not isinstance(flag.default, Runtime) and flag.default != "==SUPPRESS==":
            given = str(flag.default)
        return given if given is not None else placeholder.group(0)

    tokens = re.sub(r"<([\w-]+)>", fill, text).split()
    if values and "=" not in tokens[-1] and len(tokens) == 1:
        hit = _resolve_option(src, tokens[-1])
        if hit and hit[0] not in ("ambiguous", "help") and hit[0].takes_value:
            tokens += list(values)
    if any(t.partition("=")[0] in _HELP for t in tokens):
        return None
    try:
        _parser(src, lenient=True).parse_args(tokens)
    except (_ParseError, ValueError):
        return None
    return " ".join(tokens)


def _replacement(src: SglangSource, old: str, values=()) -> tuple[str | None, str]:
    """The replacement for ``old`` that THIS release accepts (with the old flag's values), and the note."""
    note, cands = FLAG_HISTORY.get(old, ("", []))
    for opt, value in cands:
        if not src.has(opt):
            continue
        repl = _concrete_suggestion(src, opt if value is None else f"{opt} {value}", values=values)
        if repl:
            return repl, note
    return None, note


def _fmt_cands(cands):
    return ", ".join(cands)


def validate_argv(src: SglangSource, argv: list[str], model_config: dict | None = None,
                  hardware: dict | None = None) -> list[Problem]:
    """Every problem the installed release's parser would hit in ``argv`` (not just the first).

    With the model's ``model_config`` (config.json), also what the release's ServerArgs resolution
    would refuse at start for that model once the argv parses (kind "refused_at_start", see
    startup_refusals).

    Deprecated aliases that still work are reported as kind "renamed" with their replacement;
    everything else (unknown, removed, ambiguous, bad_choice, bad_type, missing_value) makes
    ``sglang serve`` exit with an argparse error, or (removed, <= 0.5.7) die at start with the
    ValueError its DeprecatedAction raises; "help" (-h, --help or a prefix of it) prints the usage
    and exits without starting the server. A suggested replacement is argv this release accepts.
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
            # its value(s), if any: tokens up to the next option (argparse leaves them all unrecognized)
            values = [inline] if eq else []
            while i < len(argv) and not _looks_like_option(argv[i]) and not eq:
                values.append(argv[i])
                i += 1
            out.append(_unknown_problem(src, name, values))
            continue
        if hit[0] == "help":
            how = "" if name == hit[1] else f" (argparse expands it to {hit[1]})"
            out.append(Problem(name, "help", f"{name} is not a server flag{how}: it is argparse's help "
                               f"option, so sglang {v} would print its usage and exit without starting "
                               "the server. Remove it.", []))
            continue
        if hit[0] == "ambiguous":
            cands = hit[1]
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
                out.append(Problem(name, "bad_type", f"{opt} takes no value in sglang {v}: argparse fails "
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
                out.append(Problem(name, "missing_value", f"{opt} needs a value in sglang {v}: argparse "
                                   f"fails with 'argument {_astr(action)}: {need}'. Give it a value"
                                   + (f" (one of {_fmt_cands(map(str, flag.choices))})"
                                      if isinstance(flag.choices, list) else "") + ".",
                                   [str(c) for c in flag.choices] if isinstance(flag.choices, list) else []))
                continue
        if flag.removed_message:
            repl, _ = _replacement(src, name if name in FLAG_HISTORY else opt, values)
            repl = repl or _concrete_suggestion(src, flag.deprecated_alias_of, argv, values)
            fails = (f"the server dies at start with '{flag.removed_exception}: {flag.removed_message}' "
                     "(its DeprecatedAction raises it while parsing the arguments)."
                     if flag.removed_exception else f"it fails with '{flag.removed_message}'")
            out.append(Problem(name, "removed", f"{opt} is removed in sglang {v}: {fails}"
                               + (f" Use {repl} instead." if repl else " Remove it."),
                               [repl] if repl else []))
            continue
        if flag.deprecated_alias_of or flag.action in _DEPRECATED_ACTIONS:
            raw = flag.deprecated_alias_of
            new = _concrete_suggestion(src, raw, argv, values)
            if flag.action == "DeprecatedAction":  # warns and ignores the flag
                msg = (f"{opt} is deprecated in sglang {v}: still accepted, with a warning, but it has no "
                       "effect; remove it" + (f" (use {new} instead)." if new else
                                              f" (SGLang's help points to {raw})." if raw else "."))
            else:
                msg = (f"{opt} is a deprecated alias in sglang {v} (still accepted, with a warning)"
                       + (f"; use {new} instead." if new else f"; SGLang names '{raw}' as its replacement."
                          if raw and raw != flag.dest else "; it has no effect, remove it."))
            out.append(Problem(name, "renamed", msg, [new] if new else [], severity="warning"))
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
                out.append(Problem(name, kind, msg, sugg))
    # required options (e.g. --model-path)
    given = set()
    for tok in argv:
        if _looks_like_option(tok):
            hit = _resolve_option(src, tok.partition("=")[0])
            if hit and hit[0] not in ("ambiguous", "help"):
                given.add(hit[0].dest)
    for a in parser._actions:
        if a.required and a.dest not in given:
            out.append(Problem(a.option_strings[0], "missing_value",
                               f"sglang {v} requires {a.option_strings[0]}: argparse fails with 'the "
                               f"following arguments are required: {_astr(a)}'. Add it.", []))
    if model_config and not any(p.severity == "error" for p in out):
        out += startup_refusals(src, normalise_argv(src, argv), model_config, hardware)
    return out


def _astr(action) -> str:
    return "/".join(action.option_strings)


def _unknown_problem(src: SglangSource, name: str, values=()) -> Problem:
    v = src.version
    if name in FLAG_HISTORY:
        repl, note = _replacement(src, name, values)
        named = next((o for o, _ in FLAG_HISTORY[name][1] if src.has(o)), None)
        kind = "removed"
        msg = (f"{name} is not a flag of sglang {v} ({note}): it fails with 'unrecognized arguments: "
               f"{name}'. " + (f"In {v} use {repl}." if repl else f"In {v} use {named} with a value." if named
                               else f"Remove it; it has no replacement in {v}."))
        return Problem(name, kind, msg, [repl] if repl else [])
    longs = [o for o in src.by_option if o.startswith("--")]
    close = difflib.get_close_matches(name, longs, n=3, cutoff=0.75)
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
    except (_ParseError, ValueError) as e:  # ValueError: a flag whose DeprecatedAction raises
        raise ValueError(f"sglang {src.version}: {e}") from None
    field = {f.dest: f.field or f.dest for f in src.flags}
    return {field.get(k, k): v for k, v in vars(ns).items() if v is not _SENTINEL}


class _Sentinel:
    def __repr__(self):
        return "<unset>"


_SENTINEL = _Sentinel()



# --------------------------------------------------------------------------------------
# Auto-adjust rules (read from the installed source, with file + line)
# --------------------------------------------------------------------------------------

def _rule_files(tree: _Tree) -> list[_Module]:
    mods = [tree.module(_SA)]
    ag = tree.pkg / "srt" / "arg_groups"
    if ag.is_dir():
        mods += [tree.module(f"sglang/srt/arg_groups/{p.name}") for p in sorted(ag.glob("*.py"))]
    return [m for m in mods if m is not None]


def _enclosing_functions(mod: _Module):
    """(node, enclosing function name) for every node of the module."""
    stack = [(mod.ast, "")]
    while stack:
        node, fn = stack.pop()
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            yield child, name
            stack.append((child, name))


def _assigns_attr(body, needle: str, value=None) -> bool:
    for st in body:
        for n in ast.walk(st):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Attribute) and needle in t.attr and (
                            value is None or (isinstance(n.value, ast.Constant) and n.value.value == value)):
                        return True
    return False


def _str_list(tree: _Tree, mod: _Module, node) -> list[str] | None:
    for n in ast.walk(node):
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)) and n.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) and "For" in e.value
                for e in n.elts):
            return [e.value for e in n.elts]
        if isinstance(n, ast.Name) and "ARCH" in n.id.upper():
            try:
                val = tree.eval(n, mod)
                return sorted(val) if isinstance(val, (set, frozenset)) else list(val)
            except _Unresolved:
                continue
    return None


def _extract_rules(src: SglangSource, tree: _Tree) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}

    def add(key, mod, node, **data):
        if key in rules:
            return
        line = node.lineno
        text = mod.lines[line - 1].strip()
        rules[key] = Rule(key, mod.rel, line, text, data)

    mc = tree.module("sglang/srt/configs/model_config.py")
    if mc is not None:
        for key in ("multimodal_model_archs", "multimodal_piecewise_cuda_graph_supported_model_archs",
                    "multimodal_breakable_cuda_graph_supported_model_archs"):
            node = mc.assigns.get(key)
            if node is None:
                continue
            try:
                archs = list(tree.eval(node, mc))
            except _Unresolved:
                continue
            line = next((st.lineno for st in mc.ast.body if isinstance(st, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == key for t in st.targets)), node.lineno)
            rules[key] = Rule(key, mc.rel, line, f"{key} = [...]", {"archs": archs})

    for mod in _rule_files(tree):
        for node, fn in _enclosing_functions(mod):
            if isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "is_multimodal" in test and "piecewise" not in test and \
                        _assigns_attr(node.body, "piecewise_cuda_graph"):
                    add("multimodal_disables_piecewise", mod, node, function=fn)
                if test.strip() in ("self.enforce_piecewise_cuda_graph",) and \
                        _assigns_attr(node.body, "disable_piecewise_cuda_graph", False):
                    add("enforce_piecewise_skips_cascade", mod, node, function=fn)
                if "allreduce_fusion" in test and ("sm90" in test or "sm100" in test):
                    add("flashinfer_allreduce_fusion_auto_enable", mod, node, function=fn,
                        archs=_str_list(tree, mod, node.test) or [],
                        needs_sm90_or_sm100=True, needs_tp_gt_1="tp_size > 1" in test,
                        needs_no_dp_attention="not " in test and "enable_dp_attention" in test,
                        single_node=("nnodes == 1" in test),
                        single_node_only_sm90="nnodes == 1 or" in test and "sm100" in test,
                        excludes_h20="is_h20" in test, needs_no_a2a="moe_a2a_backend" in test,
                        condition=test)
                if re.search(r"speculative_algorithm\s*==\s*['\"]NEXTN['\"]", test):
                    add("nextn_to_eagle", mod, node, function=fn)
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[0], ast.Constant) \
                    and node.elts[0].value == "multimodal model":
                kind = "breakable" if "breakable" in fn else ("piecewise" if "piecewise" in fn else fn)
                add(f"multimodal_disables_prefill_graph_{kind}", mod, node, function=fn,
                    condition=ast.unparse(node.elts[1]))
            elif isinstance(node, ast.FunctionDef) and node.name == "auto_choose_speculative_params":
                rets = [r for r in ast.walk(node) if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)
                        and len(r.value.elts) == 3 and all(isinstance(e, ast.Constant) for e in r.value.elts)]
                if rets:
                    last = rets[-1]
                    add("speculative_auto_params", mod, last, function=node.name,
                        default=tuple(e.value for e in last.value.elts))
    if "flashinfer_allreduce_fusion_auto_enable" not in rules:
        _sm100_fusion_rules(tree, rules)
    _default_prefill_backend(tree, rules)
    _mamba_speculative_radix_rule(tree, rules)
    return rules


def _gated_assigns(body, attr: str, tests=()):
    """``(assign, [tests of the enclosing ifs])`` for each ``self.<attr> = True`` in ``body``."""
    for st in body:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is True \
                and any(isinstance(t, ast.Attribute) and t.attr == attr for t in st.targets):
            yield st, list(tests)
        elif isinstance(st, ast.If):
            yield from _gated_assigns(st.body, attr, tests + (st.test,))
            yield from _gated_assigns(st.orelse, attr, tests)
        elif isinstance(st, (ast.FunctionDef, ast.With, ast.For, ast.Try)):
            yield from _gated_assigns(st.body, attr, () if isinstance(st, ast.FunctionDef) else tests)


def _sm100_fusion_rules(tree: _Tree, rules: dict) -> None:
    """Before the generic rule (0.5.9): per-model rules that enable the fusion on SM100 only (0.5.3, 0.5.6).

    ``if model_arch in ["GptOssForCausalLM"]: ... if is_sm100_supported(): if not
    self.enable_dp_attention: self.enable_flashinfer_allreduce_fusion = True`` (one per model, in
    _handle_model_specific_adjustments); one Rule whose ``sites`` give each architecture its line.
    """
    sa = tree.module(_SA)
    sites, single_node, no_dp = {}, False, False
    for cls in sa.classes.values():
        for _assign, tests in _gated_assigns(cls.body, "enable_flashinfer_allreduce_fusion"):
            texts = [sa.seg(t) for t in tests]
            gate = next((t for t, x in zip(tests, texts) if "sm100" in x or "blackwell" in x), None)
            if gate is None or any("sm90" in x for x in texts):
                continue
            for t in tests:
                for a in _str_list(tree, sa, t) or []:
                    sites.setdefault(a, gate.lineno)
            single_node |= any("nnodes == 1" in x for x in texts)
            no_dp |= any("enable_dp_attention" in x for x in texts)
    if sites:
        line = min(sites.values())
        rules["flashinfer_allreduce_fusion_auto_enable"] = Rule(
            "flashinfer_allreduce_fusion_auto_enable", sa.rel, line, sa.lines[line - 1].strip(),
            {"archs": sorted(sites), "sites": sites, "sm100_only": True, "needs_tp_gt_1": False,
             "needs_no_dp_attention": no_dp, "single_node": single_node})


def _default_prefill_backend(tree: _Tree, rules: dict) -> None:
    """The prefill CUDA graph backend a CUDA host gets by default (0.5.15+: ``default_prefill_backend()``
    in model_executor/cuda_graph_config.py, ``Backend.BREAKABLE if is_cuda() else ...``)."""
    mod = tree.module("sglang/srt/model_executor/cuda_graph_config.py")
    fn = mod.functions.get("default_prefill_backend") if mod is not None else None
    for ret in ast.walk(fn) if fn is not None else []:
        if not isinstance(ret, ast.Return) or ret.value is None:
            continue
        value = ret.value
        if isinstance(value, ast.IfExp):
            if not (isinstance(value.test, ast.Call) and _callee(value.test) == "is_cuda"):
                continue
            value = value.body
        try:
            backend = _py(tree.eval(value, mod))
        except _Unresolved:
            continue
        if isinstance(backend, str):
            rules["default_prefill_backend"] = Rule("default_prefill_backend", mod.rel, ret.lineno,
                                                    mod.lines[ret.lineno - 1].strip(), {"backend": backend})
            return


# --------------------------------------------------------------------------------------
# Start-up refusals: argv the parser accepts but ServerArgs' resolution raises on, for a model
# --------------------------------------------------------------------------------------

_MAMBA_HANDLER = "_handle_mamba_radix_cache"


def _fstring_text(node) -> str:
    """The text of a (possibly f-) string literal, ``{name}`` for each placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else
                       "{%s}" % (v.value.id if isinstance(v.value, ast.Name) else "...")
                       for v in node.values)
    return ""


def _arch_test(test) -> list[str] | None:
    """The architectures of ``model_arch in [...]`` / ``model_arch == "X"``, else None."""
    if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "model_arch" and len(test.ops) == 1):
        return None
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.Eq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
        return [right.value]
    if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def _handler_calls(body, archs=None, conds=()):
    """``(call, archs of the innermost model_arch test, [other enclosing if tests])`` for each
    ``self._handle_mamba_radix_cache(...)`` call in ``body`` (if/elif chains followed)."""
    for st in body:
        if isinstance(st, ast.If):
            inner = _arch_test(st.test)
            if inner is not None:
                yield from _handler_calls(st.body, inner, conds)
            else:
                yield from _handler_calls(st.body, archs, conds + (st.test,))
            yield from _handler_calls(st.orelse, archs, conds)
            continue
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for n in ast.walk(st):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == _MAMBA_HANDLER:
                yield n, archs, list(conds)


def _linear_attn_registrations(tree: _Tree) -> dict:
    """``{arch: {support_mamba_cache, support_mamba_cache_extra_buffer, file, line}}`` of every
    ``LinearAttnModelSpec(arch_names=[...], ...)`` literal in the package (the registry behind
    ``get_linear_attn_spec_by_arch``; configs/linear_attn_model_registry.py, 0.5.11+)."""
    reg = tree.module("sglang/srt/configs/linear_attn_model_registry.py")
    if reg is None:
        return {}
    defaults = {"support_mamba_cache": True, "support_mamba_cache_extra_buffer": False}
    cls = reg.classes.get("LinearAttnModelSpec")
    for st in cls.body if cls is not None else []:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and \
                st.target.id in defaults and isinstance(st.value, ast.Constant):
            defaults[st.target.id] = bool(st.value.value)
    out = {}
    for path in sorted((tree.pkg / "srt").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "LinearAttnModelSpec(" not in text or path.name == "linear_attn_model_registry.py":
            continue
        mod = tree.module(str(path.relative_to(tree.root)))   # recorded (sglang_source_cache stamps it)
        rel = mod.rel
        for n in ast.walk(mod.ast):
            if not (isinstance(n, ast.Call) and _callee(n) == "LinearAttnModelSpec"):
                continue
            kw = {k.arg: k.value for k in n.keywords if k.arg}
            names = kw.get("arch_names")
            if not isinstance(names, (ast.List, ast.Tuple)):
                continue
            spec = {k: bool(kw[k].value) if isinstance(kw.get(k), ast.Constant) else d
                    for k, d in defaults.items()}
            for e in names.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    out[e.value] = dict(spec, file=rel, line=n.lineno)
    return out


def _mamba_speculative_radix_rule(tree: _Tree, rules: dict) -> None:
    """0.5.10 - 0.5.13.post1: ``ServerArgs._handle_mamba_radix_cache`` raises ValueError("Speculative
    decoding for {model_arch} is not compatible with radix cache when using
    --mamba-scheduler-strategy no_buffer ...") for a hybrid linear-attention (mamba) model when
    speculative decoding is on, the radix cache is not disabled and the strategy is no_buffer (0.5.11
    srt/server_args.py:2453; up to 0.5.9 it disabled the radix cache with a warning, from 0.5.14 it
    picks extra_buffer or no_buffer itself). The architectures are read from its callers in this
    release: the ``model_arch in [...]`` branches of _handle_model_specific_adjustments that call it
    with the mamba cache supported, and the linear-attention registry (get_linear_attn_spec_by_arch)."""
    sa = tree.module(_SA)
    cls = sa.classes.get("ServerArgs") if sa is not None else None
    if cls is None:
        return
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    handler = methods.get(_MAMBA_HANDLER)
    if handler is None:
        return
    raise_node = message = None
    for n in ast.walk(handler):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and _callee(n.exc) == "ValueError" \
                and n.exc.args:
            text = "".join(_fstring_text(a) for a in n.exc.args)
            if "peculative" in text and "radix cache" in text and "no_buffer" in text:
                raise_node, message = n, text
                break
    if raise_node is None:
        return
    # the handler's own defaults for support_mamba_cache / support_mamba_cache_extra_buffer
    params = [a.arg for a in handler.args.args]
    defaults = dict(zip(params[len(params) - len(handler.args.defaults):], handler.args.defaults))
    dflt = {k: bool(defaults[k].value) if isinstance(defaults.get(k), ast.Constant) else True
            for k in ("support_mamba_cache", "support_mamba_cache_extra_buffer")}
    registry = None
    archs, conditional = {}, {}
    for fn in methods.values():
        for call, call_archs, conds in _handler_calls(fn.body):
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            from_registry = any(isinstance(v, ast.Attribute) and v.attr == "support_mamba_cache"
                                for v in kw.values())
            if from_registry:          # if _hybrid_spec is not None: self._handle_mamba_radix_cache(...)
                if registry is None:
                    registry = _linear_attn_registrations(tree)
                for arch, spec in registry.items():
                    if spec["support_mamba_cache"]:
                        archs.setdefault(arch, {"line": call.lineno, "registered": f"{spec['file']}:{spec['line']}",
                                                "extra_buffer": spec["support_mamba_cache_extra_buffer"]})
                continue
            if not call_archs:
                continue
            flags = {k: bool(kw[k].value) if isinstance(kw.get(k), ast.Constant) else dflt[k] for k in dflt}
            if not flags["support_mamba_cache"]:   # disables the radix cache itself, never raises
                continue
            site = {"line": call.lineno, "extra_buffer": flags["support_mamba_cache_extra_buffer"]}
            for arch in call_archs:
                if conds:
                    conditional.setdefault(arch, dict(site, condition=" and ".join(sa.seg(c) for c in conds)))
                else:
                    archs.setdefault(arch, site)
    auto = None
    for fn in methods.values():
        for n in ast.walk(fn):
            if isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and \
                    isinstance(n.test.left, ast.Attribute) and n.test.left.attr == "mamba_scheduler_strategy" \
                    and any(isinstance(c, ast.Constant) and c.value == "auto" for c in n.test.comparators):
                for st in n.body:
                    if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and any(
                            isinstance(t, ast.Attribute) and t.attr == "mamba_scheduler_strategy" for t in st.targets):
                        auto = auto or st.value.value
    env = tree.module("sglang/srt/environ.py")
    rules["mamba_speculative_radix_cache"] = Rule(
        "mamba_speculative_radix_cache", sa.rel, raise_node.lineno, sa.lines[raise_node.lineno - 1].strip(),
        {"function": f"ServerArgs.{_MAMBA_HANDLER}", "message": message, "archs": archs,
         "conditional": conditional, "auto_strategy": auto,
         "spec_v2_env": env is not None and "SGLANG_ENABLE_SPEC_V2" in env.text})


def _rocm(hardware: dict | None) -> bool:
    return bool(re.search(r"\bAMD\b|Instinct|\bMI\d{3}", str((hardware or {}).get("gpu_model") or "")))


def startup_refusals(src: SglangSource, args: dict, model_config: dict | None,
                     hardware: dict | None = None) -> list[Problem]:
    """What the release's ServerArgs resolution would raise on at start for this model, though the
    parser accepts the argv. ``args``: normalised (normalise_argv); ``model_config``: config.json
    (``architectures[0]`` is SGLang's ``model_arch``); nothing is said without it."""
    rule = src.rules.get("mamba_speculative_radix_cache")
    archs = list((model_config or {}).get("architectures") or [])
    if rule is None or not archs:
        return []
    arch = archs[0]
    site = rule.data["archs"].get(arch)
    algorithm = _arg(src, args, "speculative_algorithm")
    strategy = _arg(src, args, "mamba_scheduler_strategy", "auto")
    if strategy == "auto":
        strategy = rule.data.get("auto_strategy")
    if site is None or not algorithm or _arg(src, args, "disable_radix_cache", False) \
            or strategy != "no_buffer" or _rocm(hardware):   # ROCm: disables the radix cache itself
        return []
    sa = rule.file
    via = f"reached from :{site['line']} for {arch}" + (
        f", registered at {site['registered']}" if site.get("registered") else "")
    said = rule.data["message"].replace("{model_arch}", arch)
    strategy_opt = _opt(src, "--mamba-scheduler-strategy")
    extra = site.get("extra_buffer") and strategy_opt is not None and any(
        "extra_buffer" in str(c) for c in (src.by_option[strategy_opt].choices or []))
    fix = "add disable_radix_cache: true to sglang_args (prefix caching off)"
    if extra:
        fix += (", or set mamba_scheduler_strategy: extra_buffer in sglang_args"
                + (' and SGLANG_ENABLE_SPEC_V2: "1" in sglang_service_environment' if rule.data.get("spec_v2_env")
                   else ""))
    msg = (f"{arch} is a hybrid linear-attention (mamba) model, and sglang {src.version} does not run "
           f"speculative decoding (--speculative-algorithm {algorithm}) with its radix cache under "
           f"--mamba-scheduler-strategy no_buffer ({'the default' if _arg(src, args, 'mamba_scheduler_strategy', 'auto') == 'auto' else 'as given'}): "
           f"{sa}:{rule.line} ({rule.data['function']}, {via}) raises 'ValueError: {said}' at start. "
           f"Fix: {fix}.")
    sugg = ["--disable-radix-cache"] + ([f"{strategy_opt} extra_buffer"] if extra else [])
    return [Problem("--speculative-algorithm", "refused_at_start", msg, sugg)]


# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------

def _sm(hardware: dict) -> int | None:
    cc = str(hardware.get("compute_capability") or "").strip()
    m = re.match(r"(\d+)\.(\d+)", cc)
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def _arg(src: SglangSource, args: dict, field: str, default=None):
    """A value from args (dest or field names), else the static default of that field."""
    if field in args:
        return args[field]
    for f in src.flags:
        if (f.field == field or f.dest == field) and f.dest in args:
            return args[f.dest]
    for f in src.flags:
        if (f.field == field or f.dest == field) and not isinstance(f.default, Runtime) \
                and not f.deprecated_alias_of and f.default != "==SUPPRESS==":
            return f.default if f.default is not None else default
    return default


def _opt(src: SglangSource, *candidates: str) -> str | None:
    return next((c for c in candidates if src.has(c.split(" ")[0].split("=")[0])), None)


def predict(src: SglangSource, args: dict, hardware: dict, model_config: dict) -> list[Finding]:
    """What the installed release will do with each optimisation for these args, GPUs and model.

    ``args``: normalised ``{dest or field: value}`` (see normalise_argv); ``hardware``:
    ``{"gpu_model", "gpu_count", "compute_capability", "source"}``; ``model_config``: the model's
    parsed HF config.json. Each Finding names the rule (file, line) of THIS release.
    """
    v = src.version
    R = src.rules
    archs = list(model_config.get("architectures") or [])
    arch = archs[0] if archs else ""
    sm = _sm(hardware)
    gpu = hardware.get("gpu_model") or "this GPU"
    tp = int(_arg(src, args, "tp_size", 1) or 1)
    nnodes = int(_arg(src, args, "nnodes", 1) or 1)
    dp_attn = bool(_arg(src, args, "enable_dp_attention", False))
    out: list[Finding] = []

    def rf(key):
        r = R.get(key)
        return (r.file, r.line) if r else (None, None)

    # ---- multimodal classification (configs/model_config.py)
    mm_archs = R.get("multimodal_model_archs")
    is_mm = bool(mm_archs and any(a in mm_archs.data["archs"] for a in archs))
    lm_only = bool(_arg(src, args, "language_model_only", False)) and src.has("--language-model-only")
    breakable_ok = R.get("multimodal_breakable_cuda_graph_supported_model_archs")
    arch_breakable = bool(breakable_ok and any(a in breakable_ok.data["archs"] for a in archs))

    # ---- prefill / piecewise CUDA graph
    out.append(_prefill_graph(src, args, is_mm, lm_only, arch_breakable, arch, rf))

    # ---- decode CUDA graph
    disabled = bool(_arg(src, args, "disable_cuda_graph", False)) or \
        _arg(src, args, "cuda_graph_backend_decode") == "disabled"
    out.append(Finding("decode CUDA graph", "off by default" if disabled else "on",
                       value=not disabled,
                       reason=("disabled by --disable-cuda-graph / --cuda-graph-backend-decode disabled"
                               if disabled else "captured for decode batch sizes by default"),
                       override=_opt(src, "--cuda-graph-backend-decode", "--disable-cuda-graph"),
                       how_to_enable=None if not disabled else "remove --disable-cuda-graph"))

    # ---- custom all-reduce
    car_off = bool(_arg(src, args, "disable_custom_all_reduce", False))
    if tp <= 1:
        out.append(Finding("custom all-reduce", "off by default", value=False,
                           reason="tp_size is 1: no tensor-parallel all-reduce",
                           override="--disable-custom-all-reduce"))
    else:
        out.append(Finding("custom all-reduce", "off by default" if car_off else "on", value=not car_off,
                           reason=("disabled by --disable-custom-all-reduce" if car_off else
                                   f"default for tp_size={tp} (disable_custom_all_reduce=False); SGLang "
                                   "falls back to NCCL at run time if P2P between the GPUs is unavailable"),
                           override="--disable-custom-all-reduce",
                           how_to_enable="remove --disable-custom-all-reduce" if car_off else None))

    # ---- FlashInfer all-reduce fusion
    out.append(_fusion(src, args, hardware, arch, sm, gpu, tp, nnodes, dp_attn, rf))

    # ---- single-batch / two-batch overlap
    for name, field, flag in (("single-batch overlap", "enable_single_batch_overlap",
                               "--enable-single-batch-overlap"),
                              ("two-batch overlap", "enable_two_batch_overlap", "--enable-two-batch-overlap")):
        if not src.has(flag):
            out.append(Finding(name, "off by default", value=False,
                               reason=f"sglang {v} has no {flag}"))
            continue
        on = bool(_arg(src, args, field, False))
        f = src.by_option[flag]
        out.append(Finding(name, "on" if on else "off by default", value=on,
                           reason=(f"{flag} given" if on else f"{field} defaults to False in sglang {v}"),
                           rule_file=f.file, rule_line=f.line, override=flag,
                           how_to_enable=None if on else f"add {flag} (mainly helps MoE / expert-parallel "
                                                         "models; needs a supported --moe-a2a-backend)"))

    # ---- speculative decoding
    out.append(_speculative(src, args, rf))

    # ---- memory fraction / context length
    mfs = _arg(src, args, "mem_fraction_static")
    out.append(Finding("mem_fraction_static", "on", value=mfs if mfs is not None else "auto",
                       reason=("set explicitly" if mfs is not None else
                               "None by default: chosen at startup from GPU memory, tp_size and "
                               "CUDA graph settings"),
                       override="--mem-fraction-static"))
    ctx = _arg(src, args, "context_length")
    model_ctx = model_config.get("max_position_embeddings") or (
        model_config.get("text_config") or {}).get("max_position_embeddings")
    out.append(Finding("context_length", "on", value=ctx if ctx is not None else (model_ctx or "auto"),
                       reason=("set explicitly" if ctx is not None else
                               "None by default: the model's max_position_embeddings from config.json"),
                       override="--context-length"))
    return out


def _prefill_graph(src, args, is_mm, lm_only, arch_breakable, arch, rf) -> Finding:
    v = src.version
    R = src.rules
    name = "prefill/piecewise CUDA graph"
    if src.era == "A":
        if src.has("--enforce-piecewise-cuda-graph"):   # 0.5.10 - 0.5.13: on by default, cascade
            enforce = bool(_arg(src, args, "enforce_piecewise_cuda_graph", False))
            disabled = bool(_arg(src, args, "disable_piecewise_cuda_graph", False))
            file, line = rf("multimodal_disables_piecewise")
            if disabled:
                return Finding(name, "off by default", False, "disabled by --disable-piecewise-cuda-graph",
                               override="--enforce-piecewise-cuda-graph",
                               how_to_enable="remove --disable-piecewise-cuda-graph")
            if enforce:
                ef, el = rf("enforce_piecewise_skips_cascade")
                return Finding(name, "on", True, "--enforce-piecewise-cuda-graph skips the auto-disable rules",
                               ef, el, "--enforce-piecewise-cuda-graph")
            if is_mm:
                return Finding(name, "auto-disabled", False,
                               f"{arch} is multimodal (configs/model_config.py multimodal_model_archs); "
                               f"sglang {v} disables piecewise CUDA graph for multimodal models",
                               file, line, "--enforce-piecewise-cuda-graph",
                               "add --enforce-piecewise-cuda-graph (skips the auto-disable rules; the "
                               "language model prefill is captured, the vision encoder stays eager)")
            return Finding(name, "on", True, f"on by default in sglang {v}; no auto-disable rule matched "
                           "the checked conditions (multimodal)", file, line, "--disable-piecewise-cuda-graph")
        if src.has("--enable-piecewise-cuda-graph"):    # <= 0.5.9: opt-in
            on = bool(_arg(src, args, "enable_piecewise_cuda_graph", False))
            file, line = rf("multimodal_disables_piecewise")
            if on and is_mm:
                return Finding(name, "auto-disabled", False,
                               f"{arch} is multimodal; sglang {v} turns piecewise CUDA graph off for it",
                               file, line, "--enable-piecewise-cuda-graph", None)
            f = src.by_option["--enable-piecewise-cuda-graph"]
            return Finding(name, "on" if on else "off by default", on,
                           "--enable-piecewise-cuda-graph given" if on else f"opt-in in sglang {v}",
                           f.file, f.line, "--enable-piecewise-cuda-graph",
                           None if on else "add --enable-piecewise-cuda-graph")
        return Finding(name, "off by default", False, f"sglang {v} has no piecewise CUDA graph flags")
    # eras B / C: per-phase backend
    opt = "--cuda-graph-backend-prefill"
    explicit = _arg(src, args, "cuda_graph_backend_prefill") if "cuda_graph_backend_prefill" in args else None
    if R.get("default_prefill_backend"):   # read from the release (0.5.15+)
        default_backend = R["default_prefill_backend"].data["backend"]
    else:
        default_backend = "breakable" if R.get("multimodal_breakable_cuda_graph_supported_model_archs") \
            else "tc_piecewise"
    if explicit is not None:
        st = "off by default" if explicit == "disabled" else "on"
        return Finding(name, st, explicit, f"{opt} {explicit} given: an explicit prefill backend skips "
                       "the auto-disable rules", override=opt,
                       how_to_enable=f"{opt} {default_backend}" if explicit == "disabled" else None)
    if is_mm and not lm_only:
        key = "multimodal_disables_prefill_graph_breakable" if default_backend == "breakable" else \
            "multimodal_disables_prefill_graph_piecewise"
        file, line = rf(key)
        if default_backend == "breakable" and arch_breakable:
            bf, bl = rf("multimodal_breakable_cuda_graph_supported_model_archs")
            return Finding(name, "on", "breakable",
                           f"{arch} is multimodal but on the breakable allow-list "
                           "(multimodal_breakable_cuda_graph_supported_model_archs); default prefill "
                           "backend is breakable", bf, bl, opt)
        hint = f"add {opt} {default_backend}"
        note = _comment_above(src, file, line)
        if note:   # e.g. 0.5.15.post1 server_args.py:3373 "Multimodal prefill replay faults under BCG."
            hint += (f" (an explicit backend skips this rule, but SGLang's own note on it says: \"{note}\"; "
                     "try it before serving)")
        if src.has("--language-model-only"):
            hint += " or --language-model-only (text-only serving)"
        return Finding(name, "auto-disabled", "disabled",
                       f"{arch} is multimodal; sglang {v} disables the prefill CUDA graph "
                       "('multimodal model' rule)", file, line, opt, hint)
    df, dl = rf("default_prefill_backend")
    return Finding(name, "on", default_backend, f"default prefill backend {default_backend} in sglang {v}; "
                   "no auto-disable rule matched the checked conditions", df, dl, override=opt)


def _comment_above(src, file, line) -> str | None:
    """The comment on the source line(s) just above a rule, if SGLang wrote one."""
    if not file or not line:
        return None
    try:
        with open(Path(src.path).parent / file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    said = []
    i = line - 2
    while 0 <= i < len(lines) and lines[i].strip().startswith("#"):
        said.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    return " ".join(said) or None


def _fusion(src, args, hardware, arch, sm, gpu, tp, nnodes, dp_attn, rf) -> Finding:
    v = src.version
    name = "FlashInfer all-reduce fusion"
    rule = src.rules.get("flashinfer_allreduce_fusion_auto_enable")
    override = _opt(src, "--flashinfer-allreduce-fusion-backend", "--enable-flashinfer-allreduce-fusion")
    file, line = rf("flashinfer_allreduce_fusion_auto_enable")
    if sm is not None and sm // 10 not in (9, 10):
        if rule is None:
            why = f"sglang {v} has no auto-enable rule, and FlashInfer's all-reduce fusion kernels need SM90+"
        elif rule.data.get("sm100_only"):
            why = (f"sglang {v} auto-enables FlashInfer all-reduce fusion only on SM100 (Blackwell), for "
                   f"{', '.join(rule.data['archs'])}, and its kernels need SM90+")
        else:
            why = (f"sglang {v} auto-enables FlashInfer all-reduce fusion only on SM90 (Hopper) or SM100 "
                   "(Blackwell), and its kernels need SM90+")
        return Finding(name, "unavailable on this hardware", False, f"{gpu} is SM{sm}; {why}",
                       file, line, override, None)
    if rule is None:
        explicit = bool(_arg(src, args, "enable_flashinfer_allreduce_fusion", False))
        return Finding(name, "on" if explicit else "off by default", explicit,
                       f"sglang {v} has no auto-enable rule" if not explicit else "enabled explicitly",
                       override=override, how_to_enable=None if explicit else
                       (f"add {override} (needs SM90/SM100)" if override else None))
    d = rule.data
    reasons = []
    if d.get("archs") and arch not in d["archs"]:
        reasons.append(f"{arch or 'the model'} is not in the {len(d['archs'])}-architecture list")
    if d.get("sm100_only"):
        line = d["sites"].get(arch, line)
        if sm is not None and sm // 10 != 10:
            reasons.append(f"SM{sm}: sglang {v} auto-enables it only on SM100 (Blackwell)")
    if tp <= 1 and d.get("needs_tp_gt_1"):
        reasons.append("tp_size is 1")
    if dp_attn:
        reasons.append("DP attention is on")
    if nnodes > 1 and (d.get("single_node") and not (d.get("single_node_only_sm90") and sm // 10 == 10)):
        reasons.append("more than one node")
    if d.get("excludes_h20") and "H20" in str(gpu) and "H200" not in str(gpu):
        reasons.append("H20 is excluded in this release")
    if sm is None:
        reasons.append("compute capability unknown")
    explicit_off = bool(_arg(src, args, "enforce_disable_flashinfer_allreduce_fusion", False))
    if explicit_off:
        return Finding(name, "off by default", False, "--enforce-disable-flashinfer-allreduce-fusion given",
                       file, line, override, "remove --enforce-disable-flashinfer-allreduce-fusion")
    if reasons:
        return Finding(name, "off by default", False, "not auto-enabled: " + "; ".join(reasons),
                       file, line, override, f"add {override}" if override else None)
    return Finding(name, "on", True, f"auto-enabled on SM{sm} for {arch} with tp_size={tp}", file, line,
                   override)


def _speculative(src, args, rf) -> Finding:
    v = src.version
    name = "speculative decoding"
    algo = _arg(src, args, "speculative_algorithm")
    if not algo:
        return Finding(name, "off by default", None, "no --speculative-algorithm",
                       override="--speculative-algorithm",
                       how_to_enable="--speculative-algorithm EAGLE (NEXTN for MTP heads) with "
                                     "--speculative-num-steps/--speculative-eagle-topk/"
                                     "--speculative-num-draft-tokens")
    algo = str(algo).upper()
    file, line = rf("nextn_to_eagle")
    converted = algo == "NEXTN"
    eff = "EAGLE" if converted else algo
    default = (src.rules.get("speculative_auto_params").data["default"]
               if src.rules.get("speculative_auto_params") else (3, 1, 4))
    steps = _arg(src, args, "speculative_num_steps")
    topk = _arg(src, args, "speculative_eagle_topk")
    draft = _arg(src, args, "speculative_num_draft_tokens")
    auto = steps is None or topk is None or draft is None
    if auto and eff in ("EAGLE", "EAGLE3"):
        steps = default[0] if steps is None else steps
        topk = default[1] if topk is None else topk
        draft = default[2] if draft is None else draft
    value = {"algorithm": eff, "num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft}
    reason = f"{algo}" + (f" is converted to EAGLE by sglang {v}" if converted else " as given")
    if auto:
        af, al = rf("speculative_auto_params")
        reason += f"; unset steps/topk/draft tokens are auto-chosen (default {default})"
        if not converted:
            file, line = af, al
    reason += f": EAGLE {steps}/{topk}/{draft}" if eff in ("EAGLE", "EAGLE3") else ""
    return Finding(name, "on", value, reason, file, line, "--speculative-algorithm")
