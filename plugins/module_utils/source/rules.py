"""Auto-adjust rules found in the installed source (file + line of THIS release), and the
start-up refusals they imply."""
from __future__ import annotations

import ast
import re

from .extract import SERVER_ARGS_PY, callee
from .model import Problem, Rule, SglangSource, arg_value, first_known_option
from .tree import Module, Tree, Unresolved, py_value

# --------------------------------------------------------------------------------------
# Auto-adjust rules (read from the installed source, with file + line)
# --------------------------------------------------------------------------------------


def _rule_files(tree: Tree) -> list[Module]:
    mods = [tree.module(SERVER_ARGS_PY)]
    ag = tree.pkg / "srt" / "arg_groups"
    if ag.is_dir():
        mods += [tree.module(f"sglang/srt/arg_groups/{p.name}") for p in sorted(ag.glob("*.py"))]
    return [m for m in mods if m is not None]


def _enclosing_functions(mod: Module):
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


def _str_list(tree: Tree, mod: Module, node) -> list[str] | None:
    for n in ast.walk(node):
        if isinstance(n, (ast.List, ast.Tuple, ast.Set)) and n.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) and "For" in e.value
                for e in n.elts):
            return [e.value for e in n.elts]
        if isinstance(n, ast.Name) and "ARCH" in n.id.upper():
            try:
                val = tree.eval(n, mod)
                return sorted(val) if isinstance(val, (set, frozenset)) else list(val)
            except Unresolved:
                continue
    return None


def extract_rules(src: SglangSource, tree: Tree) -> dict[str, Rule]:
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
            except Unresolved:
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
                # topk 1 draws one token per step: the draft tokens become steps + 1, whatever was set or
                # auto-chosen (0.5.11 server_args.py:3539-3546, 0.5.23 arg_groups/speculative_hook.py:1260)
                if re.search(r"speculative_eagle_topk\s*==\s*1\b", test) and \
                        re.search(r"speculative_num_steps\s*\+\s*1", test):
                    add("speculative_topk1_draft_tokens", mod, node, function=fn)
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
                body = "\n".join(ast.unparse(st) for st in node.body)
                # both phases' graphs off for torch_native attention (0.5.11 server_args.py:2553-2557,
                # 0.5.23 arg_groups/attention_hook.py:124-141)
                if re.search(r"attention_backend\s*==\s*['\"]torch_native['\"]", test) and \
                        "Cuda graph is disabled" in body:
                    add("torch_native_disables_cuda_graph", mod, node, function=fn)
                # the legacy --disable-cuda-graph turns the prefill graph off too, where the per-phase
                # config exists (0.5.18 server_args.py:4507-4509, 0.5.23 arg_groups/cuda_graph_hook.py:55-57)
                if re.fullmatch(r"(self|cfg)\.disable_cuda_graph", test.strip()) and "PREFILL" in body:
                    add("disable_cuda_graph_disables_prefill_graph", mod, node, function=fn)
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


def _sm100_fusion_rules(tree: Tree, rules: dict) -> None:
    """Before the generic rule (0.5.9): per-model rules that enable the fusion on SM100 only (0.5.3, 0.5.6).

    ``if model_arch in ["GptOssForCausalLM"]: ... if is_sm100_supported(): if not
    self.enable_dp_attention: self.enable_flashinfer_allreduce_fusion = True`` (one per model, in
    _handle_model_specific_adjustments); one Rule whose ``sites`` give each architecture its line.
    """
    sa = tree.module(SERVER_ARGS_PY)
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


