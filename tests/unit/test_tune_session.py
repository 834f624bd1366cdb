"""tune.yml's side of the search (plugins/module_utils/tune/session.py) and its module's plan/record/write
(plugins/modules/sglang_tune.py), on the real 0.5.11 source the lab's ct129 runs."""

import json

import pytest
import yaml
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.tune import search, session
from ansible_collections.sglang.fleet.plugins.modules import sglang_tune

CT129 = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
         "speculative_num_steps": 1, "speculative_eagle_topk": 1, "mem_fraction_static": 0.88,
         "context_length": 131072, "disable_radix_cache": True}
QWEN36 = {"architectures": ["Qwen3_5ForConditionalGeneration"]}
HOST_VARS = """---
# the seeds' host
sglang_version: "0.5.11"
sglang_args:
  model_path: /models/Qwen3.6-27B   # staged by sglang_model
  speculative_algorithm: NEXTN
  speculative_num_steps: 1  # the redeploy's
  # a comment inside the block
  disable_radix_cache: true

# verify's floor
sglang_verify_min_decode_tok_s: 0
"""


@pytest.fixture(scope="module")
def src_0511():
    """The real 0.5.11 wheel's sglang/ package (tests/wheels.py: downloaded and extracted once)."""
    return str(sglang_source_tree("0.5.11"))


def params(src=None, **over):
    p = {"host": "ct129", "space": {"speculative_num_steps": [1, 2, 3, 4, 5]}, "args": dict(CT129),
         "source_dir": src, "model_config": QWEN36, "hardware": {}, "budget_minutes": 20,
         "cost_model": {"restart_s": 15, "measure_s": 10}, "settings": {}, "metric": "decode_tok_s@1",
         "history_file": "", "noise_prior": {"pct": 2, "dof": 4}, "from_audit": False, "state_file": "", "outcome": None, "seconds": None,
         "inventory_file": None, "changes": {}, "limits": {}, "output_check": {}, "verify_shape": {},
         "outputs": None}
    p.update(over)
    return p


def drive(tune, state_file, outcome_of, most=60):
    """The role's loop over the module: next_of, then record with what ``outcome_of(step)`` gives (its
    outcome, and outputs where the step checks them), a state file between the calls. Returns the steps
    asked for and the last one (the result)."""
    state_file.write_text(json.dumps(tune))
    asked = []
    for _ in range(most):
        step = sglang_tune.next_of(json.loads(state_file.read_text()))
        if step["action"] == "done":
            return asked, step
        asked.append(step)
        tune, _ = sglang_tune.record(params(state_file=str(state_file), seconds=20, **outcome_of(step)))
        state_file.write_text(json.dumps(tune))
    raise AssertionError(f"the search was not done after {most} steps")


# ---------------------------------------------------------------------------------------------- plan

def test_the_plan_checks_every_value_against_the_release_and_refuses_what_it_would_refuse(src_0511):
    tune, extra = sglang_tune.plan(params(src_0511, space={"speculative_num_steps": [1, 2, 3],
                                                 "schedule_policy": ["fcfs", "lpm", "shortest-first"]}))
    assert tune["refused"] == [{"flag": "schedule_policy", "value": "shortest-first", "why": tune["refused"][0]["why"]}]
    assert "invalid choice: 'shortest-first'" in tune["refused"][0]["why"]
    # the release's static default is the incumbent of a flag the inventory leaves unset
    assert tune["state"]["incumbent"] == {"speculative_num_steps": 1, "schedule_policy": "fcfs"}
    assert [d["values"] for d in tune["state"]["space"]] == [[1, 2, 3], ["fcfs", "lpm"]]
    assert extra["plan_lines"][0].startswith("ct129: 3 of 3 candidates fit in 20 min at one measurement each")
    assert "noise 2.0 % a run (verify's prior)" in extra["plan_lines"][0]
    assert extra["plan_lines"][-1].startswith("ct129: schedule_policy -> shortest-first: refused by sglang 0.5.11, "
                                              "never started: ")
    assert any(ln.endswith("not tried (sglang_tune_from_audit false): would try enforce_piecewise_cuda_graph false and "
                           "true") for ln in extra["plan_lines"]), extra["plan_lines"]
    step = sglang_tune.next_of(tune)
    assert (step["action"], step["restart"], step["measurements"]) == ("measure", True, 2)
    assert step["args"] == CT129   # the incumbent runs the inventory's flags, a default left unset


