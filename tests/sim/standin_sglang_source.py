"""Stand-in for `module_utils/sglang_source.py`, used by the simulator tests until that file lands.

Same API (`load_source`, `build_parser`, `normalise_argv`, `predict`, `Finding`), much less
fidelity: option strings come from an AST walk over `add_argument` calls and `A[...]` fields,
types and defaults only where they are literals, and `predict` knows three rules (NEXTN -> EAGLE,
speculative auto-choice, the era-A multimodal piecewise rule). Stdlib only.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import pathlib
import re

_TYPES = {"int": int, "float": float, "str": str, "human_readable_int": int}


@dataclasses.dataclass
class SglangSource:
    root: pathlib.Path
    version: str
    era: str
    flags: dict  # option string -> dict(dest, kwargs)
    prog: str = "sglang serve"


@dataclasses.dataclass
class Finding:
    name: str
    status: str
    value: object
    reason: str
    rule_file: str = ""
    rule_line: int = 0
    override: str = ""


def _version(root: pathlib.Path) -> str:
    text = (root / "version.py").read_text()
    vfile = root / "_version.py"
    if vfile.exists():
        text = vfile.read_text()
    m = re.search(r"__version__\s*=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
    return m.group(1) if m else "0.0.0"


def _lit(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None


def _kwargs_of_call(call: ast.Call) -> dict:
    out = {}
    for kw in call.keywords:
        if kw.arg is None:
            continue
        v = kw.value
        if kw.arg == "type":
            out["type"] = _TYPES.get(getattr(v, "id", ""), str)
        elif kw.arg == "action":
            if isinstance(v, ast.Constant):
                out["action"] = v.value
            elif getattr(v, "attr", getattr(v, "id", "")) == "BooleanOptionalAction":
                out["action"] = argparse.BooleanOptionalAction
        elif kw.arg in ("nargs", "dest", "choices", "default", "const"):
            val = _lit(v)
            if val is not None or kw.arg == "default":
                out[kw.arg] = val
    if out.get("action") not in (None, "store", argparse.BooleanOptionalAction):
        out.pop("type", None)
    if out.get("action") in ("store_true", "store_false"):
        out.pop("nargs", None), out.pop("choices", None), out.pop("const", None)
    return out


def _annotated_fields(tree: ast.AST):
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            ann = st.annotation
            if not (isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "A"):
                continue
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            if len(elts) < 2:
                continue
            yield st.target.id, elts[0], elts[1], (_lit(st.value) if st.value is not None else None)


def _field_flags(name, typ, meta, default):
    arg = {}
    if isinstance(meta, ast.Call):
        arg = {kw.arg: kw.value for kw in meta.keywords if kw.arg}
    if arg.get("no_cli") is not None and _lit(arg["no_cli"]):
        return None
    cli = _lit(arg["cli_name"]) if "cli_name" in arg else "--" + name.replace("_", "-")
    names = [cli] + (_lit(arg["aliases"]) or [] if "aliases" in arg else [])
    kwargs: dict = {"dest": name, "default": default}
    src = ast.unparse(typ)
    if "action" in arg:
        kwargs["action"] = (argparse.BooleanOptionalAction
                            if "BooleanOptional" in ast.unparse(arg["action"]) else "store_true")
        if kwargs["action"] == "store_true":
            kwargs["default"] = bool(default)
    elif src == "bool":
        kwargs.update(action="store_true", default=bool(default))
    else:
        m = re.search(r"Literal\[(.*)\]", src)
        if m:
            kwargs["choices"] = list(_lit("[" + m.group(1) + "]") or []) or None
        elif "choices" in arg and _lit(arg["choices"]):
            kwargs["choices"] = _lit(arg["choices"])
        inner = re.sub(r"^Optional\[(.*)\]$", r"\1", src)
        if inner.startswith(("List[", "list[")):
            kwargs["nargs"] = "+"
            inner = inner[5:-1]
        kwargs["type"] = _TYPES.get(inner, str)
        if "nargs" in arg:
            kwargs["nargs"] = _lit(arg["nargs"])
    return names, kwargs


def load_source(sglang_dir) -> SglangSource:
    root = pathlib.Path(sglang_dir)
    sa = root / "srt" / "server_args.py"
    files = [sa] + sorted((root / "srt" / "arg_groups" / "fields").glob("*.py"))
    flags: dict = {}
    era = "C" if len(files) > 1 else "A"
    dc_defaults = {}
    for f in files:
        tree = ast.parse(f.read_text())
        fields = list(_annotated_fields(tree))
        if fields and era == "A":
            era = "B"
        for name, typ, meta, default in fields:
            got = _field_flags(name, typ, meta, default)
            if got:
                for opt in got[0]:
                    flags.setdefault(opt, {"names": got[0], **got[1]})
        for node in ast.walk(tree):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                dc_defaults.setdefault(node.target.id, _lit(node.value))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
                names = [a.value for a in node.args if isinstance(a, ast.Constant)
                         and isinstance(a.value, str) and a.value.startswith("-")]
                if not names or any(n in flags for n in names):
                    continue
                kw = _kwargs_of_call(node)
                kw.setdefault("dest", names[0].lstrip("-").replace("-", "_"))
                if "default" not in kw or kw["default"] is None:
                    kw["default"] = dc_defaults.get(kw["dest"])
                if kw.get("action") == "store_true":
                    kw["default"] = bool(kw["default"])
                for opt in names:
                    flags[opt] = {"names": names, **kw}
    return SglangSource(root=root, version=_version(root), era=era, flags=flags)


def build_parser(src: SglangSource) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=src.prog)
    seen = set()
    for spec in src.flags.values():
        names = tuple(spec["names"])
        if names in seen:
            continue
        seen.add(names)
        kwargs = {k: v for k, v in spec.items() if k != "names"}
        try:
            parser.add_argument(*names, **kwargs)
        except (argparse.ArgumentError, TypeError, ValueError):
            continue
    return parser


def normalise_argv(src: SglangSource, argv) -> dict:
    parser = build_parser(src)
    full = vars(parser.parse_args(list(argv)))
    defaults = vars(parser.parse_args(["--model-path", full.get("model_path") or "x"]))
    return {k: v for k, v in full.items() if v != defaults.get(k) or k == "model_path"}


def _multimodal_archs(root: pathlib.Path) -> set:
    path = root / "srt" / "configs" / "model_config.py"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "multimodal_model_archs"):
            return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return set()


def predict(src: SglangSource, args: dict, hardware: dict, model_config: dict) -> list:
    out = []
    algo = args.get("speculative_algorithm")
    if algo == "NEXTN":
        out.append(Finding("speculative_algorithm", "on", "EAGLE", "NEXTN is converted to EAGLE"))
        algo = "EAGLE"
    if algo and args.get("speculative_num_steps") is None:
        arch = (model_config.get("architectures") or [""])[0]
        steps, topk, draft = (5, 4, 8) if arch == "LlamaForCausalLM" else (3, 1, 4)
        for name, val in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk),
                          ("speculative_num_draft_tokens", draft)):
            out.append(Finding(name, "on", val, "auto_choose_speculative_params"))
    arch = (model_config.get("architectures") or [""])[0]
    if src.era == "A" and "disable_piecewise_cuda_graph" in args and arch in _multimodal_archs(src.root):
        out.append(Finding("disable_piecewise_cuda_graph", "auto-disabled", True,
                           "multimodal model", "srt/server_args.py", 0,
                           "no override in this version"))
    return out
