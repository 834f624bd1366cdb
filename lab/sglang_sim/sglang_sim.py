"""sglang-sim: a test double of SGLang's serving surface for lab hosts without a GPU.

Invoked exactly like the real server, with the same argv as ``python -m sglang.launch_server``::

    <venv>/bin/python /opt/sglang-sim/sglang_sim.py --model-path M --tp-size 2 --port 30000 ...

It is NOT SGLang: no model runs and the text is "A".."Z" cycling. What it reproduces:

* argv validation of the *installed* sglang (found with ``importlib.util.find_spec("sglang")``
  of this interpreter, never imported): ``sglang_source.build_parser`` rebuilds SGLang's argparse
  parser from the source, so a bad flag prints argparse's usage + error and exits 2;
  ``--config file.yaml`` is merged the way SGLang's ConfigArgumentMerger does (exact ``--config``
  token only, config first, CLI wins);
* resolved settings in ``/server_info``: every flag with its default, argv applied, then SGLang's
  startup resolution from this file's own table (NEXTN->EAGLE, speculative auto-choice, the
  multimodal prefill-graph rule); never from ``sglang_source.predict``; simple fallbacks, then the fault knobs;
* start-up refusals of ServerArgs, from this file's own table: 0.5.10 - 0.5.13.post1 exit 1 with
  SGLang's ValueError for speculative decoding on a hybrid linear-attention model with the radix
  cache on and the no_buffer mamba strategy (``startup_refusal``);
* the endpoints and field names of the real server, streaming as SSE, Prometheus ``/metrics``;
* decode speed from the roofline below, paced with real sleeps.

Throughput model: data, the config file's `surface` section over SURFACE_DEFAULTS (README "Response
surface")::

    passes/s   = bandwidth_efficiency * hbm_bandwidth_gbs * tp / weight_bytes * efficiency
    tok/s at b = passes/s * accept(b) / (1 + draft_step_cost * steps) / (1 + batch_cost_per_doubling * log2 b)
                 * effects' decode * degrade_factor * slow_release   (* no_cuda_graph_decode past the graphs)
    accept     = 1 + sum over k <= min(steps, draft - 1) of prod_{i<=k} accept_first * accept_decay ** (i - 1)
    TTFT       = (chunks + prompt_tokens / prefill_tokens_per_pass) / passes/s * effects' ttft

Settings that do not fit (the memory model, or a `limits` rule) fail at start-up as SGLang's scheduler
does (startup_failure). Defaults: ct129 (2x A6000, 27 GB, NEXTN 3/1/4) 53.4 tok/s (measured 50-57),
1-step MTP 38.7 (measured ~35-40), no speculation 22.7; single stream peaks at 4 steps.

Token counting: prompt tokens = whitespace-separated words of the text (chat: of every message's
text), or len(input_ids); at least 1. Output: exactly max_new_tokens / max_tokens tokens
(EOS never sampled), one token per streamed chunk. Config: JSON at $SGLANG_SIM_CONFIG
(default /etc/sglang-sim/config.json); see README.md for its schema and the fault knobs.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import pathlib
import random
import signal
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_CONFIG = "/etc/sglang-sim/config.json"
FAULT_KNOBS = ("never_healthy", "slow_start_s", "degrade_factor", "disable_optimization", "crash_after_requests",
               "rendezvous_timeout_s", "noise_cv", "noise_seed", "slow_release")

DEFAULT_LOAD_S = 1.0
DEFAULT_TOKEN_CAPACITY = 262144

# argparse dests that ServerArgs.from_cli_args renames (era A).
ALIAS_DESTS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "attention_context_parallel_size": "attn_cp_size",
    "moe_data_parallel_size": "moe_dp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
}
# As bad as the real release: SGLang keeps secrets in clear where it shows its arguments.
# /server_info is every field, api_key and admin_api_key included (0.5.11
# srt/entrypoints/http_server.py:641 `dataclasses.asdict(server_args)`; 0.5.23
# srt/utils/common.py:3589 `build_server_info` -> `resolved_dict()`). `launch_command` exists
# from 0.5.20 (srt/server_args.py:736 `" ".join(argv)`, the argv the launcher's in-process
# `--api-key K` is part of; 0.5.22+ redacts only --watermark-config, 0.5.23
# srt/server_args.py:717); before 0.5.20 /server_info has no launch_command. At start-up SGLang
# logs every server arg to stderr: `server_args=ServerArgs(...)` (the dataclass repr) up to
# 0.5.18 (0.5.11 srt/entrypoints/engine.py:679, 0.5.18 :1095 `logger.info(f"{server_args=}")`),
# `server_args={...}` (a dict) from 0.5.19 (0.5.19 engine.py:1098 `resolved_dict()`, 0.5.23
# engine.py:1185 `_server_args_for_logging`, watermark keys redacted only).
LAUNCH_COMMAND_SINCE = (0, 5, 20)
# 0.5.23 /server_info (srt/entrypoints/http_server.py:864-893) adds to the resolved args the
# scheduler's init info (srt/managers/scheduler.py:1937-1950: status "ready", max_total_num_tokens,
# max_req_input_len = min(context_len - 1, KV capacity - 1) - 5 at srt/managers/tp_worker.py:568-572,
# startup_time, hicache_object_layout), kv_events (srt/utils/common.py:3584-3593) and frontend
# "python". Checked against the real 0.5.23 on lab host cpu1
# (tests/fixtures/real_sglang/0.5.23-cpu-server_info.json); older releases' additions are not modelled.
SCHEDULER_INFO_SINCE = (0, 5, 23)
# The OpenAI routes' shapes as the real 0.5.23 answers them (lab/real_sglang/probe.py against lab host
# cpu1, tests/fixtures/real_sglang/0.5.23-cpu-probes.json): usage with reasoning_tokens and the two
# *_details (null), a `metadata` with the weight version, `usage: null` in every streamed completions
# chunk, matched_stop in chat chunks, `parent` in /v1/models, and a request longer than the context
# refused with 400 (srt/managers/tokenizer_manager.py:1333-1378). Older releases keep the shapes below.
OPENAI_SHAPES_SINCE = (0, 5, 23)
WATERMARK_REDACTED_SINCE = (0, 5, 22)
ARGS_LOGGED_AS_DICT_SINCE = (0, 5, 19)


def version_tuple(version: str) -> tuple:
    parts = []
    for part in str(version).split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06,
               0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800)


class SimError(Exception):
    """A startup failure: message to stderr, exit 1."""


# ----------------------------------------------------------------------------- startup


def log(msg: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] {msg}", file=sys.stderr, flush=True)


def locate_sglang() -> pathlib.Path:
    """The installed sglang package folder of this interpreter, without importing it."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SimError(f"sglang-sim: no sglang package found for {sys.executable} "
                       "(the simulator reads the installed SGLang's source)")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def import_source_reader():
    """`sglang_source` from the simulator's own folder (lab hosts: /opt/sglang-sim/)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    try:
        import sglang_source
    except ImportError as exc:
        raise SimError(f"sglang-sim: cannot import the sglang_source package next to {__file__}: {exc}") from exc
    return sglang_source


def import_optimisations():
    """The registry of audited optimisations (sglang_source/optimisations.py): keys and /server_info
    field names only, data; the simulator never calls the reader's predict()."""
    import_source_reader()
    from sglang_source import optimisations
    return optimisations