@pytest.mark.parametrize("over, message", [
    ({"space": {}, "args": {"model_path": "/m", "tp_size": 2}, "model_config": {"architectures": ["LlamaForCausalLM"]},
      "from_audit": True},
     "the tuning space is empty: this host runs no speculative decoding and the audit finds nothing a switch turns on"),
    ({"space": {"speculative_num_stepz": [1, 2]}}, "speculative_num_stepz: --speculative-num-stepz is not a flag of sglang "
                                                   "0.5.11: it fails with 'unrecognized arguments: --speculative-num-stepz'. "
                                                   "Did you mean --speculative-num-steps"),
    ({"space": {"speculative_num_steps": [2, 3]}}, "speculative_num_steps: the incumbent's value 1 is not among [2, 3]"),
    ({"budget_minutes": 0.5}, "a budget of 30 s is too short for even the incumbent's measurement"),
    ({"space": {"schedule_policy": ["fcfs", "bogus"]}}, "the tuning space is empty: give at least one flag with a value "
                                                        "other than the incumbent's (sglang_tune_space); the installed "
                                                        "release refused schedule_policy=bogus"),
])
def test_a_space_or_budget_that_cannot_be_searched_is_refused_saying_what_to_fix(src_0511, over, message):
    with pytest.raises(session.TuneError) as err:
        sglang_tune.plan(params(src_0511, **over))
    assert message in str(err.value)


def test_a_flag_resolved_only_at_start_up_must_be_given_its_running_value():
    with pytest.raises(session.TuneError, match="cuda_graph_max_bs: not set in sglang_args and resolved by SGLang only "
                                                "at start-up, so the value the host runs now is unknown"):
        session.incumbent({"cuda_graph_max_bs": [16, 32]}, {}, {"schedule_policy": "fcfs"})
    assert session.incumbent({"cuda_graph_max_bs": [16, 32]}, {"cuda_graph_max_bs": 32}, {}) == {"cuda_graph_max_bs": 32}
    # or given null among its values: unset now (SGLang's own choice), tried against the others
    assert session.incumbent({"max_running_requests": [None, 1]}, {}, {}) == {"max_running_requests": None}
    assert session.candidate_args({"tp_size": 1}, {"max_running_requests": None}, {"max_running_requests": 1}) == \
        {"tp_size": 1, "max_running_requests": 1}
    assert session.candidate_args({"tp_size": 1}, {"max_running_requests": None}, {"max_running_requests": None}) == \
        {"tp_size": 1}


def test_a_candidates_flags_change_only_what_differs_from_the_incumbent():
    inc = {"speculative_num_steps": 1, "schedule_policy": "fcfs"}
    args = {"tp_size": 2, "speculative_num_steps": 1}
    assert session.candidate_args(args, inc, {"speculative_num_steps": 3, "schedule_policy": "fcfs"}) == \
        {"tp_size": 2, "speculative_num_steps": 3}   # the unset default stays unset
    assert session.candidate_args(args, inc, {"speculative_num_steps": 1, "schedule_policy": "lpm"}) == \
        {"tp_size": 2, "speculative_num_steps": 1, "schedule_policy": "lpm"}


def test_the_session_and_the_search_tell_the_incumbents_value_alike():
    """One equality (search.same_value, the search's spelling of a value): a value is the incumbent's when the
    search would key it as the incumbent's, so the session never leaves unchecked, or unchanged, a value the
    search counts as another."""
    assert (search.same_value(3, 3), search.same_value(0.88, 0.88), search.same_value("fcfs", "fcfs")) == (True,) * 3
    assert (search.same_value(1, 1.0), search.same_value(True, 1), search.same_value(None, "")) == (False,) * 3
    assert search.same_value({"a": 1, "b": [2]}, {"b": [2], "a": 1})
    seen = []
    kept, refused = session.check_space({"speculative_num_steps": [1, 1.0, 2]}, {"speculative_num_steps": 1},
                                        {"speculative_num_steps": 1}, lambda args: seen.append(args) or [])
    assert (kept, refused) == ([{"flag": "speculative_num_steps", "values": [1, 1.0, 2]}], [])
    assert seen == [{"speculative_num_steps": 1.0}, {"speculative_num_steps": 2}]   # the incumbent's 1 alone unchecked
    assert session.candidate_args({"tp_size": 2}, {"tp_size": 2}, {"tp_size": 2.0}) == {"tp_size": 2.0}


