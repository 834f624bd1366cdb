"""sglang_source against real SGLang wheels from PyPI (the facts in shared/notes/sglang-facts.md)."""
import pytest
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    build_parser,
    normalise_argv,
    predict,
    validate_argv,
)

pytestmark = pytest.mark.wheels

ERAS = {"0.4.10.post2": "A", "0.5.6": "A", "0.5.9": "A", "0.5.11": "A", "0.5.13.post1": "A",
        "0.5.16": "B", "0.5.18": "B", "0.5.19": "B", "0.5.20": "C", "0.5.23": "C"}
A6000x2 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6",
           "source": "declared"}
H100x2 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "compute_capability": "9.0",
          "source": "declared"}
QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "max_position_embeddings": 262144}
CT129_ARGV = ["--model-path", "/models/Qwen3.6-27B", "--tp", "2", "--speculative-algorithm", "NEXTN",
              "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4", "--mem-fraction-static", "0.88",
              "--context-length", "131072"]


@pytest.mark.parametrize("version", sorted(ERAS))
def test_version_and_era(src, version):
    s = src(version)
    assert s.version == version
    assert s.era == ERAS[version]


# Counted against the real argparse parser (tests/source/test_real_parser.py); without -h/--help.
@pytest.mark.parametrize(("version", "count"), [
    ("0.5.11", 387), ("0.5.13.post1", 419), ("0.5.18", 506), ("0.5.20", 513), ("0.5.23", 559)])
def test_option_counts(src, version, count):
    opts = [o for f in src(version).flags for o in f.option_strings]
    assert len(opts) == len(set(opts)) == count


def test_enforce_piecewise_real_flag_on_0_5_11(src):
    s = src("0.5.11")
    f = s.by_option["--enforce-piecewise-cuda-graph"]
    assert (f.dest, f.action, f.default, f.deprecated_alias_of) == (
        "enforce_piecewise_cuda_graph", "store_true", False, None)
    assert validate_argv(s, ["--model-path", "m", "--enforce-piecewise-cuda-graph"]) == []


def test_enforce_piecewise_deprecated_alias_on_0_5_18(src):
    s = src("0.5.18")
    f = s.by_option["--enforce-piecewise-cuda-graph"]
    assert f.action == "DeprecatedStoreConstAction"
    assert f.dest == "cuda_graph_backend_prefill"
    assert f.const == "tc_piecewise"
    assert f.deprecated_alias_of == "--cuda-graph-backend-prefill=tc_piecewise"
    [p] = validate_argv(s, ["--model-path", "m", "--enforce-piecewise-cuda-graph"])
    assert (p.kind, p.severity, p.suggestion) == (
        "renamed", "warning", ["--cuda-graph-backend-prefill=tc_piecewise"])
    assert normalise_argv(s, ["--enforce-piecewise-cuda-graph"]) == {
        "cuda_graph_backend_prefill": "tc_piecewise"}


def test_enforce_piecewise_rejected_on_0_5_20(src):
    s = src("0.5.20")
    assert not s.has("--enforce-piecewise-cuda-graph")
    [p] = validate_argv(s, ["--model-path", "m", "--enforce-piecewise-cuda-graph"])
    assert p.kind == "removed"
    assert p.suggestion == ["--cuda-graph-backend-prefill tc_piecewise"]
    assert p.message.startswith("--enforce-piecewise-cuda-graph is not a flag of sglang 0.5.20 (")
    assert p.message.endswith("it fails with 'unrecognized arguments: --enforce-piecewise-cuda-graph'. "
                              "In 0.5.20 use --cuda-graph-backend-prefill tc_piecewise.")
    with pytest.raises(SystemExit):
        build_parser(s).parse_args(["--model-path", "m", "--enforce-piecewise-cuda-graph"])


