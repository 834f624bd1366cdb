"""``predict``: what the installed release will do with each audited optimisation, and why."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .model import Finding, SglangSource, arg_value, first_known_option
from .optimisations import AUTO_DISABLED, LABEL, OFF_BY_DEFAULT, ON, UNAVAILABLE

# --------------------------------------------------------------------------------------
# Prediction
# --------------------------------------------------------------------------------------


def _sm(hardware: dict) -> int | None:
    cc = str(hardware.get("compute_capability") or "").strip()
    m = re.match(r"(\d+)\.(\d+)", cc)
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def predict(src: SglangSource, args: dict, hardware: dict, model_config: dict) -> list[Finding]:
    """What the installed release will do with each optimisation for these args, GPUs and model.

    ``args``: normalised ``{dest or field: value}`` (see normalise_argv); ``hardware``:
    ``{"gpu_model", "gpu_count", "compute_capability", "source"}``; ``model_config``: the model's
    parsed HF config.json. Each Finding names the rule (file, line) of THIS release.
    One predictor per finding (optimisations.py names it), in the registry's order.
    """
    archs = list(model_config.get("architectures") or [])
    arch = archs[0] if archs else ""
    sm = _sm(hardware)
    gpu = hardware.get("gpu_model") or "this GPU"
    tp = int(arg_value(src, args, "tp_size", 1) or 1)
    nnodes = int(arg_value(src, args, "nnodes", 1) or 1)
    dp_attn = bool(arg_value(src, args, "enable_dp_attention", False))
    rf = functools.partial(_rule_site, src)
    is_mm, lm_only, arch_breakable = _multimodal(src, args, archs)
    return [
        _prefill_graph(src, args, is_mm, lm_only, arch_breakable, arch, rf),
        _decode_graph(src, args, rf),
        _custom_all_reduce(src, args, tp),
        _fusion(src, args, hardware, arch, sm, gpu, tp, nnodes, dp_attn, rf),
        _overlap(src, args, "single_batch_overlap"),
        _overlap(src, args, "two_batch_overlap"),
        _speculative(src, args, rf),
        _mem_fraction_static(src, args),
        _context_length(src, args, model_config),
    ]


def _rule_site(src, key):
    """(file, line) of the release's rule ``key``; (None, None) when the release has none."""
    r = src.rules.get(key)
    return (r.file, r.line) if r else (None, None)


def _multimodal(src, args, archs):
    """(multimodal, --language-model-only given, on the breakable CUDA graph allow-list): configs/model_config.py."""
    R = src.rules
    mm_archs = R.get("multimodal_model_archs")
    is_mm = bool(mm_archs and any(a in mm_archs.data["archs"] for a in archs))
    lm_only = bool(arg_value(src, args, "language_model_only", False)) and src.has("--language-model-only")
    breakable_ok = R.get("multimodal_breakable_cuda_graph_supported_model_archs")
    arch_breakable = bool(breakable_ok and any(a in breakable_ok.data["archs"] for a in archs))
    return is_mm, lm_only, arch_breakable


def _decode_graph(src, args, rf) -> Finding:
    disabled = bool(arg_value(src, args, "disable_cuda_graph", False)) or \
        arg_value(src, args, "cuda_graph_backend_decode") == "disabled"
    if not disabled and _torch_native(src, args) and src.rules.get("torch_native_disables_cuda_graph"):
        file, line = rf("torch_native_disables_cuda_graph")
        return Finding(LABEL["cuda_graph"], AUTO_DISABLED, False, "--attention-backend torch_native: "
                       f"sglang {src.version} disables both CUDA graphs for it", file, line, "--attention-backend",
                       "use a CUDA attention backend (e.g. --attention-backend flashinfer) on a GPU host")
    return Finding(LABEL["cuda_graph"], OFF_BY_DEFAULT if disabled else ON,
                   value=not disabled,
                   reason=("disabled by --disable-cuda-graph / --cuda-graph-backend-decode disabled"
                           if disabled else "captured for decode batch sizes by default"),
                   override=first_known_option(src, "--cuda-graph-backend-decode", "--disable-cuda-graph"),
                   how_to_enable=None if not disabled else "remove --disable-cuda-graph")


