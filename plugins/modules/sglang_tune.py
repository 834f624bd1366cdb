#!/usr/bin/python
"""Ansible module: tune.yml's search, one call between measurements (the state lives in a JSON file)."""

DOCUMENTATION = r"""
module: sglang_tune
short_description: Plan a measured search over SGLang flags, and say what to measure next
description:
  - C(plan) checks every value of O(space) on the host's flags against the installed release's
    parser and start-up refusals (values it refuses are listed with its reason and never started),
    takes the run-to-run noise prior from the host's verify history, and writes the search's first
    state to O(state_file) with the plan (what fits O(budget_minutes)).
  - C(record) adds one measured step (O(outcome) measurements, or why the candidate could not run) to the
    state and says what to do next; once done, the winner with its gain and interval, one row per
    candidate, and the answer's lines.
  - The search itself is plugins/module_utils/tune/search.py (a next-candidate state machine);
    runs on the controller.
options:
  action: {description: What to do., type: str, choices: [plan, record, write], required: true}
  state_file: {description: The search's state (JSON; written by plan; read and rewritten by record)., type: path, required: true}
  host: {description: Name used in messages., type: str, default: ""}
  space:
    description:
      - "plan: flag (dest) -> list of values, or -> {values, ordered, memory_up}."
      - "Empty: the speculative steps around the host's own where it runs EAGLE/MTP with topk 1."
      - "Either way, each optimisation the release auto-disables here that a switch turns on is added (off and on)."
    type: raw
    default: {}
  args: {description: "plan: the host's SGLang flags as the inventory gives them (sglang_host.args).", type: dict, default: {}}
  source_dir: {description: "plan: the C(sglang) package folder of the host's release (the controller's extracted copy).", type: path}
  model_config: {description: "plan: the model's config.json, for the release's start-up refusals.", type: dict, default: {}}
  hardware: {description: "plan: GPU facts (ansible_facts.sglang_gpu).", type: dict, default: {}}
  from_audit: {description: "plan: add what the audit finds a switch turns on here (off and on) to the space.", type: bool, default: true}
  budget_minutes: {description: "plan: the time the search may take.", type: float, default: 60}
  cost_model: {description: "plan: {restart_s, measure_s}: what a restart and a measurement take (the plan's estimate).", type: dict, default: {}}
  settings: {description: "plan: overrides of the search's settings (search.DEFAULTS).", type: dict, default: {}}
  metric: {description: "plan: the figure to maximise (a verify metric, e.g. decode_tok_s@1).", type: str, default: decode_tok_s@1}
  history_file: {description: "plan: the host's verify history (its run-to-run noise); missing: the prior.", type: path, default: ""}
  noise_prior: {description: "plan: {pct, dof}: verify's run-to-run noise prior, used without a history.", type: dict, default: {}}
  limits:
    description: "plan: latency limits, C(<ttft|itl|e2e>_ms_p<50|90|99>@<concurrency>) -> ms; a candidate over one is infeasible."
    type: dict
    default: {}
  output_check:
    description: "plan: the output check's settings {prompts, tokens, min_identical} for flags that can change outputs."
    type: dict
    default: {}
  verify_shape:
    description: "plan: verify's measurement {levels, repeats, requests_per_stream, output_len}: which percentiles it can estimate."
    type: dict
    default: {}
  outcome:
    description:
      - "record: the candidate's measurements (a list), or why it could not run (text: a failed start's output)."
      - "A measurement is verify's benchmark (its sglang_bench results, one per concurrency level): its figure of
        O(metric) and its latencies (for O(limits)) are read with verify's own code. A plain number is a figure
        alone (no latency limit can be judged on it)."
    type: raw
  outputs: {description: "record: the step's greedy outputs (when C(next.check_outputs) asked for them).", type: list, elements: str}
  seconds: {description: "record: the time the step took.", type: float}
  inventory_file: {description: "write: the host's own inventory file (host_vars/<host>.yml) whose sglang_args take the winner.", type: path}
  changes: {description: "write: flag -> value of the winner (null unsets a flag).", type: dict, default: {}}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Plan the search
  sglang.fleet.sglang_tune:
    action: plan
    state_file: reports/ct129/tune-20261206T100000Z.state.json
    space: {speculative_num_steps: [1, 2, 3, 4, 5]}
    args: "{{ sglang_host.args }}"
    source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-0.5.11/sglang
    budget_minutes: 60
  delegate_to: localhost
"""