def test_the_noise_prior_is_the_hosts_history_where_it_has_one(tmp_path):
    history = [{"generated_at": f"2026120{i}T000000Z", "fingerprint": "a", "workload": "w", "passed": True,
                "metrics": {"decode_tok_s@1": v}} for i, v in enumerate([50.0, 51.0, 49.5, 50.5, 50.2, 49.8])]
    sigma, dof, basis = sglang_tune.noise_prior(history, "decode_tok_s@1", {"pct": 2, "dof": 4})
    assert 0.005 < sigma < 0.02 and dof > 4 and "this host's 6 runs" in basis
    assert sglang_tune.noise_prior([], "decode_tok_s@1", {"pct": 2, "dof": 4}) == (0.02, 4, "verify's prior")
    with pytest.raises(session.TuneError, match="no run-to-run noise is known"):
        sglang_tune.noise_prior([], "decode_tok_s@1", {"pct": 0, "dof": 4})


# ------------------------------------------------------------------------------------ record, the answer

def test_a_whole_search_through_the_module_state_file_finds_the_peak_and_answers(src_0511, tmp_path):
    """The module's plan and record calls with a state file between them, as the role makes them: a
    surface peaking at 4 steps (the simulator's default shape), a start at 5 steps that runs out of memory."""
    state_file = tmp_path / "state.json"
    tune, _extra = sglang_tune.plan(params(src_0511, state_file=str(state_file)))
    speed = {1: 38.7, 2: 48.6, 3: 53.4, 4: 54.8}

    def outcome_of(step):
        steps = step["candidate"]["speculative_num_steps"]
        return {"outcome": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n[2026-12-06] "
                           "Received sigquit from a child process" if steps == 5 else
                           [speed[steps] * (1 + 0.004 * ((i % 3) - 1)) for i in range(step["measurements"])]}

    _asked, step = drive(tune, state_file, outcome_of, most=40)
    result = step["result"]
    assert result["won"] and result["winner"]["speculative_num_steps"] in (3, 4), result["message"]
    assert session.left_on_table(result).endswith(f"speculative_num_steps 1 -> {result['winner']['speculative_num_steps']}")
    rows = {r["changes"].get("speculative_num_steps", [None, 1])[1]: r for r in result["rows"]}
    assert rows[5]["verdict"] == "infeasible"
    assert rows[5]["why"] == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    lines = session.answer_lines("ct129", result, "decode_tok_s@1")
    assert lines[0].startswith("ct129: tuned decode_tok_s@1: the winner +")
    assert any("speculative_num_steps 1 -> 5: - x0, infeasible: torch.OutOfMemoryError" in ln for ln in lines), lines
    with pytest.raises(session.TuneError, match="is done: there is nothing more to record"):
        sglang_tune.record(params(state_file=str(state_file), outcome=[50.0]))


A6000X2 = {"source": "declared", "gpu_count": 2, "gpu_model": "NVIDIA RTX A6000"}
QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"]}


def test_the_plan_refuses_a_value_the_projects_own_checks_refuse_before_it_starts(src_0511):
    """The release's parser accepts tp_size 4; deploy's preflight (host/args.py) knows the host has 2 GPUs."""
    tune, extra = sglang_tune.plan(params(src_0511, args={"model_path": "/models/Qwen3-8B", "tp_size": 1},
                                          model_config=QWEN3_8B, hardware=A6000X2, space={"tp_size": [1, 2, 4]}))
    assert [(r["flag"], r["value"]) for r in tune["refused"]] == [("tp_size", 4)]
    assert "these arguments need 4 GPU(s) per node (tp_size 4) but the host has 2 (declared)" in tune["refused"][0]["why"]
    assert [d["values"] for d in tune["state"]["space"]] == [[1, 2]]
    assert any(ln.startswith("ct129: tp_size -> 4: refused by sglang 0.5.11, never started: these arguments need 4 GPU(s)")
               for ln in extra["plan_lines"]), extra["plan_lines"]