def _yaml_scalar(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("null", "~", ""):
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_flat_yaml(text: str) -> dict:
    """The YAML subset a launch config uses: `key: scalar`, `key: [a, b]`, `key:` + `- item`."""
    out: dict = {}
    last = None
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.lstrip().startswith("- ") and last is not None:
            if not isinstance(out[last], list):
                out[last] = []
            out[last].append(_yaml_scalar(line.lstrip()[2:]))
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise SimError(f"sglang-sim: cannot read config line {raw!r}")
        last = key.strip()
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            out[last] = [_yaml_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            out[last] = _yaml_scalar(value)
    return out


def merge_config_file(parser: argparse.ArgumentParser, argv: list) -> list:
    """SGLang's ConfigArgumentMerger: only an exact `--config PATH` token pair is expanded."""
    idx = [i for i, a in enumerate(argv) if a == "--config"]
    if not idx:
        return argv
    if len(idx) > 1:
        raise SimError("ValueError: Multiple config files specified! Only one allowed.")
    i = idx[0]
    if i == len(argv) - 1:
        raise SimError("ValueError: No config file specified after --config flag!")
    path = pathlib.Path(argv[i + 1])
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise SimError(f"ValueError: Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise SimError(f"ValueError: Config file not found: {path}")
    store_true = {a.dest for a in parser._actions if isinstance(a, argparse._StoreTrueAction)}
    extra: list = []
    for key, value in parse_flat_yaml(path.read_text()).items():
        if isinstance(value, bool):
            if key.replace("-", "_") in store_true:
                if value:
                    extra.append(f"--{key}")
            else:
                extra += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            if value:
                extra += [f"--{key}"] + [str(v) for v in value]
        else:
            extra += [f"--{key}", str(value)]
    return extra + argv[:i] + argv[i + 2:]


def load_sim_config() -> dict:
    path = pathlib.Path(os.environ.get("SGLANG_SIM_CONFIG", DEFAULT_CONFIG))
    if not path.exists():
        raise SimError(f"sglang-sim: config file {path} not found (set SGLANG_SIM_CONFIG); "
                       "it declares the simulated hardware")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as exc:
        raise SimError(f"sglang-sim: config file {path} is not valid JSON: {exc}") from exc
    hw = cfg.get("hardware", cfg)
    missing = [k for k in ("gpu_model", "gpu_count", "compute_capability", "hbm_bandwidth_gbs")
               if k not in hw]
    if missing:
        raise SimError(f"sglang-sim: config file {path} lacks hardware keys: {', '.join(missing)}")
    cfg["hardware"] = {k: hw[k] for k in ("gpu_model", "gpu_count", "compute_capability",
                                           "hbm_bandwidth_gbs")}
    # Fault knobs from the unit's environment (SGLANG_SIM_FAULTS=never_healthy=true,slow_start_s=8),
    # over the file's: a fault that belongs to one release (its unit) and goes away when a
    # rollback restores the previous unit, as a bad release's would. Values are JSON where they
    # parse (true, 8, 0.5), else text (speculative); no quotes, so systemd passes them as they are.
    faults = os.environ.get("SGLANG_SIM_FAULTS", "")
    for item in filter(None, faults.split(",")):
        knob, sep, value = item.partition("=")
        if not sep or knob not in FAULT_KNOBS:
            raise SimError(f"sglang-sim: SGLANG_SIM_FAULTS: {item!r} is not <knob>=<value> with a knob of "
                           f"{', '.join(FAULT_KNOBS)}")
        try:
            cfg[knob] = json.loads(value)
        except ValueError:
            cfg[knob] = value
    cv, seed = cfg.get("noise_cv", 0), cfg.get("noise_seed", 0)
    if isinstance(cv, bool) or not isinstance(cv, (int, float)) or not 0 <= cv < 1:
        raise SimError(f"sglang-sim: noise_cv is {cv!r}: it must be a number in [0, 1) (the coefficient of "
                       "variation of a request's decode speed; 0 = exact pacing)")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SimError(f"sglang-sim: noise_seed is {seed!r}: it must be a whole number")
    cfg["slow_release"] = slow_releases(cfg.get("slow_release"))
    cfg["surface"] = load_surface(cfg.get("surface"))
    return cfg


def slow_releases(text) -> dict:
    """`slow_release`: "<version>=<factor>[;...]", the decode speed of those SGLang releases times the
    factor wherever they are installed (a release that is slower on this hardware), as {version: factor}."""
    out = {}
    for item in filter(None, str(text or "").split(";")):
        version, _, factor = (part.strip() for part in item.partition("="))
        try:
            value = float(factor)
        except ValueError:
            value = None
        if not version or value is None or not 0 < value <= 10:
            raise SimError(f"sglang-sim: slow_release {item!r} is not <version>=<factor> with a factor in (0, 10] "
                           "(e.g. 0.5.13.post1=0.7: that release decodes at 70 %)")
        out[version] = value
    return out


def load_model(model_path: str) -> dict:
    """`<model-path>/config.json` as a dict; a missing model fails like SGLang (exit 1)."""
    path = pathlib.Path(model_path)
    cfg = path / "config.json"
    if not path.is_dir() or not cfg.is_file():
        raise SimError(f"OSError: Can't load the configuration of '{model_path}': "
                       f"no such local model directory with a config.json "
                       "(sglang-sim cannot download from the Hugging Face Hub)")
    try:
        return json.loads(cfg.read_text())
    except ValueError as exc:
        raise SimError(f"OSError: {cfg} is not a valid JSON file: {exc}") from exc


def estimate_weight_bytes(model_path: str, model_config: dict, sim_cfg: dict) -> int:
    """Config value, else safetensors index metadata.total_size, else a config.json estimate."""
    if sim_cfg.get("weight_bytes"):
        return int(sim_cfg["weight_bytes"])
    index = pathlib.Path(model_path) / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
            if total:
                return int(total)
        except ValueError:
            pass
    text = model_config.get("text_config", model_config)
    hidden = int(text.get("hidden_size", 4096))
    layers = int(text.get("num_hidden_layers", 32))
    inter = int(text.get("intermediate_size", 4 * hidden))
    vocab = int(text.get("vocab_size", 32000))
    params = layers * (4 * hidden * hidden + 3 * hidden * inter) + 2 * vocab * hidden
    dtype = str(text.get("torch_dtype", model_config.get("torch_dtype", "bfloat16")))
    return params * (4 if "32" in dtype else 1 if "8" in dtype else 2)


def launch_command(version: str, argv: list):
    """/server_info's `launch_command` as the release builds it: None before 0.5.20, else the
    merged argv joined by spaces, secrets in clear; 0.5.22+ redacts the --watermark-config value
    (sampling/watermarking/core.py `redact_watermark_command_line`), nothing else."""
    if version_tuple(version) < LAUNCH_COMMAND_SINCE:
        return None
    if version_tuple(version) < WATERMARK_REDACTED_SINCE:
        return " ".join(argv)
    out, hide = [], False
    for tok in argv:
        if hide:
            out.append("<redacted>")
            hide = False
        elif tok == "--watermark-config":
            out.append(tok)
            hide = True
        elif tok.startswith("--watermark-config="):
            out.append("--watermark-config=<redacted>")
        else:
            out.append(tok)
    return " ".join(out)


def server_args_log_line(version: str, resolved: dict) -> str:
    """SGLang's start-up log line of its server args (api_key in clear, as the real one)."""
    if version_tuple(version) >= ARGS_LOGGED_AS_DICT_SINCE:
        return f"server_args={resolved!r}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in resolved.items()) + ")"


# ----------------------------------------------------------------------------- resolution
# The simulator's resolved settings never come from sglang_source.predict (the code the audit
# checks them against): this table, written from the real sources (file:line below), for the
# few rules the audit looks at.
# configs/model_config.py `multimodal_model_archs` (0.5.11 :1490, 0.5.23 :1702): the two the
# lab and tests use.
MULTIMODAL_ARCHS = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
                    "Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration",
                    "Qwen3VLForConditionalGeneration")
# `multimodal_breakable_cuda_graph_supported_model_archs` from 0.5.16 (Qwen3.5 on it).
BREAKABLE_MM_SINCE = (0, 5, 16)
BREAKABLE_MM_ARCHS = ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
PREFILL_BACKEND_SINCE = (0, 5, 14)   # --cuda-graph-backend-prefill (era B)
DRAFT_TOKENS_FOLLOW_STEPS_UNTIL = (0, 5, 11)   # topk 1: draft tokens = steps + 1 (_table_resolution)


def _table_resolution(version, resolved, model_config, hardware):
    """SGLang's start-up resolution of the audited settings, from this table (see above)."""
    v = version_tuple(version)
    arch = (model_config.get("architectures") or [""])[0]
    mm = arch in MULTIMODAL_ARCHS
    # NEXTN is run as EAGLE (0.5.11 srt/server_args.py `_handle_speculative_decoding`:
    # `if self.speculative_algorithm == "NEXTN": self.speculative_algorithm = "EAGLE"`), and unset
    # steps/topk/draft tokens come from auto_choose_speculative_params: (3, 1, 4) by default.
    if resolved.get("speculative_algorithm") == "NEXTN":
        resolved["speculative_algorithm"] = "EAGLE"
    if resolved.get("speculative_algorithm") in ("EAGLE", "EAGLE3"):
        if resolved.get("speculative_num_steps") is None:
            steps, topk, draft = (5, 4, 8) if arch == "LlamaForCausalLM" else (3, 1, 4)
            resolved["speculative_num_steps"] = steps
            if resolved.get("speculative_eagle_topk") is None:
                resolved["speculative_eagle_topk"] = topk
            if resolved.get("speculative_num_draft_tokens") is None:
                resolved["speculative_num_draft_tokens"] = draft
        if resolved.get("speculative_eagle_topk") is None:
            resolved["speculative_eagle_topk"] = 1
        if resolved.get("speculative_num_draft_tokens") is None:
            resolved["speculative_num_draft_tokens"] = int(resolved["speculative_num_steps"]) + 1
        # Up to 0.5.11, topk 1 forces draft tokens = steps + 1 whatever was asked (0.5.11
        # srt/server_args.py:3539-3546, "speculative_num_draft_tokens is adjusted to
        # speculative_num_steps + 1 when speculative_eagle_topk == 1"; also 0.4.10.post2 :576, 0.5.3
        # :1114, 0.5.6 :1748, 0.5.9 :2448, 0.5.10 :3079); 0.5.13.post1's server_args.py has no such rule.
        if v <= DRAFT_TOKENS_FOLLOW_STEPS_UNTIL and int(resolved["speculative_eagle_topk"]) == 1:
            resolved["speculative_num_draft_tokens"] = int(resolved["speculative_num_steps"]) + 1
    # Prefill graph. Era A 0.5.10-0.5.13: on unless a rule disables it (0.5.11 server_args.py:1229
    # `if self.get_model_config().is_multimodal: self.disable_piecewise_cuda_graph = True`),
    # --enforce-piecewise-cuda-graph skips the rules (:1196). Era B/C: default backend breakable
    # on CUDA (model_executor/cuda_graph_config.py `default_prefill_backend`), the "multimodal
    # model" rule disables it unless the arch is on the breakable allow-list; an explicit
    # --cuda-graph-backend-prefill skips the rules.
    if v < PREFILL_BACKEND_SINCE:
        if "disable_piecewise_cuda_graph" in resolved and not resolved.get("enforce_piecewise_cuda_graph"):
            if mm:
                resolved["disable_piecewise_cuda_graph"] = True
    elif "cuda_graph_backend_prefill" in resolved and resolved.get("cuda_graph_backend_prefill") is None:
        if resolved.get("disable_cuda_graph"):
            resolved["cuda_graph_backend_prefill"] = "disabled"
        elif mm and not (v >= BREAKABLE_MM_SINCE and arch in BREAKABLE_MM_ARCHS) and \
                not resolved.get("language_model_only"):
            resolved["cuda_graph_backend_prefill"] = "disabled"
        else:
            resolved["cuda_graph_backend_prefill"] = "breakable"
    # FlashInfer all-reduce fusion needs SM90/SM100 (its kernels); on other GPUs it stays off.
    # (Which architectures get it auto-enabled is not modelled.)


# Start-up refusal, 0.5.10 - 0.5.13.post1 (own table, from the real sources): for a hybrid
# linear-attention (mamba) model, speculative decoding with the radix cache on and
# --mamba-scheduler-strategy no_buffer (what "auto", the default, becomes: 0.5.11
# srt/server_args.py:1079-1082) makes ServerArgs._handle_mamba_radix_cache raise ValueError (the
# `raise ValueError(` at srt/server_args.py 0.5.10 :2206, 0.5.11 :2453, 0.5.12 :2568, 0.5.13 :2754;
# the .post releases have the same lines); 0.5.9 disabled the radix cache with a warning instead
# (:1762), 0.5.14 rewrote the handler (:4380, it chooses the strategy). The Qwen3.5/Qwen3-Next
# branch calls it (0.5.11 :2236, 0.5.13.post1 :2530); on ROCm it disables the radix cache instead.
MAMBA_SPEC_REFUSAL = ((0, 5, 10), (0, 5, 14))
MAMBA_SPEC_RAISE_LINE = {(0, 5, 10): 2206, (0, 5, 11): 2453, (0, 5, 12): 2568, (0, 5, 13): 2754}
MAMBA_SPEC_ARCHS = ("Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                    "Qwen3_5ForConditionalGeneration")


def startup_refusal(version, parsed: dict, model_config: dict, hardware: dict) -> str | None:
    """The traceback tail the release prints when its ServerArgs refuses these args, or None."""
    v = version_tuple(version)
    arch = (model_config.get("architectures") or [""])[0]
    if not (MAMBA_SPEC_REFUSAL[0] <= v < MAMBA_SPEC_REFUSAL[1]) or arch not in MAMBA_SPEC_ARCHS:
        return None
    if not parsed.get("speculative_algorithm") or parsed.get("disable_radix_cache") or \
            parsed.get("mamba_scheduler_strategy") not in (None, "auto", "no_buffer") or \
            "AMD" in str(hardware.get("gpu_model") or ""):
        return None
    line = MAMBA_SPEC_RAISE_LINE[v]
    return ("Traceback (most recent call last):\n"
            f'  File "sglang/srt/server_args.py", line {line}, in _handle_mamba_radix_cache\n'
            "    raise ValueError(\n"
            f"ValueError: Speculative decoding for {arch} is not compatible with radix cache when using "
            "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
            "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.")


def resolve(sgs, src, parser, argv, model_config, hardware):
    """Resolved server args by dest name: every flag's default with argv applied, then SGLang's
    start-up resolution from the table above, then simple fallbacks.

    `sgs` is used only for argv parsing (build_parser / normalise_argv), never for predict.
    """
    ns = vars(parser.parse_args(argv))
    resolved = {k: v for k, v in ns.items() if k not in ALIAS_DESTS}
    for key, target in ALIAS_DESTS.items():  # ServerArgs.from_cli_args renames these
        if key in ns:
            resolved[target] = ns[key]
    for key, value in resolved.items():  # a default SGLang computes at run time (not modelled)
        if not isinstance(value, (str, int, float, bool, list, dict, type(None))):
            resolved[key] = None
    try:
        given = dict(sgs.normalise_argv(src, argv) or {})
    except (AttributeError, TypeError, ValueError):
        given = {}
    for key, value in given.items():
        if key in resolved:
            resolved[key] = value
    graph_flags = {key: resolved.get(key) for key in ("cuda_graph_backend_decode", "cuda_graph_backend_prefill")}
    _table_resolution(src.version, resolved, model_config, hardware)
    if "cuda_graph_config" in resolved:
        _publish_graph_config(resolved, graph_flags)
    if resolved.get("tokenizer_path") is None and "tokenizer_path" in resolved:
        resolved["tokenizer_path"] = resolved.get("model_path")
    if resolved.get("served_model_name") is None and "served_model_name" in resolved:
        resolved["served_model_name"] = resolved.get("model_path")
    if "mem_fraction_static" in resolved and resolved["mem_fraction_static"] is None:
        resolved["mem_fraction_static"] = 0.85
    return resolved


def _publish_graph_config(resolved: dict, flags: dict) -> None:
    """0.5.18+: the per-phase flags stay as given (None when unset) and the resolution is published in
    `cuda_graph_config` (0.5.18 server_args.py:4507-4520, 0.5.23 arg_groups/cuda_graph_hook.py:47-75:
    --disable-cuda-graph turns both phases off, an explicit per-phase backend wins over it). torch_native
    attention turns both off afterwards (0.5.18 server_args.py:5966-5970, 0.5.23
    arg_groups/attention_hook.py:124-141). The real 0.5.23 on CPU (lab host cpu1, torch_native) answers
    {"decode": {"backend": "disabled", "max_bs": 32, ...}, "prefill": {"backend": "disabled", ...}};
    the batch-size fields are not modelled."""
    torch_native = resolved.get("attention_backend") == "torch_native"
    decode = flags["cuda_graph_backend_decode"] or ("disabled" if resolved.get("disable_cuda_graph") else "full")
    prefill = resolved.get("cuda_graph_backend_prefill") or "breakable"   # resolved by _table_resolution
    resolved["cuda_graph_config"] = {"decode": {"backend": "disabled" if torch_native else decode},
                                     "prefill": {"backend": "disabled" if torch_native else prefill}}
    resolved.update(flags)


def apply_faults(resolved: dict, cfg: dict) -> None:
    """`disable_optimization`: the server silently flips one resolved setting."""
    name = cfg.get("disable_optimization")
    if not name:
        return
    spec = import_optimisations().BY_KEY["speculative"]
    if name == spec.key:
        for key in spec.server_fields:
            if key in resolved:
                resolved[key] = None
        return
    hit = False
    if f"disable_{name}" in resolved:
        resolved[f"disable_{name}"], hit = True, True
    if f"enable_{name}" in resolved:
        resolved[f"enable_{name}"], hit = False, True
    config = resolved.get("cuda_graph_config")
    if name == "piecewise_cuda_graph" and isinstance(config, dict):     # 0.5.18+ publish it here
        config["prefill"]["backend"], hit = "disabled", True
    elif name == "piecewise_cuda_graph" and "cuda_graph_backend_prefill" in resolved:
        resolved["cuda_graph_backend_prefill"], hit = "disabled", True
    if name == "cuda_graph" and isinstance(config, dict):
        config["decode"]["backend"] = "disabled"
    if not hit:
        raise SimError(f"sglang-sim: disable_optimization={name!r} matches no setting of "
                       "this SGLang version (neither disable_<name> nor enable_<name>)")


# ----------------------------------------------------------------------------- response surface
# How each setting moves decode speed, TTFT and memory: data, in the config file's `surface` section
# (README "Response surface"), over these defaults. Sources per key in the README; in short:
# speculative acceptance from SGLang PR #3582 (NextN ~1.9 accept length at 1 step) and the seeds'
# Qwen3.6-27B (3 steps / 4 draft tokens: accept length 3.0-3.5, 50-57 tok/s; 1 step ~35-40 tok/s);
# the memory model is SGLang's own reserved-memory estimate (0.5.11 srt/server_args.py:1434-1480).
SURFACE_DEFAULTS = {
    "bandwidth_efficiency": 0.85,        # share of datasheet HBM bandwidth batch-1 decode reaches
    "efficiency": 0.47,                  # real-world overhead (all-reduce, KV, sampling), fitted to ct129
    "batch_cost_per_doubling": 0.05 / 3,  # batch 8 costs 1.05x batch 1 (H200 measurements)
    "prefill_tokens_per_pass": 100,      # TTFT: one pass per this many prompt tokens, plus one per chunk
    "no_cuda_graph_decode": 0.7,         # decode speed without decode CUDA graphs (or above their max bs)
    "speculative": {
        "accept_first": 0.9,             # P(draft token 1 accepted)
        "accept_decay": 0.9,             # each deeper draft position: conditional acceptance x this
        "topk_recall": 0.25,             # each doubling of topk recovers this share of a position's misses
        "draft_step_cost": 0.115,        # one draft step's time, as a share of a target forward
        "batch_fade_per_doubling": 0.0,  # the speculative gain (accept length - 1) / (1 + this * log2 batch)
    },
    "memory": {
        "gpu_memory_mib": None,          # per GPU; None: from GPU_MEMORY_MIB by gpu_model
        "activation_share": 0.4,         # the run-time memory needed, as a share of SGLang's own estimate
    },
    "effects": [],                       # [{setting, equals|above|below, multimodal?, decode?, ttft?}]
    "limits": [],                        # [{setting, equals|above|below, fails: cuda_oom|not_enough_memory|crash}]
}
RULE_KEYS = {"setting", "equals", "above", "below", "multimodal", "decode", "ttft", "fails", "message", "outputs"}
# An effect with `outputs: changed`: the setting changes what the model generates (a quantised KV cache,
# another dtype): greedy text differs from the 4th token on (tune.yml's output check must catch it).
OUTPUTS_CHANGED_FROM = 3
FAILURES = ("cuda_oom", "not_enough_memory", "crash")
# nvidia-smi's memory.total of the GPUs the lab declares (MiB); an unknown GPU: no memory checks.
GPU_MEMORY_MIB = {"A6000": 49140, "H100": 81559, "H200": 143771, "A100": 81920, "L40S": 46068}


def load_surface(raw) -> dict:
    """The config file's `surface` section over SURFACE_DEFAULTS; an unknown key or rule exits 1."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise SimError("sglang-sim: surface must be an object (README: Response surface)")
    out = json.loads(json.dumps(SURFACE_DEFAULTS))
    for key, value in raw.items():
        if key not in out:
            raise SimError(f"sglang-sim: surface.{key} is not a key of the surface "
                           f"({', '.join(SURFACE_DEFAULTS)})")
        if isinstance(out[key], dict):
            unknown = set(value or {}) - set(out[key])
            if unknown:
                raise SimError(f"sglang-sim: surface.{key} has unknown keys {sorted(unknown)} "
                               f"(known: {', '.join(out[key])})")
            out[key].update(value or {})
        elif isinstance(out[key], list):
            out[key] = [_checked_rule(key, rule) for rule in value or []]
        else:
            out[key] = value
    return out


def _checked_rule(section: str, rule) -> dict:
    if not isinstance(rule, dict) or "setting" not in rule or set(rule) - RULE_KEYS:
        raise SimError(f"sglang-sim: surface.{section}: {rule!r} is not a rule "
                       f"(keys: {', '.join(sorted(RULE_KEYS))}; `setting` required)")
    if "outputs" in rule and (section != "effects" or rule["outputs"] != "changed"):
        raise SimError(f"sglang-sim: surface.{section}: {rule!r}: outputs is an effect's key and its one value is "
                       "'changed'")
    if section == "limits" and rule.get("fails") not in FAILURES:
        raise SimError(f"sglang-sim: surface.limits: {rule!r} needs fails: one of {', '.join(FAILURES)}")
    return rule


def rule_applies(rule: dict, resolved: dict, multimodal: bool) -> bool:
    """A rule holds when its setting equals / is above / is below the value (all that it names), and,
    with `multimodal`, when the model is (or is not) one SGLang classifies as multimodal."""
    value = resolved.get(rule["setting"])
    if "multimodal" in rule and bool(rule["multimodal"]) != multimodal:
        return False
    if "equals" in rule and value != rule["equals"]:
        return False
    for key, holds in (("above", lambda v, x: v > x), ("below", lambda v, x: v < x)):
        if key in rule and not (isinstance(value, (int, float)) and holds(value, rule[key])):
            return False
    return True


def effect_factors(surface: dict, resolved: dict, multimodal: bool) -> tuple:
    """The product of the applying effects' (decode, ttft) factors."""
    decode = ttft = 1.0
    for rule in surface["effects"]:
        if rule_applies(rule, resolved, multimodal):
            decode *= float(rule.get("decode", 1.0))
            ttft *= float(rule.get("ttft", 1.0))
    return decode, ttft


def accept_length(steps, topk, draft, spec: dict = SURFACE_DEFAULTS["speculative"]) -> float:
    """1 + the expected accepted draft tokens of a chain `min(steps, draft - 1)` deep: position k is
    accepted with accept_first * accept_decay ** (k - 1) given the ones before it; topk > 1 recovers
    topk_recall of each position's misses per doubling (a tree's alternatives)."""
    if not steps:
        return 1.0
    depth = int(steps)
    if draft:
        depth = min(depth, max(int(draft) - 1, 0))
    miss_kept = (1 - float(spec["topk_recall"])) ** math.log2(max(int(topk or 1), 1))
    total, reach = 1.0, 1.0
    for k in range(1, depth + 1):
        p = float(spec["accept_first"]) * float(spec["accept_decay"]) ** (k - 1)
        reach *= 1 - (1 - p) * miss_kept
        total += reach
    return round(total, 4)


def faded_accept(accept: float, batch: int, spec: dict) -> float:
    """The accept length at a batch: the gain over 1 divided by 1 + batch_fade_per_doubling * log2(batch)."""
    return 1 + (accept - 1) / (1 + float(spec["batch_fade_per_doubling"]) * math.log2(max(batch, 1)))


# ----------------------------------------------------------------------------- memory and start-up failures
# Settings that do not fit fail where SGLang fails: in the scheduler, after the weights load. The real
# scheduler logs "Scheduler hit an exception: <traceback>" and sends SIGQUIT to the launcher (0.5.11
# srt/managers/scheduler.py:3936-3939, 0.5.23 :6370-6373), whose handler logs "Received sigquit from a
# child process. It usually means the child failed." and kills its own process tree, itself with SIGKILL
# (0.5.11 srt/entrypoints/engine.py:1185-1191 + srt/utils/common.py kill_process_tree `itself.kill()`;
# 0.5.23 engine.py:1976-1982, common.py:2547-2549): the unit dies of signal 9.
# `raise RuntimeError(msg)` of MemoryPoolConfig.__post_init__, srt/model_executor/pool_configurator.py, by
# release (the nearest at or below is used).
NOT_ENOUGH_MEMORY_AT = {(0, 5, 11): 44, (0, 5, 13): 56, (0, 5, 16): 67, (0, 5, 18): 77, (0, 5, 20): 95,
                        (0, 5, 23): 99}
# The decode CUDA graph runner's `raise Exception(f"Capture cuda graph failed: ...")` and its hint
# CUDA_GRAPH_CAPTURE_FAILED_MSG (0.5.11 cuda_graph_runner.py:1431-1438; from 0.5.16
# runner_backend_utils/__init__.py:14-21, naming --cuda-graph-max-bs-decode).
GRAPH_CAPTURE_AT = {(0, 5, 11): ("srt/model_executor/cuda_graph_runner.py", 717),
                    (0, 5, 13): ("srt/model_executor/cuda_graph_runner.py", 629),
                    (0, 5, 16): ("srt/model_executor/runner/decode_cuda_graph_runner.py", 410),
                    (0, 5, 18): ("srt/model_executor/runner/decode_cuda_graph_runner.py", 464),
                    (0, 5, 20): ("srt/model_executor/runner/decode_cuda_graph_runner.py", 467),
                    (0, 5, 23): ("srt/model_executor/runner/decode_cuda_graph_runner.py", 603)}
GRAPH_HINT_SPLIT_SINCE = (0, 5, 16)
GRAPH_HINT_OLD = ("Possible solutions:\n"
                  "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                  "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                  "3. disable torch compile by not using --enable-torch-compile\n"
                  "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
                  "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n")
GRAPH_HINT_NEW = ("Possible solutions:\n"
                  "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                  "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                  "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
                  "(Not recommended. Huge performance loss)\n"
                  "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n")


def gpu_memory_mib(hardware: dict, surface: dict):
    given = surface["memory"].get("gpu_memory_mib")
    if given:
        return float(given)
    name = str(hardware.get("gpu_model") or "")
    return next((float(mib) for key, mib in GPU_MEMORY_MIB.items() if key in name), None)


def graph_max_bs(resolved: dict):
    """The decode CUDA graphs' largest batch as given: --cuda-graph-max-bs, --cuda-graph-max-bs-decode (0.5.23)."""
    return resolved.get("cuda_graph_max_bs") or resolved.get("cuda_graph_max_bs_decode")


def graph_and_chunk_defaults(resolved: dict, gpu_mib: float) -> tuple:
    """cuda_graph_max_bs and chunked_prefill_size as given, else SGLang's defaults by GPU memory (0.5.11
    srt/server_args.py:1318-1381; later releases keep the table)."""
    tp = int(resolved.get("tp_size") or 1)
    table = ((20, 2048, 8, 8), (35, 2048, 24, 80), (60, 4096, 32, 160), (90, 8192, 256, 512),
             (160, 8192, 256, 512), (float("inf"), 16384, 512, 512))
    chunk, bs_small, bs_large = next((c, s, bl) for gb, c, s, bl in table if gpu_mib < gb * 1024)
    max_bs = graph_max_bs(resolved) or (bs_small if tp < 4 else bs_large)
    return int(max_bs), int(resolved.get("chunked_prefill_size") or chunk)


def runtime_memory_mib(resolved: dict, gpu_mib: float, surface: dict) -> float:
    """The memory outside the static pool a start needs: SGLang's own estimate of it (reserved_mem, 0.5.11
    srt/server_args.py:1434-1476: 512 + 1.5 per chunked-prefill token + 2 per graph batch size + 1024 per 8
    ranks, 4096 more for an EAGLE draft) times the surface's activation_share (the estimate is the safety
    margin of SGLang's default mem_fraction_static, not the need)."""
    max_bs, chunk = graph_and_chunk_defaults(resolved, gpu_mib)
    tp, pp = int(resolved.get("tp_size") or 1), int(resolved.get("pp_size") or 1)
    reserved = 512 + max(chunk, 2048) * 1.5 + max_bs * 2 + tp * pp / 8 * 1024
    if resolved.get("speculative_algorithm") not in (None, "NGRAM"):
        reserved += 4 * 1024
    return reserved * float(surface["memory"]["activation_share"])


def at_release(table: dict, v: tuple):
    """The entry of the nearest release at or below v (the oldest for older ones)."""
    return table[max((k for k in table if k <= v), default=min(table))]


def scheduler_failure(kind: str, version: str, resolved: dict, detail: str = "") -> str:
    """The service log's tail when the scheduler fails at start-up with `kind` (FAILURES)."""
    v = version_tuple(version)
    mfs = resolved.get("mem_fraction_static")
    if kind == "not_enough_memory":
        line = at_release(NOT_ENOUGH_MEMORY_AT, v)
        tail = (f'  File "sglang/srt/model_executor/pool_configurator.py", line {line}, in __post_init__\n'
                "    raise RuntimeError(msg)\n"
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
                f"Current value: mem_fraction_static={mfs}")
    elif kind == "cuda_oom":
        runner = at_release(GRAPH_CAPTURE_AT, v)
        hint = GRAPH_HINT_NEW if v >= GRAPH_HINT_SPLIT_SINCE else GRAPH_HINT_OLD
        # torch's allocator message (c10/cuda/CUDACachingAllocator.cpp), shortened to its first sentence
        tail = (f'  File "sglang/{runner[0]}", line {runner[1]}, in __init__\n'
                "    raise Exception(\n"
                f"Exception: Capture cuda graph failed: CUDA out of memory. {detail}\n{hint}")
    else:
        tail = f"RuntimeError: {detail or 'scheduler crashed (sglang-sim surface limit)'}"
    return ("Scheduler hit an exception: Traceback (most recent call last):\n" + tail + "\n"
            "Received sigquit from a child process. It usually means the child failed.")


def startup_failure(resolved: dict, hardware: dict, weight_bytes: int, surface: dict, multimodal: bool,
                    version: str) -> str | None:
    """The scheduler's failure for these settings, or None: a `limits` rule that holds, else the memory
    model: the static pool (mem_fraction_static of a GPU) must hold the weights' share and some KV cache,
    the rest the run-time memory (runtime_memory_mib)."""
    for rule in surface["limits"]:
        if rule_applies(rule, resolved, multimodal):
            detail = rule.get("message") or f"{rule['setting']}={resolved.get(rule['setting'])!r}"
            if rule["fails"] == "cuda_oom":
                detail = rule.get("message") or "Tried to allocate 2.00 GiB."
            return scheduler_failure(rule["fails"], version, resolved, detail)
    gpu_mib = gpu_memory_mib(hardware, surface)
    mfs = resolved.get("mem_fraction_static")
    if not gpu_mib or not isinstance(mfs, (int, float)):
        return None
    weights_mib = weight_bytes / 2**20 / max(int(resolved.get("tp_size") or 1), 1)
    if mfs * gpu_mib <= weights_mib:
        return scheduler_failure("not_enough_memory", version, resolved)
    need, free = runtime_memory_mib(resolved, gpu_mib, surface), (1 - mfs) * gpu_mib
    if need > free:
        gib = 2**10
        return scheduler_failure("cuda_oom", version, resolved,
                                 f"Tried to allocate {(need - free) / gib + 0.25:.2f} GiB. GPU 0 has a total "
                                 f"capacity of {gpu_mib / gib:.2f} GiB of which {free / gib:.2f} GiB is free.")
    return None


# ----------------------------------------------------------------------------- engine


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.sum += v
        self.count += 1
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1


class Engine:
    """Paces token emission by the throughput model and keeps the counters /metrics shows."""

    def __init__(self, resolved, hardware, weight_bytes, cfg, model_config, version, launch):
        self.resolved = resolved
        self.hardware = hardware
        self.weight_bytes = weight_bytes
        self.cfg = cfg
        self.model_config = model_config
        self.version = version
        self.launch_command = launch
        self.start = time.monotonic()
        self.load_s = DEFAULT_LOAD_S + float(cfg.get("slow_start_s", 0) or 0)
        self.never_healthy = bool(cfg.get("never_healthy"))
        self.crash_after = cfg.get("crash_after_requests")
        self.lock = threading.Lock()
        self.running: dict = {}
        self.requests_done = 0
        self.prompt_tokens = 0
        self.gen_tokens = 0
        self.spec_tokens = 0
        self.spec_verify_ct = 0
        self.last_gen_throughput = 0.0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        r, surface = resolved, cfg.get("surface") or load_surface(None)
        self.surface, self.spec = surface, surface["speculative"]
        spec_on = bool(r.get("speculative_algorithm"))
        self.steps = int(r.get("speculative_num_steps") or 0) if spec_on else 0
        self.accept_len = accept_length(self.steps, r.get("speculative_eagle_topk"),
                                        r.get("speculative_num_draft_tokens"), self.spec)
        tp = int(r.get("tp_size") or 1)
        eff_bw = float(surface["bandwidth_efficiency"]) * float(hardware["hbm_bandwidth_gbs"]) * 1e9
        self.passes_per_s = eff_bw * tp / weight_bytes * float(surface["efficiency"])
        multimodal = (model_config.get("architectures") or [""])[0] in MULTIMODAL_ARCHS
        decode, self.ttft_factor = effect_factors(surface, r, multimodal)
        self.outputs_changed = any(rule.get("outputs") == "changed" and rule_applies(rule, r, multimodal)
                                   for rule in surface["effects"])
        self.speed = (decode * float(cfg.get("degrade_factor", 1.0) or 1.0)
                      * (cfg.get("slow_release") or {}).get(version, 1.0))
        self.graphs_off = bool(r.get("disable_cuda_graph"))
        self.graph_max_bs = graph_max_bs(r)     # unset: no limit (SGLang's default not modelled here)
        self.chunk = int(r.get("chunked_prefill_size") or 0)
        self.slots = threading.BoundedSemaphore(int(r["max_running_requests"])) \
            if r.get("max_running_requests") else None
        self.single_stream = self.rate(1)
        self.capacity = int(r.get("max_total_tokens") or DEFAULT_TOKEN_CAPACITY)
        # noise_cv: each client request decodes at this speed times exp(N(0, noise_cv)), drawn in request
        # order from a generator seeded with noise_seed (0 by default: the lab's tests stay exact).
        self.noise_cv = float(cfg.get("noise_cv", 0) or 0)
        self.noise = random.Random(int(cfg.get("noise_seed", 0) or 0))

    def context_len(self) -> int:
        """The context length the server serves: --context-length, else the model's."""
        return int(self.resolved.get("context_length") or self.model_config.get("max_position_embeddings")
                   or DEFAULT_TOKEN_CAPACITY)

    @property
    def loaded(self) -> bool:
        return not self.never_healthy and time.monotonic() - self.start >= self.load_s

    def accept_at(self, batch: int) -> float:
        return faded_accept(self.accept_len, batch, self.spec) if self.steps else 1.0

    def rate(self, batch: int) -> float:
        """Per-stream decode tokens/s at a batch: the surface's speculative gain over its draft cost, the
        batch's cost, the effects; decode CUDA graphs off (or the batch above their max) costs more."""
        batch = max(batch, 1)
        rate = (self.passes_per_s * self.accept_at(batch)
                / (1 + float(self.spec["draft_step_cost"]) * self.steps)
                / (1 + float(self.surface["batch_cost_per_doubling"]) * math.log2(batch)) * self.speed)
        if self.graphs_off or (self.graph_max_bs and batch > int(self.graph_max_bs)):
            rate *= float(self.surface["no_cuda_graph_decode"])
        return rate

    def first_token_s(self, prompt_tokens: int) -> float:
        """Seconds to the first token: a pass per prefill chunk plus one per prefill_tokens_per_pass tokens."""
        chunks = math.ceil(prompt_tokens / self.chunk) if self.chunk > 0 else 1
        per_pass = float(self.surface["prefill_tokens_per_pass"])
        return (max(chunks, 1) + prompt_tokens / per_pass) / self.passes_per_s * self.ttft_factor

    def generate(self, prompt_tokens: int, max_new: int, emit, count=True) -> dict:
        """Emit `max_new` tokens through `emit(i, token_text)` at the modelled pace."""
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        if self.slots:   # --max-running-requests: the rest wait (their TTFT includes it)
            self.slots.acquire()
        with self.lock:
            self.running[rid] = prompt_tokens
            speed = math.exp(self.noise.gauss(0.0, self.noise_cv)) if self.noise_cv and count else 1.0
        verifies = 0.0   # target forwards: a token costs 1 / the accept length at its batch
        try:
            first = time.monotonic() + self.first_token_s(prompt_tokens)
            due, prev = first, None
            for i in range(max_new):
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                now = time.monotonic()
                emit(i, chr(ord("a" if self.outputs_changed and i >= OUTPUTS_CHANGED_FROM else "A") + i % 26))
                with self.lock:
                    self.running[rid] += 1
                    batch = len(self.running)
                    if count:
                        self.gen_tokens += 1
                        if prev is None:
                            self.ttft.observe(now - t0)
                        else:
                            self.itl.observe(now - prev)
                        self.last_gen_throughput = batch * self.rate(batch)
                prev = now
                verifies += 1.0 / self.accept_at(batch)
                due += 1.0 / (self.rate(batch) * speed)
        finally:
            with self.lock:
                self.running.pop(rid, None)
            if self.slots:
                self.slots.release()
        e2e = time.monotonic() - t0
        verify = math.ceil(round(verifies, 6)) if self.steps else 0
        if count:
            with self.lock:
                self.prompt_tokens += prompt_tokens
                self.e2e.observe(e2e)
                if self.steps:
                    self.spec_tokens += max_new
                    self.spec_verify_ct += verify
        return {"id": rid, "e2e_latency": e2e, "spec_verify_ct": verify}

    def finished_request(self) -> None:
        """Count a client generation request; `crash_after_requests` exits the process."""
        with self.lock:
            self.requests_done += 1
            crash = self.crash_after and self.requests_done >= int(self.crash_after)
        if crash:
            log(f"sglang-sim: simulated crash after {self.requests_done} generation requests "
                "(crash_after_requests)")
            os._exit(1)

    def avg_accept(self) -> float:
        return self.spec_tokens / self.spec_verify_ct if self.spec_verify_ct else 0.0

    def server_info(self) -> dict:
        state = {"last_gen_throughput": self.last_gen_throughput,
                 "memory_usage": {"weight": round(self.weight_bytes / 2**30 / max(
                     int(self.resolved.get("tp_size") or 1), 1), 2),
                     "token_capacity": self.capacity},
                 "effective_max_running_requests_per_dp": self.resolved.get(
                     "max_running_requests")}
        if self.steps and self.spec_verify_ct:
            state["avg_spec_accept_length"] = self.avg_accept()
        info = dict(self.resolved)
        if self.launch_command is not None:
            info["launch_command"] = self.launch_command
        if version_tuple(self.version) >= SCHEDULER_INFO_SINCE:
            info.update({"status": "ready", "max_total_num_tokens": self.capacity,
                         "max_req_input_len": min(self.context_len() - 1, self.capacity - 1) - 5,
                         "startup_time": {"load_weight": round(self.load_s, 3)},
                         "hicache_object_layout": {"backend": None, "enabled": False},
                         "kv_events": None, "frontend": "python"})
        return {**info, "internal_states": [state], "version": self.version}

    def metrics(self) -> str:
        name = self.resolved.get("served_model_name") or self.resolved.get("model_path")
        # The real server's label sets (0.5.23 srt/observability/metrics_collector.py): the scheduler's
        # gauges {model_name, engine_type, tp_rank, pp_rank, moe_ep_rank} (:1382-1388), the tokenizer's
        # counters and histograms {model_name, engine_type} plus is_streaming on all but the inter-token
        # latency (:1858-2063; "true"/"false", :2107). engine_type is "unified" outside a PD pair
        # (srt/disaggregation/utils.py:156-161). The simulator counts every request as streamed.
        engine = {"prefill": "prefill", "decode": "decode"}.get(str(self.resolved.get("disaggregation_mode")),
                                                                "unified")
        sched = f'model_name="{name}",engine_type="{engine}",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        tok = f'model_name="{name}",engine_type="{engine}"'
        lab = f'{tok},is_streaming="true"'
        with self.lock:
            used = sum(self.running.values())
            lines = []

            def gauge(metric, value, helptext):
                lines.extend([f"# HELP sglang:{metric} {helptext}", f"# TYPE sglang:{metric} gauge",
                              f"sglang:{metric}{{{sched}}} {value}"])

            # prometheus_client's text format names a counter's family with `_total` in its HELP and
            # TYPE lines too (the real 0.5.23 on lab host cpu1: `# TYPE sglang:prompt_tokens_total counter`)
            def counter(metric, value, helptext):
                lines.extend([f"# HELP sglang:{metric}_total {helptext}",
                              f"# TYPE sglang:{metric}_total counter",
                              f"sglang:{metric}_total{{{lab}}} {float(value)}"])

            def hist(metric, h, helptext, labels=lab):
                lines.extend([f"# HELP sglang:{metric} {helptext}",
                              f"# TYPE sglang:{metric} histogram"])
                for b, c in zip(h.buckets, h.counts):
                    lines.append(f'sglang:{metric}_bucket{{{labels},le="{float(b)}"}} {float(c)}')
                lines.append(f'sglang:{metric}_bucket{{{labels},le="+Inf"}} {float(h.count)}')
                lines.append(f"sglang:{metric}_sum{{{labels}}} {h.sum}")
                lines.append(f"sglang:{metric}_count{{{labels}}} {float(h.count)}")

            gauge("num_running_reqs", len(self.running), "The number of running requests.")
            gauge("num_queue_reqs", 0, "The number of requests in the waiting queue.")
            gauge("token_usage", round(used / self.capacity, 6), "The token usage.")
            gauge("gen_throughput", self.last_gen_throughput, "The generation throughput (token/s).")
            gauge("spec_accept_length", self.avg_accept(), "The average acceptance length of "
                  "speculative decoding.")
            counter("prompt_tokens", self.prompt_tokens, "Number of prefill tokens processed.")
            counter("generation_tokens", self.gen_tokens, "Number of generation tokens processed.")
            hist("time_to_first_token_seconds", self.ttft, "Histogram of time to first token in "
                 "seconds.")
            hist("inter_token_latency_seconds", self.itl, "Histogram of inter-token latency in "
                 "seconds.", tok)
            hist("e2e_request_latency_seconds", self.e2e, "Histogram of End-to-end request "
                 "latency in seconds")
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- HTTP


def count_words(text) -> int:
    if isinstance(text, list):
        if text and all(isinstance(t, int) for t in text):
            return len(text)
        return sum(count_words(t) for t in text)
    if isinstance(text, dict):
        return count_words(text.get("text", ""))
    return len(str(text or "").split())


class BadRequest(Exception):
    """A request the release refuses with 400, in one of its three bodies (``kind``): "openai" (the
    OpenAI endpoints' ErrorResponse, type BadRequestError), "generate" (/generate's
    ``{"error": {"message"}}``, 0.5.23 srt/entrypoints/http_server.py:2246-2250 `_create_error_response`,
    0.5.3 :1219) or "validation" (FastAPI's request validation turned into 400, type "Bad Request",
    0.5.23 http_server.py:635-690 `validation_exception_handler`). Checked against the real 0.5.23 on
    lab host cpu1: lab/real_sglang/probe.py's bad requests, tests/fixtures/real_sglang/0.5.23-cpu-probes.json."""

    def __init__(self, message, kind="openai"):
        super().__init__(message)
        self.kind = kind


# The release's SamplingParams.verify (0.5.23 srt/sampling/sampling_params.py:252-292; the same checks
# since 0.4.10.post2 :95): the first of its checks a request fails, with its message. 0.5.14 reworded
# the temperature check ("non-negative finite number"; 0.5.13.post1 and older: "non-negative").
FINITE_TEMPERATURE_SINCE = (0, 5, 14)


def sampling_error(version, temperature=None, top_p=None, max_new_tokens=None):
    """The message SamplingParams.verify raises for these values in `version`, or None."""
    if temperature is not None:
        t = float(temperature)
        if version_tuple(version) >= FINITE_TEMPERATURE_SINCE:
            if not math.isfinite(t) or t < 0.0:
                return f"temperature must be a non-negative finite number, got {t}."
        elif t < 0.0:
            return f"temperature must be non-negative, got {t}."
    if top_p is not None and not 0.0 < float(top_p) <= 1.0:
        return f"top_p must be in (0, 1], got {float(top_p)}."
    if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool) and max_new_tokens < 0:
        return f"max_new_tokens must be at least 0, got {max_new_tokens}."
    return None


def missing_field(body, field):
    """FastAPI's validation message for a required field the body lacks (pydantic's "missing"): its first
    part (the real one goes on with the endpoint's file and line)."""
    return f"1 validation error:\n  {{'type': 'missing', 'loc': ('body', {field!r}), 'msg': 'Field required', 'input': {body!r}}}"


def not_an_integer(field, value):
    """FastAPI's validation message for an integer field given a string that is not one (pydantic's "int_parsing")."""
    return (f"1 validation error:\n  {{'type': 'int_parsing', 'loc': ('body', {field!r}), 'msg': 'Input should be a "
            f"valid integer, unable to parse string as an integer', 'input': {value!r}}}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    engine: Engine = None

    def log_message(self, fmt, *args):  # access log like uvicorn's, to stderr
        log(f"{self.client_address[0]} - {fmt % args}")

    # -- plumbing
    def _send(self, code: int, body: bytes, ctype="application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, obj) -> None:
        self._send(code, json.dumps(obj).encode())

    def _error(self, code: int, message: str) -> None:
        self._json(code, {"object": "error", "message": message, "type": "BadRequestError",
                          "param": None, "code": code})

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return {}
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"Invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object")
        return body

    def _stream_start(self) -> None:
        if getattr(self, "_streaming", False):  # a PD decode opened it already (pd_admit)
            return
        self._streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _sse(self, obj) -> None:
        data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stream_end(self) -> None:
        self._sse("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _authorised(self, path: str) -> bool:
        key = self.engine.resolved.get("api_key")
        if not key or path.startswith(("/health", "/metrics")):
            return True
        parts = (self.headers.get("Authorization") or "").split(" ", 1)
        return len(parts) == 2 and parts[0].lower() == "bearer" and parts[1] == key

    # -- dispatch
    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def _dispatch(self):
        path = self.path.split("?", 1)[0]
        self._streaming = False
        try:
            body = self._body() if self.command in ("POST", "PUT") else {}
            if not self._authorised(path):
                return self._json(401, {"error": "Unauthorized"})
            route = ROUTES.get(path)
            if route is None:
                return self._json(404, {"detail": "Not Found"})
            method, fn = route
            if method == "POST" and self.command == "GET":
                return self._json(405, {"detail": "Method Not Allowed"})
            fn(self, body)
        except BadRequest as exc:
            if exc.kind == "generate":
                self._json(400, {"error": {"message": str(exc)}})
            elif exc.kind == "validation":
                self._json(400, {"object": "error", "message": str(exc), "type": "Bad Request", "param": None, "code": 400})
            else:
                self._error(400, str(exc))
        except (BrokenPipeError, ConnectionResetError):
            pass

    # -- endpoints
    def health(self, _body):
        eng = self.engine
        if not eng.loaded:
            return self._send(503, b"", "text/plain")
        eng.generate(1, 1, lambda i, t: None, count=False)
        self._send(200, b"", "text/plain")

    def get_server_info(self, _body):
        self._json(200, self.engine.server_info())

    def get_model_info(self, _body):
        r, mc = self.engine.resolved, self.engine.model_config
        self._json(200, {
            "model_path": r.get("model_path"), "tokenizer_path": r.get("tokenizer_path"),
            "is_generation": True, "preferred_sampling_params": r.get("preferred_sampling_params"),
            "weight_version": r.get("weight_version", "default"),
            "has_image_understanding": "vision_config" in mc,
            "has_audio_understanding": "audio_config" in mc,
            "model_type": mc.get("model_type"), "architectures": mc.get("architectures")})

    def models(self, _body):
        r = self.engine.resolved
        card = {"id": r.get("served_model_name") or r.get("model_path"), "object": "model",
                "created": int(time.time()), "owned_by": "sglang", "root": r.get("model_path"),
                "max_model_len": self.engine.context_len()}
        if version_tuple(self.engine.version) >= OPENAI_SHAPES_SINCE:
            card["parent"] = None
        self._json(200, {"object": "list", "data": [card]})

    def metrics(self, _body):
        if not self.engine.resolved.get("enable_metrics"):
            return self._json(404, {"detail": "Not Found"})
        self._send(200, self.engine.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _require_loaded(self) -> bool:
        if self.engine.loaded:
            return True
        self._error(503, "The server is not ready yet (sglang-sim: still loading).")
        return False

    @staticmethod
    def _int(body, *keys, default):
        for k in keys:
            v = body.get(k)
            if v is not None:
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise BadRequest(f"{k} must be a non-negative integer, got {v!r}")
                return v
        return default

    def generate(self, body):
        if not self._require_loaded():
            return
        if body.get("input_ids") is not None:
            prompt = len(body["input_ids"])
        elif body.get("text") is not None:
            prompt = max(count_words(body["text"]), 1)
        else:   # 0.5.23 srt/managers/io_struct.py:454 (the same since 0.4.10.post2 :165)
            raise BadRequest("Either text, input_ids or input_embeds should be provided.", kind="generate")
        sp = body.get("sampling_params") or {}
        error = sampling_error(self.engine.version, sp.get("temperature"), sp.get("top_p"), sp.get("max_new_tokens"))
        if error:
            raise BadRequest(error, kind="generate")
        n = self._int(sp, "max_new_tokens", default=128)
        n = pd_admit(self, body, n)  # PD disaggregation section: refuse, or wait for the KV
        if n is None:
            return
        eng, text = self.engine, []

        def meta(done, res=None):
            m = {"id": res["id"] if res else "", "finish_reason": None, "prompt_tokens": prompt,
                 "completion_tokens": done, "cached_tokens": 0}
            if res:
                m["finish_reason"] = {"type": "length", "length": n}
                m["e2e_latency"] = res["e2e_latency"]
                if eng.steps:
                    m["spec_verify_ct"] = res["spec_verify_ct"]
                    m["spec_accept_length"] = (n / res["spec_verify_ct"]
                                               if res["spec_verify_ct"] else 0.0)
            return m

        if body.get("stream"):
            self._stream_start()

            def emit(i, tok):
                text.append(tok)
                self._sse({"text": "".join(text), "output_ids": [65 + (j % 26) for j in range(i + 1)],
                           "meta_info": meta(i + 1)})
            res = eng.generate(prompt, n, emit)
            self._sse({"text": "".join(text), "output_ids": [65 + (j % 26) for j in range(n)],
                       "meta_info": meta(n, res)})
            self._stream_end()
        else:
            res = eng.generate(prompt, n, lambda i, t: text.append(t))
            self._json(200, {"text": "".join(text), "output_ids": [65 + (j % 26) for j in range(n)],
                             "meta_info": meta(n, res)})
        pd_finished(self, body, prompt, n)
        eng.finished_request()

    def _openai(self, body, chat: bool):
        if not self._require_loaded():
            return
        eng = self.engine
        required = "messages" if chat else "prompt"
        if required not in body:
            raise BadRequest(missing_field(body, required), kind="validation")
        for field in ("max_tokens", "max_completion_tokens"):
            if isinstance(body.get(field), str) and not body[field].strip().lstrip("+-").isdigit():
                raise BadRequest(not_an_integer(field, body[field]), kind="validation")
        error = sampling_error(eng.version, body.get("temperature"), body.get("top_p"))
        if error:
            raise BadRequest(error)
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise BadRequest("messages must be a non-empty list")
            prompt = max(sum(count_words(m.get("content")) for m in msgs if isinstance(m, dict)), 1)
            n = self._int(body, "max_completion_tokens", "max_tokens", default=128)
        else:
            prompt = max(count_words(body["prompt"]), 1)
            n = self._int(body, "max_tokens", default=16)
        shapes = version_tuple(eng.version) >= OPENAI_SHAPES_SINCE
        if shapes and prompt + n > eng.context_len():
            return _pd_abort(self, body, 400, (
                "Requested token count exceeds the model's maximum context length of "
                f"{eng.context_len()} tokens. You requested a total of {prompt + n} tokens: {prompt} tokens from "
                f"the input messages and {n} tokens for the completion. Please reduce the number of tokens in "
                "the input messages or the completion to fit within the limit."), openai=True)
        n = pd_admit(self, body, n, openai=True)  # PD disaggregation section: refuse, or wait for the KV
        if n is None:
            return
        model = body.get("model") or eng.resolved.get("served_model_name")
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if shapes:
            usage["reasoning_tokens"] = 0
        details = {"prompt_tokens_details": None, "completion_tokens_details": None} if shapes else {}
        metadata = {"metadata": {"weight_version": "default", "weight_versions": [
            {"version": "default", "start": 0, "end": n}]}} if shapes else {}
        if body.get("stream"):
            chunk_obj = "chat.completion.chunk" if chat else "text_completion"
            self._stream_start()

            def chunk(choices, extra=None):
                d = {"id": cid, "object": chunk_obj, "created": created, "model": model,
                     "choices": choices}
                if shapes and not chat:
                    d["usage"] = None
                d.update(extra or {})
                self._sse(d)

            def emit(i, tok):
                if chat:
                    delta = {"role": "assistant", "content": tok} if i == 0 else {"content": tok}
                    c = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
                else:
                    c = {"index": 0, "text": tok, "logprobs": None, "finish_reason": None}
                if shapes:
                    c["matched_stop"] = None
                if i == n - 1:
                    c["finish_reason"], c["matched_stop"] = "length", None
                chunk([c])
            eng.generate(prompt, n, emit)
            if n == 0:
                key = "delta" if chat else "text"
                chunk([{"index": 0, key: {} if chat else "", "logprobs": None,
                        "finish_reason": "length"}])
            if (body.get("stream_options") or {}).get("include_usage"):
                chunk([], {"usage": {**usage, **(details if chat else {})}})
            self._stream_end()
        else:
            text = []
            eng.generate(prompt, n, lambda i, t: text.append(t))
            out = "".join(text)
            choice = ({"index": 0, "message": {"role": "assistant", "content": out},
                       "logprobs": None, "finish_reason": "length", "matched_stop": None}
                      if chat else {"index": 0, "text": out, "logprobs": None,
                                    "finish_reason": "length", "matched_stop": None})
            self._json(200, {"id": cid, "object": obj, "created": created, "model": model,
                             "choices": [choice], "usage": {**usage, **details}, **metadata})
        pd_finished(self, body, prompt, n)
        eng.finished_request()

    def completions(self, body):
        self._openai(body, chat=False)

    def chat_completions(self, body):
        self._openai(body, chat=True)

ROUTES = {
    "/health": ("GET", Handler.health),
    "/health_generate": ("GET", Handler.health),
    "/get_server_info": ("GET", Handler.get_server_info),
    "/server_info": ("GET", Handler.get_server_info),
    "/get_model_info": ("GET", Handler.get_model_info),
    "/model_info": ("GET", Handler.get_model_info),
    "/v1/models": ("GET", Handler.models),
    "/metrics": ("GET", Handler.metrics),
    "/generate": ("POST", Handler.generate),
    "/v1/completions": ("POST", Handler.completions),
    "/v1/chat/completions": ("POST", Handler.chat_completions),
}


# ----------------------------------------------------------------------------- loads (router drain)
# What a router, or a rolling deploy draining a worker behind one, reads of a worker's in-flight
# requests. The real numbers come from the scheduler; here they are the requests the engine is
# generating (running) and none waiting (the simulator queues nothing).
V1_LOADS_SINCE = (0, 5, 9)       # srt/entrypoints/v1_loads.py, first in 0.5.9 (:130 @router.get("/v1/loads"))
GET_LOAD_UNTIL = (0, 5, 20)      # http_server.py "/get_load": 0.5.11 :648 ... 0.5.20; gone in 0.5.21


def _running_requests(engine) -> int:
    with engine.lock:
        return len(engine.running)


def _load_entry(engine) -> dict:
    """One DP rank's core load (0.5.11 srt/managers/io_struct.py:2010 GetLoadsReqOutput: dp_rank,
    num_running_reqs, num_waiting_reqs, num_used_tokens, num_total_tokens, max_total_num_tokens)."""
    with engine.lock:
        running, used = len(engine.running), sum(engine.running.values())
    return {"dp_rank": 0, "num_running_reqs": running, "num_waiting_reqs": 0, "num_used_tokens": used,
            "num_total_tokens": used, "max_total_num_tokens": engine.capacity}


def v1_loads(handler, _body):
    """GET /v1/loads (0.5.22 srt/entrypoints/v1_loads.py:96-150): {timestamp, version, loads: [...]}."""
    engine = handler.engine
    if version_tuple(engine.version) < V1_LOADS_SINCE:
        return handler._json(404, {"detail": "Not Found"})
    handler._json(200, {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                        "version": engine.version, "loads": [_load_entry(engine)]})


def get_load(handler, _body):
    """GET /get_load, the legacy shape (0.5.11 srt/entrypoints/http_server.py:648-672): a list of
    {dp_rank, num_reqs (running + waiting), num_waiting_reqs, num_tokens, num_pending_tokens, ts_tic}."""
    engine = handler.engine
    if version_tuple(engine.version) > GET_LOAD_UNTIL:
        return handler._json(404, {"detail": "Not Found"})
    e = _load_entry(engine)
    handler._json(200, [{"dp_rank": 0, "num_reqs": e["num_running_reqs"] + e["num_waiting_reqs"],
                         "num_waiting_reqs": e["num_waiting_reqs"], "num_tokens": e["num_total_tokens"],
                         "num_pending_tokens": e["num_total_tokens"] - e["num_used_tokens"],
                         "ts_tic": time.perf_counter()}])


ROUTES.update({"/v1/loads": ("GET", v1_loads), "/get_load": ("GET", get_load)})


# ---- Multi-node servers (--nnodes, --node-rank, --dist-init-addr) ----------------------------
# Real SGLang: every node's TP ranks join torch.distributed at tcp://<dist_init_addr> (0.5.11
# srt/model_executor/model_runner.py:1136-1138 `na.to_tcp()`, :1173 `timeout=dist_timeout`), so
# no node's schedulers get ready before all nodes joined. Rank 0 then serves the API; a node of
# rank >= 1 runs no tokenizer or HTTP API, only a dummy health server on the same --host/--port
# (/ping, /health, /health_generate answer 200, /metrics with --enable-metrics) and waits for
# its schedulers (0.5.11 srt/entrypoints/engine.py:712-730, 0.5.23 :1234-1283;
# launch_dummy_health_check_server: 0.5.11 srt/utils/common.py:2524, 0.5.23 :3624; 0.5.23
# srt/entrypoints/http_server.py:3163 returns before the HTTP server on rank >= 1).
# The sim stands in for torch.distributed's TCPStore rendezvous with a plain TCP one: rank 0
# listens on dist_init_addr's port, the others connect (retrying) and say their rank; when all
# nnodes have joined rank 0 answers each, stops listening and goes on. A peer's connection that
# closes later is a lost node: the sim exits 1 (real: NCCL errors or its watchdog end the
# server, later and less politely). A rendezvous that does not complete fails like torch's
# store: after --dist-timeout, else torch's default 30 min, or the lab's short
# `rendezvous_timeout_s` knob; the messages follow torch's DistStoreError / DistNetworkError.
TORCH_DEFAULT_PG_TIMEOUT_S = 1800


def multinode(resolved: dict) -> tuple:
    """(nnodes, node_rank, (host, port) of dist_init_addr or None)."""
    nnodes = int(resolved.get("nnodes") or 1)
    rank = int(resolved.get("node_rank") or 0)
    addr = resolved.get("dist_init_addr")
    if nnodes <= 1:
        return 1, 0, None
    if not addr:
        raise SimError("ValueError: --dist-init-addr is required when --nnodes > 1")
    host, _, port = str(addr).rpartition(":")
    return nnodes, rank, (host.strip("[]"), int(port))


def rendezvous_timeout(resolved: dict, sim_cfg: dict) -> float:
    if sim_cfg.get("rendezvous_timeout_s") is not None:
        return float(sim_cfg["rendezvous_timeout_s"])
    return float(resolved.get("dist_timeout") or TORCH_DEFAULT_PG_TIMEOUT_S)


def rendezvous(nnodes: int, rank: int, addr: tuple, timeout: float) -> list:
    """Join the nodes (see above); returns the open connections to the peers (rank 0: every
    other node's; rank >= 1: rank 0's). Raises SimError on timeout."""
    import socket
    deadline = time.monotonic() + timeout
    if rank == 0:
        listener = socket.create_server(("", addr[1]), reuse_port=False)
        listener.settimeout(0.5)
        peers = {}
        log(f"sglang-sim rendezvous: node 0 of {nnodes} waiting on port {addr[1]}")
        try:
            while len(peers) < nnodes - 1:
                if time.monotonic() > deadline:
                    raise SimError(f"torch.distributed.DistStoreError: Timed out after {int(timeout)} seconds waiting "
                                   f"for clients. {len(peers) + 1}/{nnodes} clients joined.")
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                conn.settimeout(5)
                try:
                    words = conn.recv(64).decode().split()
                    peer = int(words[1]) if len(words) == 2 and words[0] == "rank" else -1
                except (OSError, ValueError):
                    peer = -1
                if not 0 < peer < nnodes or peer in peers:
                    conn.close()
                    continue
                peers[peer] = conn
                log(f"sglang-sim rendezvous: node {peer} joined ({len(peers) + 1}/{nnodes})")
        finally:
            listener.close()
        for conn in peers.values():
            conn.sendall(b"go\n")
        return list(peers.values())
    while True:
        try:
            conn = socket.create_connection(addr, timeout=2)
            conn.sendall(f"rank {rank}\n".encode())
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            if conn.recv(8).startswith(b"go"):
                log(f"sglang-sim rendezvous: node {rank} of {nnodes} joined {addr[0]}:{addr[1]}")
                return [conn]
            conn.close()
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SimError(f"torch.distributed.DistNetworkError: The client socket has timed out after "
                           f"{int(timeout)}s while trying to connect to ({addr[0]}, {addr[1]}).")
        time.sleep(0.5)


def watch_peers(conns: list, rank: int) -> None:
    """Exit 1 as soon as a peer's connection closes: the distributed server lost a node."""
    def watch(conn):
        conn.settimeout(None)
        try:
            while conn.recv(64):
                pass
        except OSError:
            pass
        log(f"sglang-sim: node {rank} lost a peer node of its process group (its connection closed); "
            "exiting like a server whose NCCL peers are gone")
        os._exit(1)
    for conn in conns:
        threading.Thread(target=watch, args=(conn,), daemon=True).start()


class FollowerHealthHandler(BaseHTTPRequestHandler):
    """Rank >= 1: launch_dummy_health_check_server's routes only; everything else 404 (FastAPI)."""

    enable_metrics = False

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in ("/ping", "/health", "/health_generate"):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/metrics" and self.enable_metrics:
            body = b"# sglang-sim: no scheduler metrics on a node of rank >= 1\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
        else:
            body = b'{"detail":"Not Found"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET


def serve_follower(host: str, port: int, resolved: dict, rank: int) -> int:
    FollowerHealthHandler.enable_metrics = bool(resolved.get("enable_metrics"))
    try:
        httpd = ThreadingHTTPServer((host, port), FollowerHealthHandler)
    except OSError as exc:
        print(f"sglang-sim: cannot listen on {host}:{port}: {exc}", file=sys.stderr, flush=True)
        return 1
    httpd.daemon_threads = True
    log(f"sglang-sim node {rank}: schedulers ready; no API on this node (rank 0 serves it), "
        f"health only on http://{host}:{port}")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    httpd.serve_forever(poll_interval=0.2)
    httpd.server_close()
    return 0


# ---- PD disaggregation (--disaggregation-mode prefill|decode) ---------------------------------
# Real SGLang 0.5.23 (srt/disaggregation/), as the router and a client see it:
# * A request to a prefill or decode server must carry bootstrap_room (GenerateReqInput:
#   srt/managers/io_struct.py:291-294 bootstrap_host/bootstrap_port/bootstrap_room); without one
#   the scheduler aborts it with 400 (srt/managers/scheduler.py:3047-3064, unless the transfer
#   backend is "fake"): non-streamed `{"error": {"message": ...}}` (tokenizer_manager.py:1917-1918
#   ValueError -> http_server.py:2246 _create_error_response), streamed one chunk whose
#   meta_info.finish_reason is the abort (schedule_batch.py:339-345 FINISH_ABORT.to_json), then
#   [DONE] (tokenizer_manager.py:1921 returns the abort to the stream).
# * The prefill server runs the KV bootstrap server on --host:--disaggregation-bootstrap-port
#   (managers/disagg_service.py:27-48; common/conn.py:3069-3076: /route, /register_dp_rank,
#   /query_dp_ranks, GET /health -> "OK"), computes the prompt and its first token, and returns an
#   ordinary generate response (prefill.py:1014 appends that one token).
# * The decode server binds nothing there: it reaches the prefill at the request's
#   bootstrap_host:bootstrap_port (a null port falls back to its own --disaggregation-bootstrap-port,
#   scheduler.py:2970-2971), receives the KV cache, then decodes. A streamed response starts at once
#   (http_server.py StreamingResponse) and its tokens come after the KV. A room whose KV never comes
#   fails after SGLANG_DISAGGREGATION_WAITING_TIMEOUT seconds (default 300, srt/environ.py:763;
#   common/conn.py:2888-2902) with 500: "Decode handshake failed for request ..." (decode.py:1158-1175,
#   the exception as KVTransferError's __str__, common/conn.py:115-116).
# The sim's KV transfer is the stand-in (the real one is RDMA/TCP through mooncake or nixl): the
# prefill's bootstrap server also answers GET /sim/kv?room=R (200 once R was prefilled, 404 before),
# and the decode polls it. Each side logs the room it served, so a test can match the two.
PD_DEFAULT_WAITING_TIMEOUT_S = 300   # srt/environ.py:763 SGLANG_DISAGGREGATION_WAITING_TIMEOUT
PD_KV_KEEP = 10000                   # rooms a prefill remembers (the stand-in's memory bound)


class PD:
    """The server's PD side: mode ("null", "prefill", "decode"), its bootstrap port, the prefilled rooms."""
    mode = "null"
    bootstrap_port = 8998
    transfer_backend = "mooncake"
    rooms: dict = {}
    lock = threading.Lock()


class BootstrapHandler(BaseHTTPRequestHandler):
    """The prefill's KV bootstrap server: GET /health (common/conn.py:3073-3076), and the sim's KV stand-in."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, body: bytes):
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/health":
            return self._reply(200, b"OK")
        if path == "/sim/kv":
            room = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv).get("room", "")
            with PD.lock:
                ready = room in PD.rooms
            return self._reply(200 if ready else 404, b"ready" if ready else b"not prefilled")
        self._reply(404, b"Not Found")


def pd_start(resolved: dict, host: str) -> None:
    """Read the side from the resolved args; a prefill starts its bootstrap server (before the API)."""
    PD.mode = str(resolved.get("disaggregation_mode") or "null")
    PD.bootstrap_port = int(resolved.get("disaggregation_bootstrap_port") or 8998)
    PD.transfer_backend = str(resolved.get("disaggregation_transfer_backend") or "mooncake")
    if PD.mode != "prefill":
        return
    try:
        server = ThreadingHTTPServer((host, PD.bootstrap_port), BootstrapHandler)
    except OSError as exc:
        raise SimError(f"OSError: [Errno 98] cannot start the KV bootstrap server on {host}:{PD.bootstrap_port} "
                       f"(--disaggregation-bootstrap-port): {exc}") from exc
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    log(f"sglang-sim prefill: KV bootstrap server on {host}:{PD.bootstrap_port}")


def _pd_abort(handler, body, code: int, message: str, prompt: int = 0, openai: bool = False) -> None:
    """An aborted request as the client sees it (see the section's comment). OpenAI routes: the
    error object (entrypoints/openai/serving_base.py:223-237), streamed as `data: {"error": ...}`
    then [DONE] (serving_completions.py:362-372, :503)."""
    if openai:
        err = {"object": "error", "message": message, "type": "BAD_REQUEST" if code == 400 else
               "INTERNAL_SERVER_ERROR", "param": None, "code": code}
        if body.get("stream"):
            handler._stream_start()
            handler._sse({"error": err})
            handler._stream_end()
        elif code == 400:  # serving_completions.py:518-519 create_error_response (serving_base.py)
            handler._json(400, {**err, "type": "BadRequestError"})
        else:  # tokenizer_manager.py:1919 fastapi.HTTPException, not caught by the OpenAI route
            handler._json(code, {"detail": message})
        return
    if body.get("stream"):
        handler._stream_start()
        handler._sse({"text": "", "output_ids": [], "meta_info": {
            "id": uuid.uuid4().hex, "prompt_tokens": prompt, "completion_tokens": 0, "cached_tokens": 0,
            "finish_reason": {"type": "abort", "message": message, "status_code": code, "err_type": None}}})
        handler._stream_end()
    elif code == 400:
        handler._json(400, {"error": {"message": message}})
    else:  # fastapi.HTTPException(status_code, detail)
        handler._json(code, {"detail": message})


def _room_key(room) -> str:
    return str(room[0] if isinstance(room, list) and room else room)


def pd_admit(handler, body: dict, n: int, openai: bool = False):
    """Before a generation: None when answered here (refused, or the KV never came), else the tokens to
    generate (a prefill: its first token only). The OpenAI routes pass the same fields through
    (entrypoints/openai/serving_completions.py:125-127)."""
    if PD.mode == "null":
        return n
    room = body.get("bootstrap_room")
    if room is None and PD.transfer_backend != "fake":
        rid = body.get("rid") or uuid.uuid4().hex
        msg = f"Invalid request: Disaggregated request received without bootstrap room id. req.rid={rid!r}"
        log(f"[scheduler] {msg}")
        _pd_abort(handler, body, 400, msg, openai=openai)
        return None
    if PD.mode == "prefill":
        return min(n, 1)
    host = body.get("bootstrap_host")
    port = body.get("bootstrap_port")
    port = int(port[0] if isinstance(port, list) else port) if port is not None else PD.bootstrap_port
    host = str(host[0] if isinstance(host, list) else host)
    if body.get("stream"):
        handler._stream_start()
    timeout = float(os.environ.get("SGLANG_DISAGGREGATION_WAITING_TIMEOUT") or PD_DEFAULT_WAITING_TIMEOUT_S)
    key, t0 = _room_key(room), time.monotonic()
    url = f"http://{host}:{port}/sim/kv?room={key}"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    break
        except (OSError, ValueError):  # 404 (not prefilled yet), refused, unreachable
            pass
        elapsed = time.monotonic() - t0
        if elapsed >= timeout:
            rid = body.get("rid") or uuid.uuid4().hex
            msg = (f"Decode handshake failed for request rank=0 decode_req.req.rid={rid!r} "
                   f"decode_req.req.bootstrap_room={key} with exception KVTransferError(bootstrap_room={key}): "
                   f"Request {key} timed out after {elapsed:.1f}s in KVPoll.WaitingForInput")
            log(msg)
            _pd_abort(handler, body, 500, msg, openai=openai)
            return None
        time.sleep(0.05)
    log(f"sglang-sim decode: bootstrap_room={key} KV received from {host}:{port}, decoding {n} tokens")
    return n


def pd_finished(handler, body: dict, prompt: int, n: int) -> None:
    """After a generation: a prefill hands the room's KV over (the stand-in), both sides log the room."""
    if PD.mode == "null":
        return
    key = _room_key(body.get("bootstrap_room"))
    if PD.mode == "prefill":
        with PD.lock:
            PD.rooms[key] = time.monotonic()
            while len(PD.rooms) > PD_KV_KEEP:
                PD.rooms.pop(next(iter(PD.rooms)))
        log(f"sglang-sim prefill: bootstrap_room={key} prefilled {prompt} tokens, KV ready for "
            f"{body.get('bootstrap_host')}:{body.get('bootstrap_port')}")
    else:
        log(f"sglang-sim decode: bootstrap_room={key} done, {n} tokens")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        sgs = import_source_reader()
        src = sgs.load_source(locate_sglang())
        parser = sgs.build_parser(src)
        argv = merge_config_file(parser, argv)
        parser.parse_args(argv)  # argparse prints usage + error and exits 2 on bad argv
        sim_cfg = load_sim_config()
        hardware = sim_cfg["hardware"]
        pre = vars(parser.parse_args(argv))
        model_path = pre.get("model_path")
        model_config = load_model(model_path)
        refusal = startup_refusal(src.version, pre, model_config, hardware)
        if refusal:
            raise SimError(refusal)
        resolved = resolve(sgs, src, parser, argv, model_config, hardware)
        tp = int(resolved.get("tp_size") or 1)
        nnodes, node_rank, dist_addr = multinode(resolved)
        # each node runs tp_size x pp_size / nnodes ranks (engine.py _calculate_rank_ranges)
        if -(-tp * int(resolved.get("pp_size") or 1) // nnodes) > int(hardware["gpu_count"]):
            raise SimError(f"RuntimeError: tp_size={tp} needs {tp} GPUs, this host declares "
                           f"{hardware['gpu_count']} ({hardware['gpu_model']})")
        apply_faults(resolved, sim_cfg)
        weight_bytes = estimate_weight_bytes(model_path, model_config, sim_cfg)
    except SimError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    multimodal = (model_config.get("architectures") or [""])[0] in MULTIMODAL_ARCHS
    failure = startup_failure(resolved, hardware, weight_bytes, sim_cfg["surface"], multimodal, src.version)
    if failure:   # the scheduler fails after the weights load; the launcher kills itself (SIGKILL)
        log(server_args_log_line(src.version, resolved))
        log(failure)
        os.kill(os.getpid(), signal.SIGKILL)
    host, port = resolved.get("host") or "127.0.0.1", int(resolved.get("port") or 30000)
    if nnodes > 1:  # every node joins before any serves (multi-node section above)
        try:
            peers = rendezvous(nnodes, node_rank, dist_addr, rendezvous_timeout(resolved, sim_cfg))
        except SimError as exc:
            print(str(exc), file=sys.stderr, flush=True)
            return 1
        watch_peers(peers, node_rank)
        if node_rank > 0:
            return serve_follower(host, port, resolved, node_rank)
    launch = launch_command(src.version, argv)
    engine = Engine(resolved, hardware, weight_bytes, sim_cfg, model_config, src.version, launch)
    Handler.engine = engine
    try:
        pd_start(resolved, host)  # PD disaggregation section
    except SimError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    try:
        httpd = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        print(f"sglang-sim: cannot listen on {host}:{port}: {exc}", file=sys.stderr, flush=True)
        return 1
    httpd.daemon_threads = True
    log(server_args_log_line(src.version, resolved))
    log(f"sglang-sim {src.version} (simulated SGLang, not a real engine): model "
        f"{model_path}, tp_size={tp}, {hardware['gpu_count']}x {hardware['gpu_model']}, "
        f"single-stream {engine.single_stream:.1f} tok/s, accept length {engine.accept_len}")

    def ready():
        while not engine.loaded:
            if engine.never_healthy:
                return
            time.sleep(0.05)
        log(f"Uvicorn running on http://{host}:{port}")
        log("The server is fired up and ready to roll!")

    threading.Thread(target=ready, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=httpd.shutdown).start())
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