def _custom_all_reduce(src, args, tp) -> Finding:
    car_off = bool(arg_value(src, args, "disable_custom_all_reduce", False))
    if tp <= 1:
        return Finding(LABEL["custom_all_reduce"], OFF_BY_DEFAULT, value=False,
                       reason="tp_size is 1: no tensor-parallel all-reduce",
                       override="--disable-custom-all-reduce")
    return Finding(LABEL["custom_all_reduce"], OFF_BY_DEFAULT if car_off else ON, value=not car_off,
                   reason=("disabled by --disable-custom-all-reduce" if car_off else
                           f"default for tp_size={tp} (disable_custom_all_reduce=False); SGLang "
                           "falls back to NCCL at run time if P2P between the GPUs is unavailable"),
                   override="--disable-custom-all-reduce",
                   how_to_enable="remove --disable-custom-all-reduce" if car_off else None)


# optimisation key -> (its ServerArgs field, its flag)
_OVERLAPS = {"single_batch_overlap": ("enable_single_batch_overlap", "--enable-single-batch-overlap"),
             "two_batch_overlap": ("enable_two_batch_overlap", "--enable-two-batch-overlap")}


def _overlap(src, args, key) -> Finding:
    """Single-batch or two-batch overlap (``key``): off unless its flag is given."""
    v = src.version
    name, (field, flag) = LABEL[key], _OVERLAPS[key]
    if not src.has(flag):
        return Finding(name, OFF_BY_DEFAULT, value=False, reason=f"sglang {v} has no {flag}")
    on = bool(arg_value(src, args, field, False))
    f = src.by_option[flag]
    return Finding(name, ON if on else OFF_BY_DEFAULT, value=on,
                   reason=(f"{flag} given" if on else f"{field} defaults to False in sglang {v}"),
                   rule_file=f.file, rule_line=f.line, override=flag,
                   how_to_enable=None if on else f"add {flag} (mainly helps MoE / expert-parallel "
                                                 "models; needs a supported --moe-a2a-backend)")


def _mem_fraction_static(src, args) -> Finding:
    mfs = arg_value(src, args, "mem_fraction_static")
    return Finding(LABEL["mem_fraction_static"], ON, value=mfs if mfs is not None else "auto",
                   reason=("set explicitly" if mfs is not None else
                           "None by default: chosen at startup from GPU memory, tp_size and "
                           "CUDA graph settings"),
                   override="--mem-fraction-static")


def _context_length(src, args, model_config) -> Finding:
    ctx = arg_value(src, args, "context_length")
    model_ctx = model_config.get("max_position_embeddings") or (
        model_config.get("text_config") or {}).get("max_position_embeddings")
    return Finding(LABEL["context_length"], ON, value=ctx if ctx is not None else (model_ctx or "auto"),
                   reason=("set explicitly" if ctx is not None else
                           "None by default: the model's max_position_embeddings from config.json"),
                   override="--context-length")


def _prefill_graph(src, args, is_mm, lm_only, arch_breakable, arch, rf) -> Finding:
    if src.era != "A":
        return _prefill_backend(src, args, is_mm, lm_only, arch_breakable, arch, rf)
    if src.has("--enforce-piecewise-cuda-graph"):   # 0.5.10 - 0.5.13: on by default, cascade
        return _piecewise_by_default(src, args, is_mm, arch, rf)
    if src.has("--enable-piecewise-cuda-graph"):    # <= 0.5.9: opt-in
        return _piecewise_opt_in(src, args, is_mm, arch, rf)
    return Finding(LABEL["piecewise_cuda_graph"], OFF_BY_DEFAULT, False,
                   f"sglang {src.version} has no piecewise CUDA graph flags")


def _piecewise_by_default(src, args, is_mm, arch, rf) -> Finding:
    """Era A, 0.5.10 - 0.5.13: piecewise CUDA graph on by default, the auto-disable cascade."""
    v = src.version
    name = LABEL["piecewise_cuda_graph"]
    enforce = bool(arg_value(src, args, "enforce_piecewise_cuda_graph", False))
    disabled = bool(arg_value(src, args, "disable_piecewise_cuda_graph", False))
    file, line = rf("multimodal_disables_piecewise")
    if disabled:
        return Finding(name, OFF_BY_DEFAULT, False, "disabled by --disable-piecewise-cuda-graph",
                       override="--enforce-piecewise-cuda-graph",
                       how_to_enable="remove --disable-piecewise-cuda-graph")
    if enforce:
        ef, el = rf("enforce_piecewise_skips_cascade")
        return Finding(name, ON, True, "--enforce-piecewise-cuda-graph skips the auto-disable rules",
                       ef, el, "--enforce-piecewise-cuda-graph")
    if is_mm:
        return Finding(name, AUTO_DISABLED, False,
                       f"{arch} is multimodal (configs/model_config.py multimodal_model_archs); "
                       f"sglang {v} disables piecewise CUDA graph for multimodal models",
                       file, line, "--enforce-piecewise-cuda-graph",
                       "add --enforce-piecewise-cuda-graph (skips the auto-disable rules; the "
                       "language model prefill is captured, the vision encoder stays eager)")
    return Finding(name, ON, True, f"on by default in sglang {v}; no auto-disable rule matched "
                   "the checked conditions (multimodal)", file, line, "--disable-piecewise-cuda-graph")