def _default_prefill_backend(tree: Tree, rules: dict) -> None:
    """The prefill CUDA graph backend a CUDA host gets by default (0.5.15+: ``default_prefill_backend()``
    in model_executor/cuda_graph_config.py, ``Backend.BREAKABLE if is_cuda() else ...``)."""
    mod = tree.module("sglang/srt/model_executor/cuda_graph_config.py")
    fn = mod.functions.get("default_prefill_backend") if mod is not None else None
    for ret in ast.walk(fn) if fn is not None else []:
        if not isinstance(ret, ast.Return) or ret.value is None:
            continue
        value = ret.value
        if isinstance(value, ast.IfExp):
            if not (isinstance(value.test, ast.Call) and callee(value.test) == "is_cuda"):
                continue
            value = value.body
        try:
            backend = py_value(tree.eval(value, mod))
        except Unresolved:
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


def _linear_attn_registrations(tree: Tree) -> dict:
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
            if not (isinstance(n, ast.Call) and callee(n) == "LinearAttnModelSpec"):
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


def _mamba_speculative_radix_rule(tree: Tree, rules: dict) -> None:
    """0.5.10 - 0.5.13.post1: ``ServerArgs._handle_mamba_radix_cache`` raises ValueError("Speculative
    decoding for {model_arch} is not compatible with radix cache when using
    --mamba-scheduler-strategy no_buffer ...") for a hybrid linear-attention (mamba) model when
    speculative decoding is on, the radix cache is not disabled and the strategy is no_buffer (0.5.11
    srt/server_args.py:2453; up to 0.5.9 it disabled the radix cache with a warning, from 0.5.14 it
    picks extra_buffer or no_buffer itself). The architectures are read from its callers in this
    release: the ``model_arch in [...]`` branches of _handle_model_specific_adjustments that call it
    with the mamba cache supported, and the linear-attention registry (get_linear_attn_spec_by_arch)."""
    sa = tree.module(SERVER_ARGS_PY)
    cls = sa.classes.get("ServerArgs") if sa is not None else None
    if cls is None:
        return
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    handler = methods.get(_MAMBA_HANDLER)
    if handler is None:
        return
    raise_node = message = None
    for n in ast.walk(handler):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and callee(n.exc) == "ValueError" \
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
    algorithm = arg_value(src, args, "speculative_algorithm")
    strategy = arg_value(src, args, "mamba_scheduler_strategy", "auto")
    if strategy == "auto":
        strategy = rule.data.get("auto_strategy")
    if site is None or not algorithm or arg_value(src, args, "disable_radix_cache", False) \
            or strategy != "no_buffer" or _rocm(hardware):   # ROCm: disables the radix cache itself
        return []
    sa = rule.file
    via = f"reached from :{site['line']} for {arch}" + (
        f", registered at {site['registered']}" if site.get("registered") else "")
    said = rule.data["message"].replace("{model_arch}", arch)
    strategy_opt = first_known_option(src, "--mamba-scheduler-strategy")
    extra = site.get("extra_buffer") and strategy_opt is not None and any(
        "extra_buffer" in str(c) for c in (src.by_option[strategy_opt].choices or []))
    fix = "add disable_radix_cache: true to sglang_args (prefix caching off)"
    if extra:
        fix += (", or set mamba_scheduler_strategy: extra_buffer in sglang_args"
                + (' and SGLANG_ENABLE_SPEC_V2: "1" in sglang_service_environment' if rule.data.get("spec_v2_env")
                   else ""))
    msg = (f"{arch} is a hybrid linear-attention (mamba) model, and sglang {src.version} does not run "
           f"speculative decoding (--speculative-algorithm {algorithm}) with its radix cache under "
           f"--mamba-scheduler-strategy no_buffer ({'the default' if arg_value(src, args, 'mamba_scheduler_strategy', 'auto') == 'auto' else 'as given'}): "
           f"{sa}:{rule.line} ({rule.data['function']}, {via}) raises 'ValueError: {said}' at start. "
           f"Fix: {fix}.")
    sugg = ["--disable-radix-cache"] + ([f"{strategy_opt} extra_buffer"] if extra else [])
    return [Problem("--speculative-algorithm", "refused_at_start", msg, sugg)]
