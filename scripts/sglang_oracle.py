#!/usr/bin/env python3
"""Oracle of SGLang's resolved settings: run the release's OWN ``ServerArgs`` resolution.

For one SGLang release (its real wheel from PyPI, extracted by tests/wheels.py into
.cache/sglang-src/<release>/) and one host profile (GPUs + model config.json + argv), a throwaway
``python -S -s`` interpreter builds SGLang's real argparse parser (``ServerArgs.add_cli_args``),
parses the argv and calls ``ServerArgs.from_cli_args``, so the real dataclass, its
``__post_init__`` and every ``_handle_*`` / arg_groups hook it calls run as they would at
start-up. Nothing of sglang-fleet's reader (plugins/module_utils/source/) is imported.

    .venv/bin/python scripts/sglang_oracle.py 0.5.11 ct129          # JSON on stdout
    .venv/bin/python scripts/sglang_oracle.py --write                # every release x profile
                                                                     #  -> tests/fixtures/oracle/
What is real and what is not (the stubs of the import sandbox, scripts/sglang_sandbox.py; each one
and why is listed in STUBS below and in each fixture): sglang's own modules run for real, except
those whose import chain needs a GPU stack (models, layers, kernels...), which become permissive
stub modules; torch is a minimal fake whose ``torch.cuda`` answers with the profile's GPU facts;
``nvidia-smi`` is a fake script on PATH answering the memory / compute-capability queries SGLang
makes; transformers' ``AutoConfig.from_pretrained`` reads the profile's config.json into a small
PretrainedConfig stand-in. Every other third-party module (numpy, triton, psutil, ...) is a
permissive stub.
"""
from __future__ import annotations

import argparse
import json
import logging
import pathlib
import subprocess
import sys
import tempfile
import traceback
import types

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "oracle"
MSGSPEC = REPO / ".cache" / "msgspec-py311"   # msgspec for era C (msgspec.Struct arg groups)

# Releases of the fixtures: era A (server_args.py add_cli_args), B (annotated dataclass fields),
# C (arg_groups/fields msgspec structs).
RELEASES = ("0.5.11", "0.5.13.post1", "0.5.15.post1", "0.5.18", "0.5.21", "0.5.23")

# nvidia-smi memory.total (MiB) per GPU model, as the driver reports it.
GPUS = {
    "NVIDIA RTX A6000": {"cc": "8.6", "memory_mib": 49140},
    "NVIDIA H100 80GB HBM3": {"cc": "9.0", "memory_mib": 81559},
    "NVIDIA H200": {"cc": "9.0", "memory_mib": 143771},
    "NVIDIA B200": {"cc": "10.0", "memory_mib": 183359},
}

_QWEN36_27B = {   # the seeds' Qwen3.6-27B (Qwen3.5 architecture: hybrid linear attention + MTP head)
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
    "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    "image_token_id": 248056, "video_token_id": 248057,
    "text_config": {
        "model_type": "qwen3_5_text", "hidden_size": 5120, "num_hidden_layers": 64,
        "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
        "intermediate_size": 17408, "vocab_size": 248320, "max_position_embeddings": 262144,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16",
        "full_attention_interval": 4,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48,
        "mtp_num_hidden_layers": 1, "rope_parameters": {"rope_theta": 10000000,
                                                        "partial_rotary_factor": 0.25,
                                                        "rope_type": "default"},
    },
    "vision_config": {"model_type": "qwen3_5", "depth": 27, "hidden_size": 1152,
                      "num_heads": 16, "out_hidden_size": 5120, "patch_size": 16,
                      "spatial_merge_size": 2, "temporal_patch_size": 2},
}
_QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 151936,
    "max_position_embeddings": 40960, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "tie_word_embeddings": False,
}
_QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "torch_dtype": "bfloat16",
    "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "norm_topk_prob": True, "vocab_size": 151936,
    "max_position_embeddings": 40960, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "tie_word_embeddings": False,
}
_LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
    "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0, "tie_word_embeddings": False,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}
_QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl",
    "torch_dtype": "bfloat16", "hidden_size": 3584, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
    "vocab_size": 152064, "max_position_embeddings": 128000, "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
    "image_token_id": 151655, "video_token_id": 151656, "vision_start_token_id": 151652,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "hidden_size": 1280, "out_hidden_size": 3584,
                      "num_heads": 16, "patch_size": 14, "spatial_merge_size": 2,
                      "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]},
}