def test_enforce_piecewise_replacement_on_0_5_23_is_breakable(src):
    # 0.5.23's parse_cuda_graph_backend_arg rejects tc_piecewise ("tc_piecewise was removed")
    [p] = validate_argv(src("0.5.23"), ["--model-path", "m", "--enforce-piecewise-cuda-graph"])
    assert p.suggestion == ["--cuda-graph-backend-prefill breakable"]


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_cuda_graph_max_bs_ambiguous(src, version, capsys):
    s = src(version)
    [p] = validate_argv(s, ["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert p.kind == "ambiguous"
    assert p.suggestion == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
    assert "'ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, " \
           "--cuda-graph-max-bs-prefill'" in p.message
    with pytest.raises(SystemExit):
        build_parser(s).parse_args(["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert capsys.readouterr().err.endswith(
        "error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill\n")


@pytest.mark.parametrize("version", ["0.5.11", "0.5.18"])
def test_cuda_graph_max_bs_accepted_before_0_5_20(src, version):
    assert normalise_argv(src(version), ["--cuda-graph-max-bs", "8"]) in (
        {"cuda_graph_max_bs": 8}, {"cuda_graph_max_bs_decode": 8})


@pytest.mark.parametrize("version", sorted(ERAS))
def test_tp_normalises_to_tp_size(src, version):
    assert normalise_argv(src(version), ["--tp", "2"]) == {"tp_size": 2}
    assert normalise_argv(src(version), ["--tensor-parallel-size=4", "--tp-size", "2"]) == {"tp_size": 2}


def test_unknown_flag_suggests_close_matches(src):
    [p] = validate_argv(src("0.5.11"), ["--model-path", "m", "--mem-fraction-statc", "0.8"])
    assert p.kind == "unknown"
    assert p.suggestion[0] == "--mem-fraction-static"
    assert p.message == ("--mem-fraction-statc is not a flag of sglang 0.5.11: it fails with "
                         "'unrecognized arguments: --mem-fraction-statc'. Did you mean "
                         "--mem-fraction-static?")


def test_bad_choice_and_type(src):
    s = src("0.5.11")
    probs = validate_argv(s, ["--model-path", "m", "--tokenizer-mode", "fast", "--tp", "two"])
    assert [(p.flag, p.kind) for p in probs] == [("--tokenizer-mode", "bad_choice"),
                                                   ("--tp", "bad_type")]
    assert probs[0].suggestion == ["auto", "slow"]
    assert "invalid choice: 'fast' (choose from 'auto', 'slow')" in probs[0].message
    assert "invalid int value: 'two'" in probs[1].message


def test_multimodal_archs(src):
    assert "Qwen3_5ForConditionalGeneration" not in src("0.5.6").rules["multimodal_model_archs"].data["archs"]
    for v in ("0.5.9", "0.5.11", "0.5.18", "0.5.23"):
        assert "Qwen3_5ForConditionalGeneration" in src(v).rules["multimodal_model_archs"].data["archs"]
    assert "multimodal_breakable_cuda_graph_supported_model_archs" not in src("0.5.13.post1").rules
    for v in ("0.5.16", "0.5.18", "0.5.23"):
        assert "Qwen3_5ForConditionalGeneration" in src(v).rules[
            "multimodal_breakable_cuda_graph_supported_model_archs"].data["archs"]


@pytest.mark.parametrize(("version", "n_archs", "h20", "qwen35"), [
    ("0.5.9", 6, True, False), ("0.5.11", 11, True, True), ("0.5.13.post1", 13, False, True),
    ("0.5.20", 19, False, True), ("0.5.23", 19, False, True)])
def test_fusion_rule(src, version, n_archs, h20, qwen35):
    r = src(version).rules["flashinfer_allreduce_fusion_auto_enable"]
    assert len(r.data["archs"]) == n_archs
    assert r.data["excludes_h20"] is h20
    assert ("Qwen3_5ForConditionalGeneration" in r.data["archs"]) is qwen35


@pytest.mark.parametrize("version", ["0.5.9", "0.5.11", "0.5.13.post1", "0.5.18", "0.5.20", "0.5.23"])
def test_fusion_never_on_sm86(src, version):
    s = src(version)
    f = _finding(predict(s, {"tp_size": 2}, A6000x2, QWEN36), "FlashInfer all-reduce fusion")
    assert f.status == "unavailable on this hardware"
    assert "SM86" in f.reason


@pytest.mark.parametrize("version", ["0.5.11", "0.5.18", "0.5.23"])
def test_fusion_on_two_nodes_of_an_unknown_gpu_says_why_it_is_off(src, version):
    """A multi-node server whose GPUs the controller cannot see (no declaration, no nvidia-smi): the
    prediction names both reasons; it raised TypeError (None // 10) on releases with the SM100 exception."""
    f = _finding(predict(src(version), {"tp_size": 8, "nnodes": 2}, {}, QWEN36), "FlashInfer all-reduce fusion")
    assert f.status == "off by default" and "compute capability unknown" in f.reason, f
    assert "more than one node" in f.reason or version == "0.5.11", f


def test_fusion_on_for_h100_tp2(src):
    s = src("0.5.11")
    f = _finding(predict(s, {"tp_size": 2}, H100x2, QWEN36), "FlashInfer all-reduce fusion")
    assert (f.status, f.rule_file, f.rule_line) == ("on", "sglang/srt/server_args.py", 2330)


def test_ct129_on_0_5_11(src):
    """What the seeds found by hand on ct129 (Qwen3.6-27B, 2x A6000, tp 2, NEXTN 3/1/4)."""
    s = src("0.5.11")
    args = normalise_argv(s, CT129_ARGV)
    findings = {f.name: f for f in predict(s, args, A6000x2, QWEN36)}
    pw = findings["prefill/piecewise CUDA graph"]
    assert (pw.status, pw.rule_file, pw.rule_line, pw.override) == (
        "auto-disabled", "sglang/srt/server_args.py", 1229, "--enforce-piecewise-cuda-graph")
    assert "multimodal" in pw.reason
    fu = findings["FlashInfer all-reduce fusion"]
    assert fu.status == "unavailable on this hardware"
    for name, flag in (("single-batch overlap", "--enable-single-batch-overlap"),
                       ("two-batch overlap", "--enable-two-batch-overlap")):
        assert findings[name].status == "off by default"
        assert findings[name].how_to_enable.startswith(f"add {flag}")
    sp = findings["speculative decoding"]
    assert sp.status == "on"
    assert sp.value == {"algorithm": "EAGLE", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
    assert findings["custom all-reduce"].status == "on"
    assert findings["mem_fraction_static"].value == 0.88
    assert findings["context_length"].value == 131072


def test_ct129_on_0_5_18_prefill_graph_back_on(src):
    s = src("0.5.18")
    f = _finding(predict(s, normalise_argv(s, CT129_ARGV), A6000x2, QWEN36),
                 "prefill/piecewise CUDA graph")
    assert (f.status, f.value, f.override) == ("on", "breakable", "--cuda-graph-backend-prefill")


def test_speculative_defaults_when_unset(src):
    s = src("0.5.20")
    f = _finding(predict(s, {"speculative_algorithm": "NEXTN"}, A6000x2, QWEN36), "speculative decoding")
    assert f.value == {"algorithm": "EAGLE", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
    assert f.rule_file == "sglang/srt/arg_groups/speculative_hook.py"


@pytest.mark.parametrize("version, line", [("0.5.11", "sglang/srt/server_args.py:3539"),
                                           ("0.5.23", "sglang/srt/arg_groups/speculative_hook.py:1255")])
def test_topk_1_makes_the_draft_tokens_steps_plus_one_as_the_real_server_resolves(src, version, line):
    """tune.yml's lab run found it: ct129 with 1 MTP step and no draft tokens set serves EAGLE 1/1/2 (the
    release sets steps + 1 for topk 1 after filling the auto-chosen 4), not 1/1/4."""
    s = src(version)
    args = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1, "speculative_eagle_topk": 1}
    f = _finding(predict(s, args, A6000x2, QWEN36), "speculative decoding")
    assert f.value == {"algorithm": "EAGLE", "num_steps": 1, "eagle_topk": 1, "num_draft_tokens": 2}
    assert f"{f.rule_file}:{f.rule_line}" == line and "with topk 1 the draft tokens become steps + 1" in f.reason
    f = _finding(predict(s, {**args, "speculative_num_steps": 3, "speculative_num_draft_tokens": 4}, A6000x2, QWEN36),
                 "speculative decoding")
    assert f.value["num_draft_tokens"] == 4 and "steps + 1" not in f.reason


def _finding(findings, name):
    return next(f for f in findings if f.name == name)


# ---- issue #11: releases outside ERAS where a defect showed (downloaded on first use, not in VERSIONS)
B200x2 = {"gpu_model": "NVIDIA B200", "gpu_count": 2, "compute_capability": "10.0", "source": "declared"}
GPT_OSS = {"architectures": ["GptOssForCausalLM"]}


def test_deprecated_action_raises_on_0_5_3(src):
    """<= 0.5.7 DeprecatedAction is `raise ValueError(self.help)`: the server dies at start."""
    s = src("0.5.3")
    f = s.by_option["--enable-ep-moe"]
    assert (f.action, f.removed_exception) == ("DeprecatedAction", "ValueError")
    [p] = validate_argv(s, ["--model-path", "m", "--tp-size", "4", "--enable-ep-moe"])
    assert (p.kind, p.severity, p.suggestion) == ("removed", "error", ["--ep-size 4"])
    assert p.message == (
        "--enable-ep-moe is removed in sglang 0.5.3: the server dies at start with 'ValueError: NOTE: "
        "--enable-ep-moe is deprecated. Please set `--ep-size` to the same value as `--tp-size` instead.' "
        "(its DeprecatedAction raises it while parsing the arguments). Use --ep-size 4 instead.")
    [p] = validate_argv(s, ["--model-path", "m", "--enable-triton-kernel-moe"])
    assert (p.kind, p.severity, p.suggestion) == ("removed", "error", ["--moe-runner-backend triton_kernel"])
    with pytest.raises(ValueError, match="^NOTE: --enable-ep-moe is deprecated"):
        build_parser(s).parse_args(["--model-path", "m", "--enable-ep-moe"])


def test_deprecated_action_only_warns_on_0_5_9(src):
    s = src("0.5.9")
    assert s.by_option["--hybrid-kvcache-ratio"].removed_exception is None
    [p] = validate_argv(s, ["--model-path", "m", "--hybrid-kvcache-ratio"])
    assert (p.kind, p.severity, p.suggestion) == ("renamed", "warning", [])
    assert p.message == ("--hybrid-kvcache-ratio is deprecated in sglang 0.5.9: still accepted, with a warning, "
                         "but it has no effect; remove it (SGLang's help points to --swa-full-tokens-ratio).")


def test_prefill_graph_rule_on_0_5_15_post1_is_the_breakable_one(src):
    """0.5.15.post1 has no breakable allow-list, but its CUDA default prefill backend is breakable."""
    s = src("0.5.15.post1")
    d = s.rules["default_prefill_backend"]
    assert (d.file, d.line, d.data) == ("sglang/srt/model_executor/cuda_graph_config.py", 101,
                                        {"backend": "breakable"})
    assert "multimodal_breakable_cuda_graph_supported_model_archs" not in s.rules
    f = _finding(predict(s, normalise_argv(s, CT129_ARGV), A6000x2, QWEN36), "prefill/piecewise CUDA graph")
    # forcing the backend skips the rule, but the release's own comment on the rule warns against it
    lines = (sglang_source_tree("0.5.15.post1") / "srt" / "server_args.py").read_text().splitlines()
    assert lines[3373 - 1].strip() == "# Multimodal prefill replay faults under BCG."
    assert '("multimodal model", lambda: self.get_model_config().is_multimodal)' in lines[3374 - 1]
    assert (f.status, f.value, f.rule_file, f.rule_line, f.how_to_enable) == (
        "auto-disabled", "disabled", "sglang/srt/server_args.py", 3374,
        "add --cuda-graph-backend-prefill breakable (an explicit backend skips this rule, but SGLang's own note on "
        "it says: \"Multimodal prefill replay faults under BCG.\"; try it before serving)")
    assert s.rules["multimodal_disables_prefill_graph_breakable"].data["function"] == \
        "_disable_breakable_cudagraph_if_incompatible"
    f = _finding(predict(s, {}, A6000x2, {"architectures": ["Qwen3ForCausalLM"]}), "prefill/piecewise CUDA graph")
    assert (f.status, f.value, f.rule_line) == ("on", "breakable", 101)


@pytest.mark.parametrize(("version", "why"), [
    ("0.4.10.post2", "sglang 0.4.10.post2 has no auto-enable rule, and FlashInfer's all-reduce fusion kernels "
                     "need SM90+"),
    ("0.5.3", "sglang 0.5.3 auto-enables FlashInfer all-reduce fusion only on SM100 (Blackwell), for "
              "GptOssForCausalLM, and its kernels need SM90+")])
def test_fusion_unavailable_on_sm86_before_0_5_9(src, version, why):
    for model in (QWEN36, GPT_OSS):
        f = _finding(predict(src(version), {"tp_size": 2}, A6000x2, model), "FlashInfer all-reduce fusion")
        assert (f.status, f.value, f.how_to_enable) == ("unavailable on this hardware", False, None)
        assert f.reason == f"NVIDIA RTX A6000 is SM86; {why}"


def test_fusion_sm100_model_rule_on_0_5_3(src):
    s = src("0.5.3")
    r = s.rules["flashinfer_allreduce_fusion_auto_enable"]
    assert (r.file, r.line, r.text) == ("sglang/srt/server_args.py", 750, "if is_sm100_supported():")
    assert (r.data["archs"], r.data["sm100_only"], r.data["needs_no_dp_attention"]) == (
        ["GptOssForCausalLM"], True, True)
    on = _finding(predict(s, {"tp_size": 2}, B200x2, GPT_OSS), "FlashInfer all-reduce fusion")
    assert (on.status, on.rule_line) == ("on", 750)
    off = _finding(predict(s, {"tp_size": 2}, H100x2, GPT_OSS), "FlashInfer all-reduce fusion")
    assert (off.status, off.reason, off.how_to_enable) == (
        "off by default", "not auto-enabled: SM90: sglang 0.5.3 auto-enables it only on SM100 (Blackwell)",
        "add --enable-flashinfer-allreduce-fusion")


def test_suggestions_are_flags_on_0_5_22(src):
    """SGLang's new_flag texts are for people; the suggestion must be argv the release accepts."""
    s = src("0.5.22")
    assert s.by_option["--disable-cuda-graph"].deprecated_alias_of == "--cuda-graph-backend-{decode,prefill}=disabled"
    [p] = validate_argv(s, ["--model-path", "m", "--disable-cuda-graph"])
    assert (p.kind, p.severity, p.suggestion) == (
        "renamed", "warning", ["--cuda-graph-backend-decode=disabled --cuda-graph-backend-prefill=disabled"])
    assert s.by_option["--enable-dp-attention"].deprecated_alias_of == "--attn-dp-size <dp-size>"
    [p] = validate_argv(s, ["--model-path", "m", "--dp", "4", "--enable-dp-attention"])
    assert p.suggestion == ["--attn-dp-size 4"]
    assert p.message == ("--enable-dp-attention is a deprecated alias in sglang 0.5.22 (still accepted, with a "
                         "warning); use --attn-dp-size 4 instead.")
    [p] = validate_argv(s, ["--model-path", "m", "--enable-dp-attention"])
    assert p.suggestion == ["--attn-dp-size 1"]   # dp_size defaults to 1


def test_renamed_value_flag_suggestion_carries_the_value(src):
    [p] = validate_argv(src("0.5.18"), ["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert (p.kind, p.suggestion) == ("renamed", ["--cuda-graph-max-bs-decode 8"])
    [p] = validate_argv(src("0.5.20"), ["--model-path", "m", "--piecewise-cuda-graph-tokens", "64", "128"])
    assert (p.kind, p.suggestion) == ("removed", ["--cuda-graph-bs-prefill 64 128"])


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_help_is_not_a_server_flag(src, version, capsys):
    s = src(version)
    for tok, how in (("-h", ""), ("--help", ""), ("--hel", " (argparse expands it to --help)")):
        [p] = validate_argv(s, ["--model-path", "m", tok])
        assert (p.flag, p.kind, p.severity, p.suggestion) == (tok, "help", "error", [])
        assert p.message == (f"{tok} is not a server flag{how}: it is argparse's help option, so sglang "
                             f"{version} would print its usage and exit without starting the server. Remove it.")
        with pytest.raises(SystemExit) as e:   # what the release's parser does with it
            build_parser(s).parse_args(["--model-path", "m", tok])
        assert e.value.code == 0
        assert capsys.readouterr().out.startswith("usage: sglang serve [-h]")
    [p] = validate_argv(s, ["--model-path", "m", "--h", "x"])   # --help is one of the candidates
    assert p.kind == "ambiguous"
    assert p.suggestion[0] == "--help"


# The CUDA-graph rules a CPU host meets (the real 0.5.23 on lab host cpu1 resolved both graphs to
# "disabled" for torch_native: tests/lab/test_real_sglang_lab.py), each at its line in the release.
@pytest.mark.parametrize(("version", "torch_native", "legacy_flag"), [
    ("0.5.11", ("sglang/srt/server_args.py", 2553), None),
    ("0.5.18", ("sglang/srt/server_args.py", 5966), ("sglang/srt/server_args.py", 4507)),
    ("0.5.23", ("sglang/srt/arg_groups/attention_hook.py", 124), ("sglang/srt/arg_groups/cuda_graph_hook.py", 55))])
def test_cuda_graph_off_rules_are_found_where_the_release_has_them(src, version, torch_native, legacy_flag):
    rules = src(version).rules
    assert (rules["torch_native_disables_cuda_graph"].file, rules["torch_native_disables_cuda_graph"].line) \
        == torch_native
    found = rules.get("disable_cuda_graph_disables_prefill_graph")
    assert ((found.file, found.line) if found else None) == legacy_flag


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_torch_native_and_the_legacy_flag_turn_the_prefill_graph_off(src, version):
    tiny = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096}
    native = {f.name: f for f in predict(src(version), {"model_path": "/m", "attention_backend": "torch_native"},
                                         {}, tiny)}
    assert native["prefill/piecewise CUDA graph"].status == native["decode CUDA graph"].status == "auto-disabled"
    legacy = {f.name: f for f in predict(src(version), {"model_path": "/m", "disable_cuda_graph": True}, {}, tiny)}
    assert (legacy["prefill/piecewise CUDA graph"].status, legacy["prefill/piecewise CUDA graph"].value) == \
        ("off by default", "disabled")
    # an explicit prefill backend wins over the legacy flag (it is applied after it)
    explicit = {f.name: f for f in predict(src(version), {"model_path": "/m", "disable_cuda_graph": True,
                                                          "cuda_graph_backend_prefill": "breakable"}, {}, tiny)}
    assert explicit["prefill/piecewise CUDA graph"].status == "on"