def test_a_candidate_of_two_flags_that_could_not_start_is_refused_whole_and_never_started(src_0511, tmp_path):
    """tp_size 2 and dp_size 2 each fit 2 GPUs on the incumbent's flags (the plan checks each value alone);
    together they need 4. The search moves tp_size to 2, then asks for dp_size 2 on top of it: that pair is
    recorded as infeasible with the reason, and no step ever restarts the host with it."""
    state_file = tmp_path / "state.json"
    tune, _ = sglang_tune.plan(params(src_0511, args={"model_path": "/models/Qwen3-8B", "tp_size": 1},
                                      model_config=QWEN3_8B, hardware=A6000X2, space={"tp_size": [1, 2], "dp_size": [1, 2]},
                                      budget_minutes=60))

    def outcome_of(step):
        c = step["candidate"]
        return {"outcome": [100 * (1.3 if c["tp_size"] == 2 else 1) * (1.25 if c["dp_size"] == 2 else 1)] * step["measurements"]}

    asked, step = drive(tune, state_file, outcome_of)
    started = [s["candidate"] for s in asked if s["restart"]]
    result = step["result"]
    assert {"tp_size": 2, "dp_size": 2} not in started, started
    pair = next(r for r in result["rows"] if set(r["changes"]) == {"tp_size", "dp_size"})
    assert pair["verdict"] == "infeasible" and pair["measurements"] == 0, pair
    assert pair["why"].startswith("refused by sglang 0.5.11, never started: these arguments need 4 GPU(s) per node "
                                  "(tp_size 2 x dp_size 2) but the host has 2 (declared)"), pair["why"]
    assert result["won"] and result["winner"]["tp_size"] == 2 and result["restarts"] == len(started), result