RETURN = r"""
next:
  description: >-
    What to do now: {action: measure|confirm|done, candidate (flags), args (the inventory's flags with the
    candidate's changes), measurements, restart, why, check_outputs (generate the output check's prompts
    after the restart)}.
  type: dict
  returned: when action is plan or record
progress: {description: "Candidate k of n, time used and left, the best so far (text and figures).", type: dict, returned: when action is plan or record}
plan: {description: "plan: what fits the budget (message, fits, beyond).", type: dict, returned: when action is plan}
plan_lines: {description: "plan: the plan, the noise it judges with and each refused value, as lines.", type: list, returned: when action is plan}
refused: {description: "Values the installed release refuses ({flag, value, why}).", type: list, returned: when action is plan or record}
result: {description: "Once done: won, winner, changes, gain, interval, rows, used_s, ...", type: dict, returned: when done}
lines: {description: "Once done: the answer, one line per candidate.", type: list, returned: when done}
winner_changes:
  description: "Once done: flag -> value of a confirmed winner (empty without one): what the write action takes."
  type: dict
  returned: when done
left_on_table: {description: "Once done: the measured gain and its changes (null without a confirmed win).", type: str, returned: when done}
args: {description: "write: the host's sglang_args as the file now has them.", type: dict, returned: when action is write}
diff: {description: "write: the file before and after.", type: dict, returned: when action is write}
diff_text: {description: "write: the change as a unified diff.", type: str, returned: when action is write}
"""

import dataclasses
import difflib
import json
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    import yaml
except ImportError:   # only the write action reads YAML (Ansible itself needs PyYAML on the controller)
    yaml = None
    YAML_IMPORT_ERROR = traceback.format_exc()
else:
    YAML_IMPORT_ERROR = None

from ansible_collections.sglang.fleet.plugins.module_utils.files import write_atomic
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import ArgsError, check_args, to_argv
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import is_cpu_host
from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    UnknownLayout,
    normalise_argv,
    predict,
    validate_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source.cache import cached_source
from ansible_collections.sglang.fleet.plugins.module_utils.source.model import Runtime
from ansible_collections.sglang.fleet.plugins.module_utils.tune import checks, search, session
from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates, settings


def release_defaults(src):
    """{dest: static default} of the release's flags (a default computed at start-up is left out)."""
    out = {}
    for flag in src.flags:
        if isinstance(flag.default, Runtime) or flag.deprecated_alias_of:
            continue
        default = flag.default
        if default is None and flag.action == "store_true":
            default = False
        if default is not None or flag.action == "store_true":
            out[flag.server_arg] = default
    return out


def noise_prior(history, metric, prior):
    """(sigma, dof, basis): the host's run-to-run noise of ``metric`` from its verify history, moderated
    by verify's prior (gates.noise_estimate), on the workload of its latest run; the prior alone
    without a history."""
    th = {"run_noise_prior_pct": float(prior.get("pct", settings.DEFAULTS["run_noise_prior_pct"])),
          "run_noise_prior_dof": int(prior.get("dof", settings.DEFAULTS["run_noise_prior_dof"]))}
    runs = [r for r in history if isinstance(r, dict) and isinstance(r.get("metrics"), dict) and metric in r["metrics"]]
    if runs:
        shape = sorted(runs, key=lambda r: str(r.get("generated_at", "")))[-1].get("workload")
        est = gates.noise_estimate(metric, [r for r in runs if r.get("workload") == shape], [], th)
        if est["sigma"]:
            return est["sigma"], est["dof"], est["basis"]
    if th["run_noise_prior_pct"] <= 0:
        raise session.TuneError("no run-to-run noise is known: the host has no verify history of this metric and "
                                "verify's prior is 0 (sglang_verify_run_noise_prior_pct): run verify.yml first")
    return th["run_noise_prior_pct"] / 100, th["run_noise_prior_dof"], "verify's prior"


def normalise(src, args):
    """The host's flags as the release's parser reads them (predict's input), or as given where they do not parse."""
    try:
        return normalise_argv(src, to_argv(args))
    except (ValueError, ArgsError):
        return dict(args)