def _piecewise_opt_in(src, args, is_mm, arch, rf) -> Finding:
    """Era A, <= 0.5.9: piecewise CUDA graph is opt-in (--enable-piecewise-cuda-graph)."""
    v = src.version
    name = LABEL["piecewise_cuda_graph"]
    on = bool(arg_value(src, args, "enable_piecewise_cuda_graph", False))
    file, line = rf("multimodal_disables_piecewise")
    if on and is_mm:
        return Finding(name, AUTO_DISABLED, False,
                       f"{arch} is multimodal; sglang {v} turns piecewise CUDA graph off for it",
                       file, line, "--enable-piecewise-cuda-graph", None)
    f = src.by_option["--enable-piecewise-cuda-graph"]
    return Finding(name, ON if on else OFF_BY_DEFAULT, on,
                   "--enable-piecewise-cuda-graph given" if on else f"opt-in in sglang {v}",
                   f.file, f.line, "--enable-piecewise-cuda-graph",
                   None if on else "add --enable-piecewise-cuda-graph")


def _prefill_backend(src, args, is_mm, lm_only, arch_breakable, arch, rf) -> Finding:
    """Eras B / C: the prefill phase's CUDA graph backend (--cuda-graph-backend-prefill)."""
    v = src.version
    R = src.rules
    name = LABEL["piecewise_cuda_graph"]
    opt = "--cuda-graph-backend-prefill"
    explicit = arg_value(src, args, "cuda_graph_backend_prefill") if "cuda_graph_backend_prefill" in args else None
    if _torch_native(src, args) and R.get("torch_native_disables_cuda_graph"):
        file, line = rf("torch_native_disables_cuda_graph")
        return Finding(name, AUTO_DISABLED, "disabled", "--attention-backend torch_native: sglang "
                       f"{v} disables both CUDA graphs for it", file, line, "--attention-backend",
                       "use a CUDA attention backend (e.g. --attention-backend flashinfer) on a GPU host")
    if explicit is None and bool(arg_value(src, args, "disable_cuda_graph", False)) and \
            R.get("disable_cuda_graph_disables_prefill_graph"):
        file, line = rf("disable_cuda_graph_disables_prefill_graph")
        return Finding(name, OFF_BY_DEFAULT, "disabled", "disabled by --disable-cuda-graph (it turns off "
                       "both phases' graphs)", file, line, opt, "remove --disable-cuda-graph")
    default_backend = _default_prefill_backend(src)
    if explicit is not None:
        st = OFF_BY_DEFAULT if explicit == "disabled" else ON
        return Finding(name, st, explicit, f"{opt} {explicit} given: an explicit prefill backend skips "
                       "the auto-disable rules", override=opt,
                       how_to_enable=f"{opt} {default_backend}" if explicit == "disabled" else None)
    if is_mm and not lm_only:
        return _prefill_multimodal(src, arch, arch_breakable, default_backend, rf)
    df, dl = rf("default_prefill_backend")
    return Finding(name, ON, default_backend, f"default prefill backend {default_backend} in sglang {v}; "
                   "no auto-disable rule matched the checked conditions", df, dl, override=opt)


def _default_prefill_backend(src) -> str:
    R = src.rules
    if R.get("default_prefill_backend"):   # read from the release (0.5.15+)
        return R["default_prefill_backend"].data["backend"]
    return "breakable" if R.get("multimodal_breakable_cuda_graph_supported_model_archs") else "tc_piecewise"


