"""The mapping -> argv filter: what ends up on the SGLang command line and in the unit."""

import importlib.util
import pathlib

import pytest
from ansible.errors import AnsibleFilterError

REPO = pathlib.Path(__file__).resolve().parents[2]


def _load_filters():
    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "plugins" / "filter" / "sglang_args.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FilterModule().filters()


FILTERS = _load_filters()
CT129 = {
    "tp_size": 2,
    "model_path": "/models/Qwen3.6-27B",
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "mem_fraction_static": 0.88,
    "context_length": 131072,
    "enable_metrics": True,
    "disable_custom_all_reduce": False,
    "chunked_prefill_size": None,
}


def test_ct129_argv_is_model_first_then_sorted():
    assert FILTERS["sglang_argv"](CT129) == [
        "--model-path", "/models/Qwen3.6-27B",
        "--context-length", "131072",
        "--enable-metrics",
        "--mem-fraction-static", "0.88",
        "--speculative-algorithm", "NEXTN",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
        "--speculative-num-steps", "3",
        "--tp-size", "2",
    ]


def test_argv_is_independent_of_key_order_and_spelling():
    shuffled = dict(reversed(list(CT129.items())))
    shuffled["tp-size"] = shuffled.pop("tp_size")
    assert FILTERS["sglang_argv"](shuffled) == FILTERS["sglang_argv"](CT129)


def test_lists_and_json_values():
    argv = FILTERS["sglang_argv"]({
        "cuda_graph_bs": [1, 2, 4],
        "json_model_override_args": {"rope_scaling": {"type": "yarn", "factor": 4.0}, "a": 1},
    })
    assert argv == [
        "--cuda-graph-bs", "1", "2", "4",
        "--json-model-override-args", '{"a":1,"rope_scaling":{"factor":4.0,"type":"yarn"}}',
    ]


def test_unit_lines_quote_for_systemd():
    lines = FILTERS["sglang_unit_lines"]({
        "model_path": "/models/My Model",
        "json_model_override_args": {"k": "50%$HOME"},
        "tp_size": 2,
    })
    assert lines == [
        '--model-path "/models/My Model"',
        '--json-model-override-args "{\\"k\\":\\"50%%$$HOME\\"}"',
        "--tp-size 2",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"api_key": "s3cret"}, "sglang_argv: sglang_args.api_key is a secret and would be visible in the unit "
         "file and in the process list; set it in sglang_service_secrets.SGLANG_API_KEY (kept in a "
         "root-only EnvironmentFile) instead"),
        ({"ssl_keyfile_password": "s3cret"}, "sglang_argv: sglang_args.ssl_keyfile_password is a secret and would "
         "be visible in the unit file and in the process list; set it in "
         "sglang_service_secrets.SGLANG_SSL_KEYFILE_PASSWORD (kept in a root-only EnvironmentFile) instead"),
        ({"--tp-size": 2}, "sglang_argv: sglang_args: '--tp-size' is not an SGLang argument name; use the "
         "argparse dest in lower case, e.g. tp_size for --tp-size"),
        ({"served_model_name": ""}, "sglang_argv: sglang_args.served_model_name: empty string; remove the key "
         "(or set it to null) to use SGLang's default"),
        ({"cuda_graph_bs": []}, "sglang_argv: sglang_args.cuda_graph_bs: empty list; remove the key to use "
         "SGLang's default"),
        ({"mem_fraction_static": float("nan")}, "sglang_argv: sglang_args.mem_fraction_static: nan is not a "
         "finite number"),
        (["--tp-size", "2"], "sglang_argv: sglang_args is a list, not a mapping: write each SGLang flag as a key "
         "(its argparse dest: tp_size for --tp-size) with its value, true for a flag without one, e.g. "
         "sglang_args: {tp_size: 2, enable_metrics: true}"),
        ("--tp-size 2", "sglang_argv: sglang_args is a string, not a mapping: write each SGLang flag as a key "
         "(its argparse dest: tp_size for --tp-size) with its value, true for a flag without one, e.g. "
         "sglang_args: {tp_size: 2, enable_metrics: true}"),
    ],
)
def test_bad_values_are_rejected_with_a_fix(args, message):
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["sglang_argv"](args)
    assert str(err.value) == message