@pytest.mark.parametrize("text, reason", [
    ("ct129: sglang exited during start-up, after 12 s\n--- last 40 lines ---\n[x] server_args=...\n"
     "Traceback (most recent call last):\n  File \"a.py\", line 3\nRuntimeError: Not enough memory. Please try to "
     "increase --mem-fraction-static. Current value: mem_fraction_static=0.5\nReceived sigquit from a child process.",
     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5"),
    ("ValueError: speculative decoding is not supported with the radix cache\nReceived sigquit from a child process.",
     "ValueError: speculative decoding is not supported with the radix cache"),
    ("sglang on ct129 did not answer http://127.0.0.1:30000/health_generate with 200 within 600 s.\nloading...",
     "sglang on ct129 did not answer http://127.0.0.1:30000/health_generate with 200 within 600 s."),
    ("", "the start failed without a log line"),
])
def test_a_failed_start_is_recorded_with_the_line_that_says_why(text, reason):
    assert session.failure_reason(text) == reason
    # only an out-of-memory line rules out the larger memory values (search.OUT_OF_MEMORY)
    assert search._out_of_memory(reason) == ("memory" in reason.lower())


# ------------------------------------------------------------------------------------------ the write

def test_the_winner_is_written_line_by_line_keeping_comments_order_and_layout():
    after = session.edit_args_block(HOST_VARS, {"speculative_num_steps": 3, "schedule_policy": "lpm",
                                                "disable_radix_cache": None})
    assert after == HOST_VARS.replace("speculative_num_steps: 1  # the redeploy's", "speculative_num_steps: 3  # the redeploy's") \
        .replace("  disable_radix_cache: true\n", "  schedule_policy: lpm\n")
    assert yaml.safe_load(after)["sglang_args"] == {"model_path": "/models/Qwen3.6-27B", "speculative_algorithm": "NEXTN",
                                                    "speculative_num_steps": 3, "schedule_policy": "lpm"}


@pytest.mark.parametrize("value, text", [(True, "true"), (0.85, "0.85"), (8192, "8192"), ("fcfs", "fcfs"),
                                         ("on", '"on"'), ("a b", '"a b"'), ("1.5", '"1.5"')])
def test_values_are_written_as_yaml_reads_them_back(value, text):
    assert session.yaml_scalar(value) == text
    assert yaml.safe_load(f"x: {text}")["x"] == value


@pytest.mark.parametrize("content, message", [
    ("sglang_version: '0.5.11'\n", "the file does not set sglang_args itself"),
    ("sglang_args: {tp_size: 2}\n", "written as a flow mapping"),
    ("sglang_args:\n  json_model_override_args:\n    a: 1\n  speculative_num_steps: 1\n", None),
])
def test_a_file_that_cannot_be_edited_line_by_line_is_refused(content, message):
    if message is None:   # a nested value elsewhere in the block is kept as it is
        after = session.edit_args_block(content, {"speculative_num_steps": 3})
        assert yaml.safe_load(after)["sglang_args"] == {"json_model_override_args": {"a": 1}, "speculative_num_steps": 3}
        return
    with pytest.raises(session.TuneError, match=message):
        session.edit_args_block(content, {"speculative_num_steps": 3})


class _Module:
    check_mode = False

    def exit_json(self, **kw):
        raise _Exit(kw)

    def fail_json(self, **kw):
        raise AssertionError(kw)


class _Exit(Exception):
    pass


def test_the_write_action_edits_the_hosts_file_and_returns_its_args_and_diff(tmp_path):
    path = tmp_path / "ct129.yml"
    path.write_text(HOST_VARS)
    path.chmod(0o640)
    with pytest.raises(_Exit) as out:
        sglang_tune.write(_Module(), params(inventory_file=str(path), changes={"speculative_num_steps": 4}))
    res = out.value.args[0]
    assert res["changed"] and res["args"]["speculative_num_steps"] == 4
    assert "-  speculative_num_steps: 1  # the redeploy's\n+  speculative_num_steps: 4  # the redeploy's" in res["diff_text"]
    assert path.read_text().startswith("---\n# the seeds' host\n") and oct(path.stat().st_mode & 0o777) == "0o640"


def test_the_write_action_refuses_a_host_whose_flags_come_from_a_group_file(tmp_path):
    path = tmp_path / "ct129.yml"
    path.write_text("sglang_verify_min_decode_tok_s: 0\n")
    with pytest.raises(session.TuneError) as err:
        sglang_tune.write(_Module(), params(inventory_file=str(path), changes={"speculative_num_steps": 4}))
    assert "its sglang_args may come from a group's file, which other hosts (maybe of other hardware) share" in str(err.value)
    assert "write the winner by hand: speculative_num_steps unset -> 4" in str(err.value)
    assert path.read_text() == "sglang_verify_min_decode_tok_s: 0\n"


def test_without_a_space_the_seeds_host_tries_its_mtp_steps_and_what_the_release_auto_disables(src_0511):
    """The seeds' ct129 (0.5.11, 2x A6000, Qwen3.6 classified multimodal) with no sglang_tune_space: its
    MTP steps 1-5, and the piecewise CUDA graph that 0.5.11 auto-disables for a multimodal model, off and
    on; FlashInfer all-reduce fusion needs SM90+ and is listed with its rule, never tried."""
    a6000 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6", "source": "declared"}
    tune, extra = sglang_tune.plan(params(src_0511, space={}, hardware=a6000, from_audit=True))
    assert {d["flag"]: d["values"] for d in tune["state"]["space"]} == {
        "speculative_num_steps": [1, 2, 3, 4, 5], "enforce_piecewise_cuda_graph": [False, True]}
    lines = extra["plan_lines"]
    assert any(ln.startswith("ct129: prefill/piecewise CUDA graph: auto-disabled here: ") and
               ln.endswith("(sglang/srt/server_args.py:1229): trying enforce_piecewise_cuda_graph false and true")
               for ln in lines), lines
    assert any(ln.startswith("ct129: FlashInfer all-reduce fusion: unavailable on this hardware: ") and
               ln.endswith("(sglang/srt/server_args.py:2330): not tried") for ln in lines), lines
    assert any("single-batch overlap: off by default" in ln and "add enable_single_batch_overlap: [false, true] to "
               "sglang_tune_space to try it" in ln for ln in lines), lines


def test_the_default_space_walks_the_steps_only_with_one_draft_token_per_step():
    assert session.default_space({"speculative_algorithm": "EAGLE", "speculative_num_steps": 6}) == \
        {"speculative_num_steps": [1, 2, 3, 4, 5, 6, 7, 8]}
    assert session.default_space({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                                  "speculative_eagle_topk": 4}) == {}
    assert session.default_space({"tp_size": 2}) == {}


def test_the_audit_tries_only_switches_that_turn_a_thing_on_and_nothing_without_a_gpu():
    findings = [
        {"name": "decode CUDA graph", "status": "auto-disabled", "reason": "torch_native", "override": "--disable-cuda-graph",
         "how_to_enable": None, "rule_file": "sglang/srt/arg_groups/attention_hook.py", "rule_line": 124},
        {"name": "prefill/piecewise CUDA graph", "status": "auto-disabled", "reason": "multimodal",
         "override": "--enforce-piecewise-cuda-graph", "how_to_enable": "add it", "rule_file": "f.py", "rule_line": 1}]
    flags = {"--disable-cuda-graph": {"dest": "disable_cuda_graph", "action": "store_true"},
             "--enforce-piecewise-cuda-graph": {"dest": "enforce_piecewise_cuda_graph", "action": "store_true"}}
    added, lines = session.audit_candidates(findings, flags, {})
    assert added == {"enforce_piecewise_cuda_graph": [False, True]}
    assert lines[0] == ("decode CUDA graph: auto-disabled here: torch_native (sglang/srt/arg_groups/attention_hook.py:124): "
                        "not tried (no switch turns it on; add it to sglang_tune_space)")
    added, lines = session.audit_candidates(findings, flags, {}, gpu=False)   # the lab's cpu1
    assert added == {} and all("not tried" in ln for ln in lines), lines