def candidate_problems(src, args, model_config, hardware):
    """Why a candidate's whole inventory flags could not start: the installed release's parser and
    start-up refusals, then the project's own checks (host/args.py, as deploy's preflight runs them)."""
    try:
        argv = to_argv(args)
    except ArgsError as exc:
        return [str(exc)]
    problems = [q.message for q in validate_argv(src, argv, model_config or None, hardware) if q.severity == "error"]
    return problems or check_args(args, (hardware or {}).get("gpu_count"), (hardware or {}).get("source", "declared"))


def refuse_unstartable(tune):
    """Record as infeasible, never started, each next candidate the release or deploy's checks would
    refuse: the plan checked each value alone, so a candidate that changes several flags is checked whole
    here (tune.yml restarts a candidate without deploy's preflight). Leaves a next step that may start."""
    while True:
        step = search.next_step(tune["state"])
        if step["action"] == "done" or not step["restart"] or not tune.get("check"):
            return tune
        incumbent = tune["state"]["incumbent"]
        if sum(not search.same_value(v, incumbent.get(f)) for f, v in step["candidate"].items()) < 2:
            return tune
        why = candidate_problems(cached_source(tune["check"]["source_dir"]),
                                 session.candidate_args(tune["args"], incumbent, step["candidate"]),
                                 tune["check"]["model_config"], tune["check"]["hardware"])
        if not why:
            return tune
        tune["state"] = search.record(tune["state"], step["candidate"],
                                      f"refused by sglang {tune['version']}, never started: {'; '.join(why)}",
                                      seconds=0.0, started=False)


def next_of(tune):
    """next_step with the candidate's inventory flags added, and whether to generate the output check's
    prompts after its restart."""
    step = search.next_step(tune["state"])
    if step["action"] != "done":
        step["args"] = session.candidate_args(tune["args"], tune["state"]["incumbent"], step["candidate"])
        step["check_outputs"] = checks.needs_outputs(tune.get("output_check"), tune["state"]["incumbent"],
                                                     step["candidate"], tune["state"]["measurements"] == 0)
    return step


def plan(p):
    where = f"{p['host']}: " if p["host"] else ""
    try:
        src = cached_source(p["source_dir"], write=True)
    except (UnknownLayout, OSError) as exc:
        raise session.TuneError(f"cannot read the SGLang source in {p['source_dir']}: {exc}. Run deploy.yml first "
                                "(its ml_env role downloads and extracts the release)") from None
    args = dict(p["args"])

    def check(candidate):
        return candidate_problems(src, candidate, p["model_config"], p["hardware"])

    space = p["space"] if p["space"] else session.default_space(args)
    if not isinstance(space, dict):
        raise session.TuneError(f"sglang_tune_space must be a mapping of flag -> list of values: {space!r}")
    findings = [dataclasses.asdict(f) for f in predict(src, normalise(src, args), p["hardware"], p["model_config"] or None)]
    options = {opt: dataclasses.asdict(f) for f in src.flags for opt in f.option_strings}
    added, audit_lines = session.audit_candidates(findings, options, space, gpu=not is_cpu_host(p["hardware"]))
    space = {**space, **(added if p["from_audit"] else {})}
    if not p["from_audit"]:
        audit_lines = [line.replace(": trying ", ": not tried (sglang_tune_from_audit false): would try ")
                       for line in audit_lines]
    if not space:
        raise session.TuneError("the tuning space is empty: this host runs no speculative decoding and the audit finds "
                                "nothing a switch turns on here; set sglang_tune_space to the flags and values to try, "
                                "e.g. {schedule_policy: [fcfs, lpm], chunked_prefill_size: [4096, 8192]}")
    limits, limit_lines = checks.plan_limits(p["limits"], p["verify_shape"]) if p["limits"] else ({}, [])
    output_check, output_lines = checks.plan_output_check(space, p["output_check"])
    known = {f.server_arg for f in src.flags}
    for flag in space:
        if flag not in known:   # the release's own words (renamed, removed, did you mean), not "unknown value"
            raise session.TuneError(f"{flag}: " + ("; ".join(check({**args, flag: True})) or
                                                   f"not a flag of sglang {src.version}") + " (sglang_tune_space)")
    inc = session.incumbent(space, args, release_defaults(src))
    space, refused = session.check_space(space, args, inc, check)
    sigma, dof, basis = noise_prior(gates.read_history_file(p["history_file"]), p["metric"], p["noise_prior"])
    search_settings = dict(p["settings"], noise_sigma=sigma, noise_dof=dof)
    cost = {"restart_s": 180.0, "measure_s": 60.0, **p["cost_model"]}
    try:
        state = search.plan(space, inc, p["budget_minutes"] * 60, cost, search_settings)
    except ValueError as exc:
        extra = ("; the installed release refused " + ", ".join(f"{r['flag']}={r['value']}" for r in refused)
                 if refused else "")
        raise session.TuneError(f"{exc}{extra}") from None
    state["noise"]["basis"] = f"{basis} (the search's prior)"
    tune = {"host": p["host"], "metric": p["metric"], "args": args, "refused": refused, "state": state,
            "version": src.version, "limits": limits, "output_check": output_check,
            "check": {"source_dir": p["source_dir"], "model_config": p["model_config"], "hardware": p["hardware"]}}
    lines = [f"{where}{state['plan']['message']}; noise {sigma * 100:.1f} % a run ({basis})"]
    lines += [f"{where}{line}" for line in audit_lines + limit_lines + output_lines]
    lines += [f"{where}{r['flag']} -> {r['value']}: refused by sglang {src.version}, never started: {r['why']}" for r in refused]
    return refuse_unstartable(tune), {"plan": state["plan"], "plan_lines": lines}