def _prefill_multimodal(src, arch, arch_breakable, default_backend, rf) -> Finding:
    """Eras B / C, a multimodal model: the 'multimodal model' rule, unless on the breakable allow-list."""
    name = LABEL["piecewise_cuda_graph"]
    opt = "--cuda-graph-backend-prefill"
    key = "multimodal_disables_prefill_graph_breakable" if default_backend == "breakable" else \
        "multimodal_disables_prefill_graph_piecewise"
    file, line = rf(key)
    if default_backend == "breakable" and arch_breakable:
        bf, bl = rf("multimodal_breakable_cuda_graph_supported_model_archs")
        return Finding(name, ON, "breakable",
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
    return Finding(name, AUTO_DISABLED, "disabled",
                   f"{arch} is multimodal; sglang {src.version} disables the prefill CUDA graph "
                   "('multimodal model' rule)", file, line, opt, hint)


def _torch_native(src, args) -> bool:
    """The host asks for SGLang's plain-torch attention (a CPU host's choice: lab/real_sglang)."""
    return str(arg_value(src, args, "attention_backend") or "").strip() == "torch_native"


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
    name = LABEL["flashinfer_allreduce_fusion"]
    rule = src.rules.get("flashinfer_allreduce_fusion_auto_enable")
    override = first_known_option(src, "--flashinfer-allreduce-fusion-backend", "--enable-flashinfer-allreduce-fusion")
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
        return Finding(name, UNAVAILABLE, False, f"{gpu} is SM{sm}; {why}",
                       file, line, override, None)
    if rule is None:
        explicit = bool(arg_value(src, args, "enable_flashinfer_allreduce_fusion", False))
        return Finding(name, ON if explicit else OFF_BY_DEFAULT, explicit,
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
    # unknown compute capability: the single-node rule is taken to apply (SM100 is its one exception)
    if nnodes > 1 and (d.get("single_node") and not (d.get("single_node_only_sm90") and sm is not None and sm // 10 == 10)):
        reasons.append("more than one node")
    if d.get("excludes_h20") and "H20" in str(gpu) and "H200" not in str(gpu):
        reasons.append("H20 is excluded in this release")
    if sm is None:
        reasons.append("compute capability unknown")
    explicit_off = bool(arg_value(src, args, "enforce_disable_flashinfer_allreduce_fusion", False))
    if explicit_off:
        return Finding(name, OFF_BY_DEFAULT, False, "--enforce-disable-flashinfer-allreduce-fusion given",
                       file, line, override, "remove --enforce-disable-flashinfer-allreduce-fusion")
    if reasons:
        return Finding(name, OFF_BY_DEFAULT, False, "not auto-enabled: " + "; ".join(reasons),
                       file, line, override, f"add {override}" if override else None)
    return Finding(name, ON, True, f"auto-enabled on SM{sm} for {arch} with tp_size={tp}", file, line,
                   override)


def _speculative(src, args, rf) -> Finding:
    v = src.version
    name = LABEL["speculative"]
    algo = arg_value(src, args, "speculative_algorithm")
    if not algo:
        return Finding(name, OFF_BY_DEFAULT, None, "no --speculative-algorithm",
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
    steps = arg_value(src, args, "speculative_num_steps")
    topk = arg_value(src, args, "speculative_eagle_topk")
    draft = arg_value(src, args, "speculative_num_draft_tokens")
    auto = steps is None or topk is None or draft is None
    if auto and eff in ("EAGLE", "EAGLE3"):
        steps = default[0] if steps is None else steps
        topk = default[1] if topk is None else topk
        draft = default[2] if draft is None else draft
    adjusted = (eff in ("EAGLE", "EAGLE3") and topk == 1 and steps is not None and draft != steps + 1
                and src.rules.get("speculative_topk1_draft_tokens") is not None)
    if adjusted:
        draft = steps + 1
    value = {"algorithm": eff, "num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft}
    reason = f"{algo}" + (f" is converted to EAGLE by sglang {v}" if converted else " as given")
    if auto:
        af, al = rf("speculative_auto_params")
        reason += f"; unset steps/topk/draft tokens are auto-chosen (default {default})"
        if not converted:
            file, line = af, al
    if adjusted:
        file, line = rf("speculative_topk1_draft_tokens")
        reason += "; with topk 1 the draft tokens become steps + 1"
    reason += f": EAGLE {steps}/{topk}/{draft}" if eff in ("EAGLE", "EAGLE3") else ""
    return Finding(name, ON, value, reason, file, line, "--speculative-algorithm")