# Host profiles: GPUs, the model's config.json, and the argv after --model-path.
PROFILES = {
    "ct129": {   # the seeds' host: 2x RTX A6000 (SM86), Qwen3.6-27B, TP 2, 3-step MTP
        "gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "model": "Qwen3.6-27B",
        "config": _QWEN36_27B,
        "argv": ["--tp", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                 "--mem-fraction-static", "0.88", "--context-length", "131072"],
    },
    # The same with --disable-radix-cache: up to 0.5.13.post1 SGLang refuses ct129's argv (speculative
    # decoding on a hybrid linear-attention model with radix cache, "no_buffer" strategy).
    "ct129-no-radix": {
        "gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "model": "Qwen3.6-27B",
        "config": _QWEN36_27B,
        "argv": ["--tp", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                 "--mem-fraction-static", "0.88", "--context-length", "131072",
                 "--disable-radix-cache"],
    },
    "h200x1-dense": {
        "gpu_model": "NVIDIA H200", "gpu_count": 1, "model": "Qwen3-8B", "config": _QWEN3_8B,
        "argv": ["--tp", "1", "--context-length", "32768"],
    },
    "h200x2-moe": {
        "gpu_model": "NVIDIA H200", "gpu_count": 2, "model": "Qwen3-30B-A3B",
        "config": _QWEN3_30B_A3B, "argv": ["--tp", "2"],
    },
    "b200x2-dense": {   # SM100: the Blackwell-only auto-enable rules
        "gpu_model": "NVIDIA B200", "gpu_count": 2, "model": "Llama-3.1-8B",
        "config": _LLAMA31_8B, "argv": ["--tp", "2"],
    },
    "h100x1-dense": {
        "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "model": "Llama-3.1-8B",
        "config": _LLAMA31_8B, "argv": [],
    },
    "h200x1-mm": {
        "gpu_model": "NVIDIA H200", "gpu_count": 1, "model": "Qwen2.5-VL-7B",
        "config": _QWEN25_VL_7B, "argv": [],
    },
}

# ServerArgs fields the fixtures keep (the ones sglang-fleet audits, and their inputs).
FIELDS = (
    "tp_size", "dp_size", "pp_size", "nnodes", "enable_dp_attention",
    "disable_cuda_graph", "cuda_graph_backend_decode",
    "disable_piecewise_cuda_graph", "enable_piecewise_cuda_graph", "enforce_piecewise_cuda_graph",
    "cuda_graph_backend_prefill",
    "disable_custom_all_reduce",
    "enable_flashinfer_allreduce_fusion", "flashinfer_allreduce_fusion_backend",
    "enforce_disable_flashinfer_allreduce_fusion",
    "enable_single_batch_overlap", "enable_two_batch_overlap",
    "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "speculative_draft_model_path",
    "attention_backend", "prefill_attention_backend", "decode_attention_backend",
    "sampling_backend", "moe_runner_backend", "moe_a2a_backend",
    "mem_fraction_static", "context_length", "chunked_prefill_size", "cuda_graph_max_bs",
    "max_running_requests", "page_size", "language_model_only",
)

# Every stub and why (written into each fixture too).
STUBS = {
    "torch": "no torch on the controller: a fake module whose torch.cuda answers is_available, "
             "device_count, get_device_capability, get_device_name, get_device_properties and "
             "mem_get_info with the profile's GPU facts; torch.version.cuda='12.9', hip=None; "
             "any other attribute is a permissive stand-in (falsy, callable)",
    "nvidia-smi": "a script on PATH answering --query-gpu=memory.total / compute_cap / name with "
                  "the profile's GPUs (SGLang's get_nvgpu_memory_capacity runs it)",
    "transformers": "AutoConfig.from_pretrained / PretrainedConfig read the profile's config.json "
                    "into a small attribute bag (nested *_config dicts become bags too); the rest "
                    "of transformers is a permissive stand-in",
    "third-party": "every other non-stdlib module (numpy, triton, psutil, requests, PIL, zmq, "
                   "flashinfer, sgl_kernel, ...) is a permissive stand-in: importable, attributes "
                   "are falsy callables, so optional-kernel probes answer 'not installed'",
    "sglang-internal": "sglang modules outside REAL_SGLANG (models, layers, kernels, managers, "
                       "the package __init__ files) are permissive stand-ins; see the fixture's "
                       "'stubbed_sglang_modules' for those the resolution touched",
}

