"""Flag extraction shared by every layout: ``add_argument`` calls and annotated fields -> Flag.

What differs between layouts (detection, which classes hold the fields, their order) is in layouts/."""
from __future__ import annotations

import ast
import functools
import re

from .model import Flag, Runtime, UnknownLayout
from .tree import Module, Tree, Unresolved, py_value

SERVER_ARGS_PY = "sglang/srt/server_args.py"
DEPRECATED_ACTIONS = {"DeprecatedAction", "DeprecatedStoreTrueAction", "DeprecatedStoreConstAction",
                      "DeprecatedAliasStoreAction"}


def _names_of(node) -> str:
    return ast.unparse(node)


class Extractor:
    def __init__(self, tree: Tree):
        self.tree = tree
        self.sa = tree.module(SERVER_ARGS_PY)
        if self.sa is None:
            raise UnknownLayout(f"{tree.pkg}: no sglang/srt/server_args.py; is this an sglang package?")
        self.flags: list[Flag] = []

    @staticmethod
    def _method(klass: ast.ClassDef, name: str):
        for st in klass.body:
            if isinstance(st, ast.FunctionDef) and st.name == name:
                return st
        return None

    # -- add_cli_args walk ----------------------------------------------------------------
    def run(self, layout) -> list[Flag]:
        """The flags of this release, read the way ``layout`` (layouts/) lays them out."""
        cls = self.sa.classes.get("ServerArgs")
        add = self._method(cls, "add_cli_args")
        self.layout = layout
        self.class_defaults = self._class_defaults()
        local: dict = {}
        self._walk(add.body, local)
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

    def _walk(self, body, local):
        for st in body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                try:
                    local[st.targets[0].id] = self._eval(st.value, local)
                except Unresolved as e:
                    local[st.targets[0].id] = Unresolved(self.sa.seg(st.value))
                    del e
                continue
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call):
                call = st.value
                if callee(call) == "add_argument":
                    self.flags.append(self._from_add_argument(call, local, self.sa))
                elif callee(call) == "add_cli_args_from_dataclass":
                    self.flags.extend(self._from_fields())
                continue
            for attr in ("body", "orelse", "finalbody"):
                sub = getattr(st, attr, None)
                if isinstance(sub, list) and not isinstance(st, (ast.FunctionDef, ast.ClassDef)):
                    self._walk(sub, local)

    def _eval(self, node, local, mod=None):
        return self.tree.eval(node, mod or self.sa, local)

    def _class_defaults(self) -> dict:
        """ServerArgs field name -> default expression node (and its module)."""
        out = {}
        for mod, cls in self.layout.field_classes(self):
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    out[st.target.id] = (mod, st)
        return out

    def _default_of(self, dest: str):
        hit = self.class_defaults.get(dest)
        if hit is None:
            raise Unresolved(dest)
        mod, st = hit
        if st.value is None:
            return None
        return py_value(self.tree.eval(st.value, mod))

    # -- manual add_argument ---------------------------------------------------------------
    def _from_add_argument(self, call: ast.Call, local, mod: Module) -> Flag:
        opts = []
        for a in call.args:
            try:
                opts.append(self._eval(a, local, mod))
            except Unresolved:
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
        except Unresolved:
            return mod.seg(kw[key])

    def _apply_kwargs(self, f: Flag, kw: dict, local, mod: Module):
        act = kw.get("action")
        if act is not None:
            f.action = act.value if isinstance(act, ast.Constant) else _last_name(act)
        if "type" in kw:
            f.type = _last_name(kw["type"]) if not isinstance(kw["type"], ast.Lambda) else "lambda"
        elif f.action == "store" and "nargs" not in kw:
            f.type = None
        if "choices" in kw:
            try:
                f.choices = list(py_value(self._eval(kw["choices"], local, mod)))
            except (Unresolved, TypeError):
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
        if f.action in DEPRECATED_ACTIONS:
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
        except Unresolved:
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
            return py_value(self._eval(node, local, mod))
        except Unresolved:
            return Runtime(mod.seg(node))

    def _default_for(self, f: Flag, kw, local, mod):
        if "default" in kw:
            node = kw["default"]
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "ServerArgs":
                try:
                    return self._default_of(node.attr)
                except Unresolved:
                    return Runtime(mod.seg(node))
            if isinstance(node, ast.Attribute) and node.attr == "SUPPRESS":
                return "==SUPPRESS=="
            if isinstance(node, ast.Call) and callee(node) == "_declared_default" and node.args:
                try:
                    return self._default_of(self._eval(node.args[0], local, mod))
                except Unresolved:
                    return Runtime(mod.seg(node))
            return self._safe(node, local, mod)
        if f.action in ("store_true",):
            return False
        if f.action == "store_false":
            return True
        if f.action == "DeprecatedStoreTrueAction":
            return False
        return None

    # -- dataclass / Struct fields (layouts B, C) -----------------------------------------------
    def _from_fields(self) -> list[Flag]:
        items = []  # (name, mod, AnnAssign)
        seen = set()
        for mod, cls in self.layout.field_classes(self):
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    name = st.target.id
                    ann = ast.unparse(st.annotation)
                    if ann.startswith(("ClassVar", "typing.ClassVar")) or name in seen:
                        continue
                    if not self.layout.is_input_field(cls):
                        continue
                    seen.add(name)
                    items.append((name, mod, st))
        items = self.layout.order_fields(self, items)
        out = []
        for name, mod, st in items:
            f = self._field_flag(name, mod, st)
            if f is not None:
                out.append(f)
        return out

    def _field_flag(self, name: str, mod: Module, st: ast.AnnAssign) -> Flag | None:
        """The flag of one annotated field (``Annotated[type, Arg(...)]`` or a help string), else None."""
        found = self._field_meta(st.annotation, mod)
        if found is None:
            return None
        raw, meta = found
        if "no_cli" in meta and self._safe(meta["no_cli"], None, mod) is True:
            return None
        cli = self._safe(meta["cli_name"], None, mod) if "cli_name" in meta else None
        cli = cli or "--" + name.replace("_", "-")
        aliases = self._safe(meta["aliases"], None, mod) if "aliases" in meta else None
        f = Flag(option_strings=[cli] + list(aliases or []), dest=name, file=mod.rel, line=st.lineno)
        if st.value is not None:
            try:
                f.default = py_value(self.tree.eval(st.value, mod))
            except Unresolved:
                f.default = Runtime(mod.seg(st.value))
        missing = st.value is None
        h = self._safe(meta["help"], None, mod) if "help" in meta else ""
        f.help = h if isinstance(h, str) else None
        if "action" in meta:
            return self._field_action(f, meta, mod, missing)
        return self._field_typed(f, raw, meta, mod, missing)

    def _field_meta(self, ann, mod: Module):
        """(the annotated type, {Arg keyword: node}) of ``Annotated[...]``; a help string alone is {"help": node}."""
        if not (isinstance(ann, ast.Subscript) and _last_name(ann.value) in ("A", "Annotated")):
            return None
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        for e in elts[1:]:
            if isinstance(e, ast.Call) and callee(e) == "Arg":
                meta = {k.arg: k.value for k in e.keywords if k.arg}
                if e.args:  # positional help
                    meta.setdefault("help", e.args[0])
                return elts[0], meta
            if isinstance(e, ast.Call):
                continue  # NS(...), Derived(...)
            try:
                val = self.tree.eval(e, mod)
            except Unresolved:
                continue
            if isinstance(val, str):
                return elts[0], {"help": e}
        return None

    def _set_choices(self, f: Flag, node, mod: Module):
        try:
            f.choices = list(py_value(self.tree.eval(node, mod)))
        except (Unresolved, TypeError):
            f.choices = Runtime(mod.seg(node))

    def _field_action(self, f: Flag, meta: dict, mod: Module, missing: bool) -> Flag:
        """A field with an explicit ``action=`` (and its ``action_kwargs``)."""
        act = meta["action"]
        f.action = act.value if isinstance(act, ast.Constant) else _last_name(act)
        if "action_kwargs" in meta and isinstance(meta["action_kwargs"], ast.Dict):
            self._apply_action_kwargs(f, meta["action_kwargs"], mod)
        if f.action == "BooleanOptionalAction":
            f.option_strings = _with_no_forms(f.option_strings)
        if f.nargs is None:
            f.nargs = _implicit_nargs(f.action)
        if missing and f.default is None and f.action == "store_true":
            f.default = False
        return f

    def _apply_action_kwargs(self, f: Flag, ak: ast.Dict, mod: Module):
        for k, v in zip(ak.keys, ak.values):
            key = self._safe(k, None, mod)
            if key == "choices":
                self._set_choices(f, v, mod)
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

    def _field_typed(self, f: Flag, raw, meta: dict, mod: Module, missing: bool) -> Flag:
        """A field whose type says the flag's form: a Literal (choices), a list (nargs), a bool (store_true)."""
        inner, _opt = _unwrap_optional(raw)
        type_parser = _last_name(meta["type_parser"]) if "type_parser" in meta else None
        lit = _literal_values(inner, self.tree, mod)
        if lit is not None:
            if "choices" in meta:
                self._set_choices(f, meta["choices"], mod)
            else:
                f.choices = lit
            f.type = type_parser or _infer_type(type(lit[0]).__name__ if lit else "str")
        elif _is_list(inner) and type_parser is None:
            f.type = _infer_type(_list_elem(inner))
            f.nargs = self._safe(meta["nargs"], None, mod) if "nargs" in meta else "+"
            if "choices" in meta:
                self._set_choices(f, meta["choices"], mod)
        elif _last_name(inner) == "bool":
            f.action = "store_true"
            f.nargs = 0
            if missing:
                f.default = False
            return f
        else:
            return self._field_plain(f, inner, type_parser, meta, mod, missing)
        if "const" in meta:
            f.const = self._safe(meta["const"], None, mod)
        return f

    def _field_plain(self, f: Flag, inner, type_parser, meta: dict, mod: Module, missing: bool) -> Flag:
        """Any other type: its name (or type_parser) is the argparse type; required when it has no default."""
        f.type = type_parser or _infer_type(_last_name(inner))
        if "choices" in meta:
            self._set_choices(f, meta["choices"], mod)
        if "nargs" in meta:
            f.nargs = self._safe(meta["nargs"], None, mod)
        if "const" in meta:
            f.const = self._safe(meta["const"], None, mod)
        req = self._safe(meta["required"], None, mod) if "required" in meta else None
        if (req is True or (req is None and missing)) and any(n.startswith("-") for n in f.option_strings):
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


def callee(call: ast.Call) -> str | None:
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


def is_dataclass(cls: ast.ClassDef) -> bool:
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


def _literal_values(node, tree: Tree, mod: Module):
    if isinstance(node, ast.Subscript) and _last_name(node.value) == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        try:
            return [py_value(tree.eval(e, mod)) for e in elts]
        except Unresolved:
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
