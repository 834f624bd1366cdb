"""Argv a release's parser accepts but its ServerArgs resolution refuses at start, on real wheels.

sglang 0.5.10 - 0.5.13.post1: ``ServerArgs._handle_mamba_radix_cache`` raises ValueError for
speculative decoding on a hybrid linear-attention (mamba) model with the radix cache on and
``--mamba-scheduler-strategy no_buffer`` (the default). 0.5.9 disabled the radix cache with a
warning instead; 0.5.14 rewrote the handler (it picks extra_buffer or no_buffer itself). The seeds'
ct129 (Qwen3.6-27B, NEXTN 3/1/4) hits it. The expected source lines are found here by plain text
search in each wheel, not by the reader under test; tests/oracle checks the same verdicts against
SGLang's own resolution.
"""
import re

import pytest
from ansible_run import run_module
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import validate_argv

pytestmark = pytest.mark.wheels

QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
A6000X2 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2}
CT129_ARGV = ["--model-path", "/models/Qwen3.6-27B", "--tp", "2", "--speculative-algorithm", "NEXTN",
              "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4", "--mem-fraction-static", "0.88",
              "--context-length", "131072"]
SGLANG_SAYS = ("Speculative decoding for Qwen3_5ForConditionalGeneration is not compatible with radix cache "
               "when using --mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, "
               "please use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.")


def raise_line(version) -> int:
    """The line of `raise ValueError(` right before SGLang's message, by text search in the wheel."""
    lines = (sglang_source_tree(version) / "srt" / "server_args.py").read_text().splitlines()
    hit = next(i for i, ln in enumerate(lines) if "is not compatible with radix cache when using" in ln)
    return next(i for i in range(hit, hit - 3, -1) if lines[i].strip() == "raise ValueError(") + 1


def errors(src, version, argv, config=QWEN36, hardware=A6000X2):
    return [p for p in validate_argv(src(version), argv, config, hardware) if p.severity == "error"]


@pytest.mark.parametrize("version", ["0.5.10", "0.5.11", "0.5.13.post1"])
def test_ct129_is_refused_with_the_rule_the_reason_and_the_fix(src, version):
    (p,) = errors(src, version, CT129_ARGV)
    assert (p.kind, p.flag) == ("refused_at_start", "--speculative-algorithm")
    assert f"sglang/srt/server_args.py:{raise_line(version)} (ServerArgs._handle_mamba_radix_cache, " in p.message
    assert f"raises 'ValueError: {SGLANG_SAYS}' at start" in p.message
    assert p.message.startswith(
        f"Qwen3_5ForConditionalGeneration is a hybrid linear-attention (mamba) model, and sglang {version} does "
        "not run speculative decoding (--speculative-algorithm NEXTN) with its radix cache under "
        "--mamba-scheduler-strategy no_buffer (the default): ")
    assert p.message.endswith(
        "Fix: add disable_radix_cache: true to sglang_args (prefix caching off), or set mamba_scheduler_strategy: "
        'extra_buffer in sglang_args and SGLANG_ENABLE_SPEC_V2: "1" in sglang_service_environment.')
    assert p.suggestion == ["--disable-radix-cache", "--mamba-scheduler-strategy extra_buffer"]
    # the call site that brings Qwen3.5 there is a `model_arch in [...]` branch naming it
    site = int(re.search(r"reached from :(\d+) for Qwen3_5ForConditionalGeneration", p.message).group(1))
    lines = (sglang_source_tree(version) / "srt" / "server_args.py").read_text().splitlines()
    assert "self._handle_mamba_radix_cache(" in lines[site - 1]
    branch = next(i for i in range(site - 1, 0, -1) if re.match(r"\s*(el)?if model_arch", lines[i]))
    assert '"Qwen3_5ForConditionalGeneration"' in "\n".join(lines[branch:site])


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13.post1"])
@pytest.mark.parametrize("fix", [["--disable-radix-cache"], ["--mamba-scheduler-strategy", "extra_buffer"]])
def test_either_fix_is_accepted(src, version, fix):
    assert errors(src, version, CT129_ARGV + fix) == []


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13.post1"])
def test_an_explicit_no_buffer_is_refused_too_and_said_so(src, version):
    (p,) = errors(src, version, CT129_ARGV + ["--mamba-scheduler-strategy", "no_buffer"])
    assert "--mamba-scheduler-strategy no_buffer (as given)" in p.message


@pytest.mark.parametrize("version", ["0.5.9", "0.5.14", "0.5.15.post1", "0.5.18", "0.5.23"])
def test_ct129_is_accepted_where_sglang_starts(src, version):
    """0.5.9 disables the radix cache itself (a warning); 0.5.14+ choose the strategy themselves."""
    assert "is not compatible with radix cache when using" not in (
        sglang_source_tree(version) / "srt" / "server_args.py").read_text()
    assert errors(src, version, CT129_ARGV) == []


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13.post1"])
def test_a_dense_model_or_no_speculation_or_no_model_config_is_accepted(src, version):
    assert errors(src, version, CT129_ARGV, config=LLAMA) == []
    no_spec = CT129_ARGV[:CT129_ARGV.index("--speculative-algorithm")] + CT129_ARGV[-4:]
    assert errors(src, version, no_spec) == []
    assert errors(src, version, CT129_ARGV, config=None) == []      # config.json not read: nothing said


def test_rocm_disables_the_radix_cache_itself(src):
    """0.5.11 server_args.py: `if is_hip(): ... Automatically disabling radix cache.`"""
    assert errors(src, "0.5.11", CT129_ARGV, hardware={"gpu_model": "AMD Instinct MI300X", "gpu_count": 2}) == []


def test_the_preflight_module_refuses_before_anything_changes():
    args = {"source_dir": str(sglang_source_tree("0.5.11")), "host": "ct129", "argv": CT129_ARGV,
            "model_config": QWEN36, "hardware": A6000X2}
    rc, result, _ = run_module(args, module="sglang_flags")
    assert rc != 0
    assert result["msg"].startswith(
        "ct129: sglang 0.5.11 would refuse to start with these arguments (nothing was changed):\n"
        "  - Qwen3_5ForConditionalGeneration is a hybrid linear-attention (mamba) model, ")
    assert f"sglang/srt/server_args.py:{raise_line('0.5.11')} " in result["msg"]
    assert [p["kind"] for p in result["problems"]] == ["refused_at_start"]
    rc, result, _ = run_module({**args, "argv": CT129_ARGV + ["--disable-radix-cache"]}, module="sglang_flags")
    assert rc == 0, result
    assert result["normalised"]["disable_radix_cache"] is True