# sglang modules that run for real ("x.*": the package x and everything under it).
REAL_SGLANG = (
    "sglang.srt.server_args", "sglang.srt.arg_groups.*", "sglang.srt.configs.model_config",
    "sglang.srt.environ", "sglang.srt.utils", "sglang.srt.utils.common", "sglang.srt.platforms.*",
    "sglang.srt.utils.hf_transformers.*", "sglang.srt.utils.hf_transformers_utils",
    "sglang.srt.model_executor.cuda_graph_config", "sglang.srt.speculative.spec_info",
    "sglang.srt.configs.linear_attn_model_registry", "sglang.srt.layers.attention.attention_registry",
    "sglang.srt.server_args_config_parser", "sglang.srt.utils.network", "sglang.version",
    "sglang.srt.configs.load_config", "sglang.srt.configs.device_config",
    "sglang.srt.configs.model_config_parser_registry", "sglang.srt.speculative.spec_registry",
    "sglang.srt.runtime_context",
)
# Third-party modules that are pure Python and present in the dev venv: used for real.
REAL_THIRD_PARTY = ("msgspec", "packaging", "typing_extensions")


# ============================================================================ controller side


def sglang_tree(release: str) -> pathlib.Path:
    sys.path.insert(0, str(REPO))
    from tests.wheels import sglang_source_tree  # noqa: PLC0415 - the tests' wheel cache
    return sglang_source_tree(release)


def _fake_nvidia_smi(folder: pathlib.Path, gpu: str, count: int) -> None:
    spec = GPUS[gpu]
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n# fake nvidia-smi of sglang_oracle.py\n"
        f'case "$*" in\n'
        f'  *memory.total*) i=0; while [ $i -lt {count} ]; do echo {spec["memory_mib"]}; i=$((i+1)); done ;;\n'
        f'  *compute_cap*) i=0; while [ $i -lt {count} ]; do echo {spec["cc"]}; i=$((i+1)); done ;;\n'
        f'  *name*) i=0; while [ $i -lt {count} ]; do echo "{gpu}"; i=$((i+1)); done ;;\n'
        f'  *) echo "fake nvidia-smi: unsupported query: $*" >&2; exit 9 ;;\n'
        "esac\n")
    script.chmod(0o755)


def resolve(release: str, profile: str, timeout: int = 120) -> dict:
    """Run the release's own ServerArgs resolution for `profile`; the result dict (see FIELDS)."""
    prof = PROFILES[profile]
    tree = sglang_tree(release)
    with tempfile.TemporaryDirectory(prefix="sglang-oracle-") as tmp:
        tmp = pathlib.Path(tmp)
        model = tmp / "models" / prof["model"]
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps(prof["config"]))
        (tmp / "bin").mkdir()
        _fake_nvidia_smi(tmp / "bin", prof["gpu_model"], prof["gpu_count"])
        job = {"sglang_parent": str(tree.parent), "msgspec_parent": str(MSGSPEC),
               "venv_site": _venv_site(), "gpu_model": prof["gpu_model"],
               "gpu_count": prof["gpu_count"], "gpu": GPUS[prof["gpu_model"]],
               "argv": ["--model-path", str(model)] + prof["argv"], "fields": FIELDS,
               "real_sglang": REAL_SGLANG, "real_third_party": REAL_THIRD_PARTY}
        env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8",
               "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(prof["gpu_count"])),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        proc = subprocess.run([sys.executable, "-S", "-s", __file__, "--worker"],
                              input=json.dumps(job), capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tmp, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("ORACLE-RESULT ")]
    if proc.returncode != 0 or not lines:   # the oracle itself failed (a stub, an import)
        return {"release": release, "profile": profile, "resolved": None,
                "error": (proc.stderr.strip().splitlines() or ["no output"])[-1],
                "stderr_tail": proc.stderr[-3000:]}
    out = json.loads(lines[-1][len("ORACLE-RESULT "):])
    model_path = str(model)
    for key, value in (out.get("resolved") or {}).items():   # the temp path is not part of a fixture
        if isinstance(value, str) and model_path in value:
            out["resolved"][key] = value.replace(model_path, "<model_path>")
    return {"release": release, "profile": profile, **out}


def _venv_site() -> str:
    import sysconfig  # noqa: PLC0415
    return sysconfig.get_paths()["purelib"]