def record(p):
    with open(p["state_file"], encoding="utf-8") as fh:
        tune = json.load(fh)
    step = search.next_step(tune["state"])
    if step["action"] == "done":
        raise session.TuneError(f"the search in {p['state_file']} is done: there is nothing more to record")
    outcome = p["outcome"]
    if isinstance(outcome, str):
        outcome = session.failure_reason(outcome)
    elif isinstance(outcome, list):
        outcome, levels = figures_of(outcome, tune["metric"])
    else:
        raise session.TuneError(f"outcome must be the measurements (a list) or why the candidate failed (text): {outcome!r}")
    measured = len(outcome) if isinstance(outcome, list) else 0
    if measured:
        outcome = held(tune, step, outcome, levels, p)
    tune["state"] = search.record(tune["state"], step["candidate"], outcome, p["seconds"],
                                  measured=measured if isinstance(outcome, str) else 0)
    return refuse_unstartable(tune), {}


def figures_of(measurements, metric):
    """(figures, levels): each measurement's figure of `metric` and its verify levels, read by verify's
    own code (gates.levels, gates.metrics_of) from its benchmark results; a number is a figure alone
    (its levels None)."""
    figures, levels = [], []
    for m in measurements:
        if isinstance(m, (int, float)) and not isinstance(m, bool):
            figures.append(float(m))
            levels.append(None)
            continue
        if not isinstance(m, list):
            raise session.TuneError(f"a measurement must be verify's benchmark results (a list) or a figure: {m!r}")
        try:
            lv = gates.levels(m)
        except (gates.VerifyError, AttributeError) as exc:
            raise session.TuneError(f"a measurement verify cannot read: {exc}") from None
        figure = gates.metrics_of(lv).get(metric)
        if figure is None:
            raise session.TuneError(f"the measurement has no {metric}: verify's concurrency levels must include "
                                    f"{metric.partition('@')[2] or 1} (sglang_verify_concurrency)")
        figures.append(float(figure))
        levels.append(lv)
    return figures, levels


def held(tune, step, figures, levels, p):
    """The step's figures, or why it is infeasible though it ran: over a latency limit, or its greedy
    outputs not the incumbent's (checks.py)."""
    if checks.needs_outputs(tune.get("output_check"), tune["state"]["incumbent"], step["candidate"],
                            tune["state"]["measurements"] == 0):
        if p["outputs"] is None:
            raise session.TuneError("this step changes a flag that can change outputs: record its greedy outputs "
                                    "(outputs), as next.check_outputs asked")
        differ = checks.outputs_differ(tune["output_check"], p["outputs"])
        if differ:
            return differ
    if tune.get("limits"):
        if None in levels:
            raise session.TuneError("latency limits are judged on verify's measurements, not on figures alone")
        over = checks.over_limits(tune["limits"], levels)
        if over:
            return over
    return figures


