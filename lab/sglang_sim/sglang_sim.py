"""sglang-sim: a test double of SGLang's serving surface for lab hosts without a GPU.

Invoked exactly like the real server, with the same argv as ``python -m sglang.launch_server``::

    <venv>/bin/python /opt/sglang-sim/sglang_sim.py --model-path M --tp-size 2 --port 30000 ...

It is NOT SGLang: no model runs and the text is "A".."Z" cycling. What it reproduces:

* argv validation of the *installed* sglang (found with ``importlib.util.find_spec("sglang")``
  of this interpreter, never imported): ``sglang_source.build_parser`` rebuilds SGLang's argparse
  parser from the source, so a bad flag prints argparse's usage + error and exits 2;
  ``--config file.yaml`` is merged the way SGLang's ConfigArgumentMerger does (exact ``--config``
  token only, config first, CLI wins);
* resolved settings in ``/server_info``: every flag with its default, argv applied, SGLang's
  startup resolution as ``sglang_source.predict`` reads it from this release (NEXTN->EAGLE,
  speculative auto-choice, the multimodal prefill-graph rule, ...), simple fallbacks
  (served_model_name/tokenizer_path, mem_fraction_static), then the fault knobs;
* the endpoints and field names of the real server, streaming as SSE, Prometheus ``/metrics``;
* decode speed from the roofline below, paced with real sleeps.

Throughput model (single stream, tokens/s)::

    passes/s   = eff_bw * tp / weight_bytes * SIM_EFFICIENCY      eff_bw = 0.85 * hbm_bandwidth_gbs
    tok/s      = passes/s * accept_len / (1 + DRAFT_STEP_COST * spec_steps) * degrade_factor
    accept_len = 1 + sum(PER_TOKEN_ACCEPT ** i, i = 1..min(steps, draft_tokens - 1))   (off: 1.0)
    batch b    : per-stream tok/s divided by 1 + BATCH_COST_PER_DOUBLING * log2(b)
    TTFT       = (1 + prompt_tokens / PREFILL_TOKENS_PER_PASS) / passes/s

PER_TOKEN_ACCEPT = 0.85 gives accept length 1.85 for 1 step and 3.19 for 3 steps / 4 draft
tokens. SIM_EFFICIENCY (0.47, the "real-world overhead": all-reduce, KV cache, attention,
sampling, scheduling) and DRAFT_STEP_COST (0.115: one MTP/EAGLE draft step costs ~11.5 % of a
target forward) were fitted to the seeds' ct129 host (2x A6000 768 GB/s, Qwen3.6-27B, 27 GB):
NEXTN 3/1/4 -> 53.8 tok/s (measured 50-57), 1-step MTP -> 37.7 tok/s (measured ~35-40);
no speculation -> 22.7 tok/s. Batch 8 costs 1.05x batch 1, batch 64 1.10x (H200 measurements).

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
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_CONFIG = "/etc/sglang-sim/config.json"
FAULT_KNOBS = ("never_healthy", "slow_start_s", "degrade_factor", "disable_optimization", "crash_after_requests")

BW_EFFICIENCY = 0.85
SIM_EFFICIENCY = 0.47
DRAFT_STEP_COST = 0.115
PER_TOKEN_ACCEPT = 0.85
BATCH_COST_PER_DOUBLING = 0.05 / 3
PREFILL_TOKENS_PER_PASS = 100
DEFAULT_LOAD_S = 1.0
DEFAULT_TOKEN_CAPACITY = 262144
NO_CUDA_GRAPH_FACTOR = 0.7

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
        raise SimError(f"sglang-sim: cannot import sglang_source.py next to {__file__}: {exc}") from exc
    return sglang_source


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
    return cfg


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


def accept_length(steps, topk, draft) -> float:
    if not steps:
        return 1.0
    depth = int(steps)
    if draft:
        depth = min(depth, max(int(draft) - 1, 0))
    return round(1.0 + sum(PER_TOKEN_ACCEPT ** i for i in range(1, depth + 1)), 4)


def _finding_get(f, key, default=None):
    return f.get(key, default) if isinstance(f, dict) else getattr(f, key, default)


def _set(resolved: dict, dest: str, value) -> None:
    if dest in resolved:
        resolved[dest] = value


def apply_findings(resolved: dict, findings) -> None:
    """Write `predict`'s decisions (one Finding per optimisation) into the resolved args.

    "speculative decoding" (value {algorithm, num_steps, eagle_topk, num_draft_tokens}) sets the
    speculative_* dests; "prefill/piecewise CUDA graph" sets disable_/enable_piecewise_cuda_graph
    (bool value, <= 0.5.13) or cuda_graph_backend_prefill (backend name, 0.5.14+);
    "FlashInfer all-reduce fusion" sets enable_flashinfer_allreduce_fusion. A finding named after
    a dest with a concrete value sets it ("auto" and context_length are left to SGLang's runtime).
    """
    for f in findings:
        name, value = _finding_get(f, "name"), _finding_get(f, "value")
        if name == "speculative decoding":
            if isinstance(value, dict):
                for key in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens"):
                    if value.get(key) is not None:
                        _set(resolved, "speculative_" + key, value[key])
        elif name == "prefill/piecewise CUDA graph":
            if isinstance(value, bool):
                _set(resolved, "disable_piecewise_cuda_graph", not value)
                _set(resolved, "enable_piecewise_cuda_graph", value)
            elif isinstance(value, str):
                _set(resolved, "cuda_graph_backend_prefill", value)
        elif name == "FlashInfer all-reduce fusion":
            if isinstance(value, bool):
                _set(resolved, "enable_flashinfer_allreduce_fusion", value)
        elif name in resolved and name != "context_length" and value not in (None, "auto"):
            resolved[name] = value


def resolve(sgs, src, parser, argv, model_config, hardware):
    """Resolved server args by dest name, plus `predict`'s findings.

    Order: every flag's default with argv applied; `predict` on the normalised argv (SGLang's
    rules as read from this release); then the simulator's own fallbacks for what is still unset.
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
    findings = list(sgs.predict(src, given or dict(resolved), {**hardware, "source": "declared"},
                                dict(model_config)) or [])
    apply_findings(resolved, findings)
    # Fallbacks for what predict left unset (SGLang's __post_init__ behaviour).
    if resolved.get("tokenizer_path") is None and "tokenizer_path" in resolved:
        resolved["tokenizer_path"] = resolved.get("model_path")
    if resolved.get("served_model_name") is None and "served_model_name" in resolved:
        resolved["served_model_name"] = resolved.get("model_path")
    if resolved.get("speculative_algorithm") == "NEXTN":
        resolved["speculative_algorithm"] = "EAGLE"
    if resolved.get("speculative_algorithm"):
        if resolved.get("speculative_num_steps") is None:
            arch = (model_config.get("architectures") or [""])[0]
            auto = (5, 4, 8) if arch == "LlamaForCausalLM" else (3, 1, 4)
            resolved["speculative_num_steps"], resolved["speculative_eagle_topk"], \
                resolved["speculative_num_draft_tokens"] = auto
        if resolved.get("speculative_eagle_topk") is None:
            resolved["speculative_eagle_topk"] = 1
        if resolved.get("speculative_num_draft_tokens") is None:
            resolved["speculative_num_draft_tokens"] = int(resolved["speculative_num_steps"]) + 1
    if "mem_fraction_static" in resolved and resolved["mem_fraction_static"] is None:
        resolved["mem_fraction_static"] = 0.85
    return resolved, findings