def fixture_record(release: str, profile: str) -> dict:
    result = resolve(release, profile)
    prof = PROFILES[profile]
    return {
        "release": release, "profile": profile,
        "command": f".venv/bin/python scripts/sglang_oracle.py {release} {profile}",
        "hardware": {"gpu_model": prof["gpu_model"], "gpu_count": prof["gpu_count"],
                     "compute_capability": GPUS[prof["gpu_model"]]["cc"],
                     "memory_mib": GPUS[prof["gpu_model"]]["memory_mib"]},
        "model": prof["model"], "architectures": prof["config"]["architectures"],
        "argv": prof["argv"], "stubs": STUBS,
        **{k: v for k, v in result.items() if k not in ("release", "profile")},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("release", nargs="?")
    ap.add_argument("profile", nargs="?", choices=sorted(PROFILES))
    ap.add_argument("--write", action="store_true",
                    help="resolve every RELEASES x PROFILES and write tests/fixtures/oracle/")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker()
    if args.write:
        releases = [args.release] if args.release else RELEASES
        profiles = [args.profile] if args.profile else sorted(PROFILES)
        for rel in releases:
            for prof in profiles:
                rec = fixture_record(rel, prof)
                path = FIXTURES / rel / f"{prof}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                rec.pop("stderr_tail", None) if rec.get("resolved") else None
                path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
                print(rel, prof, "resolved" if rec.get("resolved") else f"startup error: {rec['startup_error']}" if rec.get("startup_error") else f"FAILED: {rec.get('error')}")
        return 0
    if not (args.release and args.profile):
        ap.error("give RELEASE PROFILE, or --write")
    rec = fixture_record(args.release, args.profile)
    print(json.dumps(rec, indent=1, sort_keys=True))
    return 0 if rec.get("resolved") else 1


# ============================================================================ worker side
# Runs under `python -S -s` (no site-packages but REAL_THIRD_PARTY): stdlib only until sglang. The
# import sandbox is scripts/sglang_sandbox.py (this script's folder is the worker's sys.path[0]).


def _worker() -> int:
    import sglang_sandbox as sandbox  # noqa: PLC0415

    job = json.load(sys.stdin)
    box = sandbox.Sandbox(job["sglang_parent"], real_sglang=job["real_sglang"],
                          real_third_party=job["real_third_party"], names="classes",
                          fakes={"torch": _fake_torch(job, sandbox.StubModule),
                                 "transformers": _fake_transformers(sandbox.StubModule)})
    box.install([job["sglang_parent"], job["msgspec_parent"], job["venv_site"]])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server_args = box.server_args()
    ns = box.parser(server_args).parse_args(job["argv"])
    try:
        sa = server_args.ServerArgs.from_cli_args(ns)   # eras A/B: __post_init__ resolves
        if hasattr(sa, "resolve_once"):                 # era C: construction is raw; the launcher resolves
            sa.resolve_once()
    except (ValueError, AssertionError, RuntimeError, NotImplementedError) as exc:
        result = _startup_error(exc, box)
    else:
        result = {"resolved": _resolved(sa, job["fields"]),
                  "stubbed_sglang_modules": box.stubbed_sglang_modules()}
    print("ORACLE-RESULT " + json.dumps(result))
    return 0


def _fake_torch(job, stub_module):
    """The fake torch: only what SGLang's hardware probes read, answered with the profile's GPUs."""
    gpu, count, cc = job["gpu_model"], job["gpu_count"], job["gpu"]["cc"]
    major, minor = (int(x) for x in cc.split("."))
    mem_bytes = job["gpu"]["memory_mib"] * 1024 * 1024
    props = types.SimpleNamespace(name=gpu, major=major, minor=minor, total_memory=mem_bytes,
                                  multi_processor_count={"8.6": 84, "9.0": 132, "10.0": 148}.get(cc, 100))

    def fill(mod):
        cuda = stub_module("torch.cuda")
        cuda.is_available = lambda: True
        cuda.device_count = lambda: count
        cuda.current_device = lambda: 0
        cuda.get_device_capability = lambda device=None: (major, minor)
        cuda.get_device_name = lambda device=None: gpu
        cuda.get_device_properties = lambda device=None: props
        cuda.mem_get_info = lambda device=None: (mem_bytes, mem_bytes)
        version = stub_module("torch.version")
        version.cuda, version.hip, version.git_version = "12.9", None, "0" * 40
        mod.cuda, mod.version, mod.__version__ = cuda, version, "2.9.1+cu129"
        sys.modules["torch.cuda"], sys.modules["torch.version"] = cuda, version

    return fill


class PretrainedConfig:
    """The fake transformers' config: the attributes of a config.json; nested *_config dicts are configs too."""

    def __init__(self, **kw):
        for key, value in kw.items():
            if key.endswith("_config") and isinstance(value, dict) and key not in (
                    "quantization_config", "rope_scaling"):
                value = PretrainedConfig(**value)
            setattr(self, key, value)
        self.__dict__.setdefault("architectures", None)
        self.__dict__.setdefault("model_type", "")

    def to_dict(self):
        return {k: (v.to_dict() if isinstance(v, PretrainedConfig) else v)
                for k, v in self.__dict__.items()}

    def to_diff_dict(self):
        return self.to_dict()

    def get_text_config(self, decoder=False, **kw):
        return getattr(self, "text_config", None) or self

    def update(self, d):
        self.__dict__.update(d)

    @classmethod
    def from_dict(cls, d, **kw):
        return cls(**d)

    @classmethod
    def get_config_dict(cls, path, **kw):
        return json.loads((pathlib.Path(path) / "config.json").read_text()), kw

    @classmethod
    def from_pretrained(cls, path, **kw):
        return cls(**cls.get_config_dict(path)[0], _name_or_path=str(path))


class AutoConfig:
    from_pretrained = PretrainedConfig.from_pretrained

    @staticmethod
    def register(*a, **kw):   # sglang registers its own config classes at import
        pass


def cached_file(path_or_repo, filename, **kw):
    """transformers.utils.cached_file on a local folder: the file, or None when absent."""
    path = pathlib.Path(path_or_repo, filename)
    if path.is_file():
        return str(path)
    if kw.get("_raise_exceptions_for_missing_entries", True):
        raise OSError(f"{path_or_repo} does not appear to have a file named {filename}")
    return None


def _fake_transformers(stub_module):
    """The fake transformers: its config loading reads the profile's config.json."""

    def fill(mod):
        mod.PretrainedConfig, mod.AutoConfig, mod.__version__ = PretrainedConfig, AutoConfig, "4.57.1"
        for sub, attrs in (("configuration_utils", {"PretrainedConfig": PretrainedConfig}),
                           ("utils", {"cached_file": cached_file}),
                           ("utils.hub", {"cached_file": cached_file})):
            m = stub_module(f"transformers.{sub}")
            for k, v in attrs.items():
                setattr(m, k, v)
            sys.modules[m.__name__] = m
            if "." not in sub:
                setattr(mod, sub, m)

    return fill


def _startup_error(exc, box) -> dict:
    """SGLang refuses these settings at start-up (the server would exit): which rule, where it raised."""
    stubbed = box.stubbed_sglang_modules()
    if any(m + "." in str(exc) for m in stubbed) or "<op>" in str(exc):
        raise exc   # a stub's value reached the message: an oracle failure, not SGLang's verdict
    # Where it raised (the innermost frame in sglang's own source) says which rule.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/sglang/" in f.filename]
    where = frames[-1] if frames else None
    return {"resolved": None, "startup_error": {
        "type": type(exc).__name__, "message": str(exc)[:500],
        "file": where.filename.split("/sglang/", 1)[-1] if where else None,
        "line": where.lineno if where else None},
        "stubbed_sglang_modules": stubbed}


def _plain(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if hasattr(v, "value") and isinstance(v.value, (str, int)):
        return v.value   # an Enum
    return f"<{type(v).__name__}>"


def _resolved(sa, fields) -> dict:
    """The resolved fields as /server_info shows them: resolved_dict() from 0.5.19, dataclasses.asdict before."""
    shown = sa.resolved_dict() if hasattr(sa, "resolved_dict") else {
        name: getattr(sa, name) for name in fields if hasattr(sa, name)}
    resolved = {name: _plain(shown[name]) for name in fields if name in shown}
    cgc = shown.get("cuda_graph_config", getattr(sa, "cuda_graph_config", None))
    if cgc is not None:   # eras B/C: the per-phase CUDA graph config the runners use
        for phase in ("decode", "prefill"):
            ph = cgc.get(phase) if isinstance(cgc, dict) else getattr(cgc, phase, None)
            backend = ph.get("backend") if isinstance(ph, dict) else getattr(ph, "backend", None)
            resolved[f"cuda_graph_config.{phase}.backend"] = _plain(backend)
    return resolved


if __name__ == "__main__":
    sys.exit(main())