def write(module, p):
    """The winner's changes into the host's own inventory file, line by line (session.edit_args_block:
    comments, order and layout kept), then read back: the file must parse to what it was with only
    those flags changed, else nothing is written. Refused when the file does not set sglang_args itself
    (they come from a group's file, shared with other hosts)."""
    if yaml is None:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)
    path, host = p["inventory_file"], p["host"] or "this host"
    by_hand = "write the winner by hand: " + session.changes_text({k: [None, v] for k, v in p["changes"].items()})
    try:
        with open(path, encoding="utf-8") as fh:
            before = fh.read()
    except OSError as exc:
        raise session.TuneError(f"cannot read the host's inventory file {path}: {exc}: tune.yml writes the winner into "
                                f"the host's own file (host_vars/{host}.yml) with its sglang_args; {by_hand}") from None
    try:
        after = session.edit_args_block(before, p["changes"])
    except session.TuneError as exc:
        raise session.TuneError(f"{path}: {exc}; its sglang_args may come from a group's file, which other hosts (maybe "
                                f"of other hardware) share: move this host's flags into its own file, or {by_hand}") from None
    old, new = yaml.safe_load(before) or {}, yaml.safe_load(after) or {}
    expected = dict(old, sglang_args={k: v for k, v in dict(old.get("sglang_args") or {}, **p["changes"]).items()
                                      if v is not None})
    if new != expected:
        raise session.TuneError(f"{path}: editing sglang_args line by line would change more than the winner's flags; "
                                f"nothing was written: {by_hand}")
    if after != before and not module.check_mode:
        write_atomic(path, after, mode=os.stat(path).st_mode & 0o7777)
    diff = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), path, path))
    module.exit_json(changed=after != before, args=new["sglang_args"], diff_text=diff,
                     diff={"before": before, "after": after, "before_header": path, "after_header": path})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", choices=["plan", "record", "write"], required=True),
            state_file=dict(type="path", required=True),
            host=dict(type="str", default=""),
            space=dict(type="raw", default={}),
            args=dict(type="dict", default={}),
            source_dir=dict(type="path"),
            model_config=dict(type="dict", default={}),
            hardware=dict(type="dict", default={}),
            from_audit=dict(type="bool", default=True),
            budget_minutes=dict(type="float", default=60),
            cost_model=dict(type="dict", default={}),
            settings=dict(type="dict", default={}),
            metric=dict(type="str", default="decode_tok_s@1"),
            history_file=dict(type="path", default=""),
            noise_prior=dict(type="dict", default={}),
            limits=dict(type="dict", default={}),
            output_check=dict(type="dict", default={}),
            verify_shape=dict(type="dict", default={}),
            outcome=dict(type="raw"),
            outputs=dict(type="list", elements="str"),
            seconds=dict(type="float"),
            inventory_file=dict(type="path"),
            changes=dict(type="dict", default={}),
        ),
        required_if=[("action", "plan", ("source_dir",)), ("action", "record", ("outcome",)),
                     ("action", "write", ("inventory_file",))],
        supports_check_mode=True,
    )
    p = module.params
    where = f"{p['host']}: " if p["host"] else ""
    try:
        if p["action"] == "write":
            write(module, p)
        tune, extra = plan(p) if p["action"] == "plan" else record(p)
    except (ValueError, OSError) as exc:
        module.fail_json(msg=f"{where}{exc}")
    step = next_of(tune)
    out = {"changed": False, "next": step, "progress": step["progress"], "refused": tune["refused"]}
    out.update(extra)
    if step["action"] == "done":
        result = step["result"]
        out.update(result=result, left_on_table=session.left_on_table(result),
                   winner_changes={flag: new for flag, (_old, new) in result["changes"].items()} if result["won"] else {},
                   lines=session.answer_lines(tune["host"], result, tune["metric"], tune["refused"]))
    if not module.check_mode:
        os.makedirs(os.path.dirname(os.path.abspath(p["state_file"])), exist_ok=True)
        write_atomic(p["state_file"], json.dumps(tune, indent=1, sort_keys=True) + "\n")
    module.exit_json(**out)


if __name__ == "__main__":
    main()