def _load_fleet_filters():
    spec = importlib.util.spec_from_file_location("fleet_filters", REPO / "plugins" / "filter" / "fleet_vars.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FilterModule().filters()


def test_args_that_fit_the_host_have_no_problems():
    assert FILTERS["sglang_args_problems"](CT129, 2, "declared") == []


@pytest.mark.parametrize(
    ("change", "gpus", "problem"),
    [
        ({"tp_size": 4}, 2, "these arguments need 4 GPU(s) per node (tp_size 4) but the host has 2 (declared); "
                            "lower tp_size to at most 2 or fix sglang_hardware.gpu_count"),
        ({"tp_size": 2, "dp_size": 2}, 2, "these arguments need 4 GPU(s) per node (tp_size 2 x dp_size 2) but the "
                                          "host has 2 (declared); lower tp_size to at most 2 or fix "
                                          "sglang_hardware.gpu_count"),
        ({"tp_size": True}, 2, "sglang_args.tp_size is True: it must be a whole number >= 1 (e.g. tp_size: 2, "
                               "without quotes)"),
        ({"port": "30000"}, 2, "sglang_args.port is '30000': it must be a whole number from 1 to 65535"),
        ({"mem_fraction_static": 88}, 2, "sglang_args.mem_fraction_static is 88: it must be a fraction between 0 "
                                         "and 1 (e.g. 0.88)"),
        ({"model_path": None}, 2, "sglang_args.model_path is missing: set it to the model folder on the host (e.g. "
                                  "/models/Qwen3.6-27B) or a Hugging Face repo id"),
    ],
)
def test_args_problems_say_what_to_fix(change, gpus, problem):
    assert FILTERS["sglang_args_problems"]({**CT129, **change}, gpus, "declared") == [problem]


@pytest.mark.parametrize(("args", "kind"), [(["--tp", "2"], "a list"), ("--tp 2", "a string"), (True, "a boolean")])
def test_args_that_are_no_mapping_are_one_problem_with_the_fix(args, kind):
    assert FILTERS["sglang_args_problems"](args, 2, "declared") == [
        f"sglang_args is {kind}, not a mapping: write each SGLang flag as a key (its argparse dest: tp_size for "
        "--tp-size) with its value, true for a flag without one, e.g. sglang_args: {tp_size: 2, enable_metrics: true}"]


def test_dp_attention_shares_the_tp_gpus():
    assert FILTERS["sglang_args_problems"]({**CT129, "dp_size": 2, "enable_dp_attention": True}, 2) == []


def test_misspelled_role_variables_get_a_suggestion():
    unknown = _load_fleet_filters()["unknown_vars"]
    known = ["sglang_service_ready_timeout_s", "sglang_service_user"]
    assert unknown(["sglang_service_ready_timout_s", "sglang_service_user", "other"], known, "sglang_service_") == [
        "unknown variable sglang_service_ready_timout_s: did you mean sglang_service_ready_timeout_s?"]
    assert unknown(["sglang_service_xyzzy_q"], known, "sglang_service_") == [
        "unknown variable sglang_service_xyzzy_q: known sglang_service_* variables: sglang_service_ready_timeout_s, "
        "sglang_service_user"]


def test_misspelled_variables_of_a_role_are_read_against_its_argument_specs(tmp_path):
    unknown_role_vars = _load_fleet_filters()["unknown_role_vars"]
    role = tmp_path / "roles" / "sglang_demo"
    (role / "meta").mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(
        "argument_specs:\n  main:\n    options:\n      sglang_demo_timeout_s: {type: int}\n      sglang_version: {type: str}\n")
    assert unknown_role_vars(["sglang_demo_timeout_s", "sglang_version", "other"], str(role)) == []
    assert unknown_role_vars(["sglang_demo_timout_s"], str(role) + "/") == [
        "unknown variable sglang_demo_timout_s: did you mean sglang_demo_timeout_s?"]


def test_env_file_lines_are_quoted_for_systemd():
    assert FILTERS["env_file_line"]("HF_TOKEN", 'a"b$c\\d`e') == 'HF_TOKEN="a\\"b\\$c\\\\d\\`e"'
    with pytest.raises(AnsibleFilterError, match=r"sglang_service_secrets.HF_TOKEN: the value contains a newline \(\\n\)"):
        FILTERS["env_file_line"]("HF_TOKEN", "a\nb")


@pytest.mark.parametrize(
    ("args", "url"),
    [
        ({}, "http://127.0.0.1:30000"),
        ({"host": "0.0.0.0", "port": 8000}, "http://127.0.0.1:8000"),
        ({"host": "::", "port": 8000}, "http://127.0.0.1:8000"),
        ({"host": "10.0.0.5", "port": 31000}, "http://10.0.0.5:31000"),
    ],
)
def test_local_url_reaches_a_wildcard_bind_through_loopback(args, url):
    assert FILTERS["sglang_local_url"](args) == url