def apply_faults(resolved: dict, cfg: dict) -> None:
    """`disable_optimization`: the server silently flips one resolved setting."""
    name = cfg.get("disable_optimization")
    if not name:
        return
    if name == "speculative":
        for key in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens"):
            if key in resolved:
                resolved[key] = None
        return
    hit = False
    if f"disable_{name}" in resolved:
        resolved[f"disable_{name}"], hit = True, True
    if f"enable_{name}" in resolved:
        resolved[f"enable_{name}"], hit = False, True
    if name == "piecewise_cuda_graph" and "cuda_graph_backend_prefill" in resolved:
        resolved["cuda_graph_backend_prefill"], hit = "disabled", True
    if not hit:
        raise SimError(f"sglang-sim: disable_optimization={name!r} matches no setting of "
                       "this SGLang version (neither disable_<name> nor enable_<name>)")


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
        r = resolved
        spec_on = bool(r.get("speculative_algorithm"))
        self.steps = int(r.get("speculative_num_steps") or 0) if spec_on else 0
        self.accept_len = accept_length(self.steps, r.get("speculative_eagle_topk"),
                                        r.get("speculative_num_draft_tokens"))
        tp = int(r.get("tp_size") or 1)
        eff_bw = BW_EFFICIENCY * float(hardware["hbm_bandwidth_gbs"]) * 1e9
        self.passes_per_s = eff_bw * tp / weight_bytes * SIM_EFFICIENCY
        if r.get("disable_cuda_graph"):
            self.passes_per_s *= NO_CUDA_GRAPH_FACTOR
        self.single_stream = (self.passes_per_s * self.accept_len
                              / (1 + DRAFT_STEP_COST * self.steps)
                              * float(cfg.get("degrade_factor", 1.0) or 1.0))
        self.capacity = int(r.get("max_total_tokens") or DEFAULT_TOKEN_CAPACITY)

    @property
    def loaded(self) -> bool:
        return not self.never_healthy and time.monotonic() - self.start >= self.load_s

    def rate(self, batch: int) -> float:
        return self.single_stream / (1 + BATCH_COST_PER_DOUBLING * math.log2(max(batch, 1)))

    def generate(self, prompt_tokens: int, max_new: int, emit, count=True) -> dict:
        """Emit `max_new` tokens through `emit(i, token_text)` at the modelled pace."""
        rid = uuid.uuid4().hex
        t0 = time.monotonic()
        with self.lock:
            self.running[rid] = prompt_tokens
        try:
            first = t0 + (1 + prompt_tokens / PREFILL_TOKENS_PER_PASS) / self.passes_per_s
            due, prev = first, None
            for i in range(max_new):
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                now = time.monotonic()
                emit(i, chr(ord("A") + i % 26))
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
                due += 1.0 / self.rate(batch)
        finally:
            with self.lock:
                self.running.pop(rid, None)
        e2e = time.monotonic() - t0
        verify = math.ceil(max_new / self.accept_len) if self.steps else 0
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
        return {**info, "internal_states": [state], "version": self.version}

    def metrics(self) -> str:
        name = self.resolved.get("served_model_name") or self.resolved.get("model_path")
        lab = f'model_name="{name}"'
        with self.lock:
            used = sum(self.running.values())
            lines = []

            def gauge(metric, value, helptext):
                lines.extend([f"# HELP sglang:{metric} {helptext}", f"# TYPE sglang:{metric} gauge",
                              f"sglang:{metric}{{{lab}}} {value}"])

            def counter(metric, value, helptext):
                lines.extend([f"# HELP sglang:{metric} {helptext}",
                              f"# TYPE sglang:{metric} counter",
                              f"sglang:{metric}_total{{{lab}}} {float(value)}"])

            def hist(metric, h, helptext):
                lines.extend([f"# HELP sglang:{metric} {helptext}",
                              f"# TYPE sglang:{metric} histogram"])
                for b, c in zip(h.buckets, h.counts):
                    lines.append(f'sglang:{metric}_bucket{{{lab},le="{float(b)}"}} {float(c)}')
                lines.append(f'sglang:{metric}_bucket{{{lab},le="+Inf"}} {float(h.count)}')
                lines.append(f"sglang:{metric}_sum{{{lab}}} {h.sum}")
                lines.append(f"sglang:{metric}_count{{{lab}}} {float(h.count)}")

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
                 "seconds.")
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
    pass


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
        self._json(200, {"object": "list", "data": [{
            "id": r.get("served_model_name") or r.get("model_path"), "object": "model",
            "created": int(time.time()), "owned_by": "sglang", "root": r.get("model_path"),
            "max_model_len": r.get("context_length") or self.engine.model_config.get(
                "max_position_embeddings")}]})

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
        else:
            raise BadRequest("Either text or input_ids should be provided.")
        sp = body.get("sampling_params") or {}
        n = self._int(sp, "max_new_tokens", default=128)
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
        eng.finished_request()

    def _openai(self, body, chat: bool):
        if not self._require_loaded():
            return
        eng = self.engine
        if chat:
            msgs = body.get("messages")
            if not isinstance(msgs, list) or not msgs:
                raise BadRequest("messages must be a non-empty list")
            prompt = max(sum(count_words(m.get("content")) for m in msgs if isinstance(m, dict)), 1)
            n = self._int(body, "max_completion_tokens", "max_tokens", default=128)
        else:
            if "prompt" not in body:
                raise BadRequest("prompt is required")
            prompt = max(count_words(body["prompt"]), 1)
            n = self._int(body, "max_tokens", default=16)
        model = body.get("model") or eng.resolved.get("served_model_name")
        cid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        obj = "chat.completion" if chat else "text_completion"
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if body.get("stream"):
            chunk_obj = "chat.completion.chunk" if chat else "text_completion"
            self._stream_start()

            def chunk(choices, extra=None):
                d = {"id": cid, "object": chunk_obj, "created": created, "model": model,
                     "choices": choices}
                d.update(extra or {})
                self._sse(d)

            def emit(i, tok):
                if chat:
                    delta = {"role": "assistant", "content": tok} if i == 0 else {"content": tok}
                    c = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
                else:
                    c = {"index": 0, "text": tok, "logprobs": None, "finish_reason": None}
                if i == n - 1:
                    c["finish_reason"], c["matched_stop"] = "length", None
                chunk([c])
            eng.generate(prompt, n, emit)
            if n == 0:
                key = "delta" if chat else "text"
                chunk([{"index": 0, key: {} if chat else "", "logprobs": None,
                        "finish_reason": "length"}])
            if (body.get("stream_options") or {}).get("include_usage"):
                chunk([], {"usage": usage})
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
                             "choices": [choice], "usage": usage})
        eng.finished_request()

    def completions(self, body):
        self._openai(body, chat=False)

    def chat_completions(self, body):
        self._openai(body, chat=True)

    def sim_findings(self, _body):
        self._json(200, {"findings": FINDINGS})


FINDINGS: list = []
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
    "/sim/findings": ("GET", Handler.sim_findings),
}


def _finding_dict(f) -> dict:
    if isinstance(f, dict):
        return f
    keys = ("name", "status", "value", "reason", "rule_file", "rule_line", "override",
            "how_to_enable")
    return {k: getattr(f, k, None) for k in keys}


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
        resolved, findings = resolve(sgs, src, parser, argv, model_config, hardware)
        tp = int(resolved.get("tp_size") or 1)
        if tp > int(hardware["gpu_count"]):
            raise SimError(f"RuntimeError: tp_size={tp} needs {tp} GPUs, this host declares "
                           f"{hardware['gpu_count']} ({hardware['gpu_model']})")
        apply_faults(resolved, sim_cfg)
        weight_bytes = estimate_weight_bytes(model_path, model_config, sim_cfg)
    except SimError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    FINDINGS[:] = [_finding_dict(f) for f in findings]
    launch = launch_command(src.version, argv)
    engine = Engine(resolved, hardware, weight_bytes, sim_cfg, model_config, src.version, launch)
    Handler.engine = engine
    host, port = resolved.get("host") or "127.0.0.1", int(resolved.get("port") or 30000)
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
