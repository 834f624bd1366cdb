"""Which change caused a regression (regression.yml): the plan, and the verdict on each change.

A deploy that changed several things at once (the SGLang release and some flags) got slower: its
gates failed and rolled the host back, or its loss was accepted. regression.yml measures, on that
host, its last known good release with each difference applied alone, with the same noise-aware
comparison the verify gates use (gates.noise_verdict), names the change that costs the throughput,
then puts back what the host ran.

plan(): the steps to measure. Step 0 is the last known good itself (the baseline); then one step per
difference (the release, then each flag, by name), each the last known good with that one change;
then, when there are several, all of them together (the desired state: what the deploy ran); last,
the baseline again, so that the steps are bracketed by it.

judge(): whether the baseline itself moved between its two measurements (noise.bracket: then the
host changed under the steps, said first), each step's single-stream decode against both baseline
measurements with the verify gates' run-to-run comparison (gates.compare_metric), its verdict (fail:
a loss beyond the noise and at least the minimum effect; inconclusive; pass), and the culprit: the
change with the largest loss judged `fail`, else none (with the largest loss and why it cannot tell).
"""

from __future__ import annotations

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates, noise, settings

BASELINE = "the last known good"
ALL = "every change together (the desired state)"
AGAIN = "the last known good again (did the host move while the steps ran?)"


class RegressionError(SglangFleetError, ValueError):
    """A regression search that cannot be planned or judged."""


def plan(good, version, args):
    """The steps (see the module's docstring) from the last known good release record `good`
    (version, args, id) to the desired `version` and `args`: a list of {name, version, args,
    change}, `change` None for the baseline and the whole desired state, else {kind: version|flag,
    flag, from, to}."""
    if not isinstance(good, dict) or not good.get("version") or not isinstance(good.get("args"), dict):
        raise RegressionError("the host has no last known good release (a release that passed every gate) to "
                              "search from: deploy.yml records one when a release passes its gates")
    old_version, old_args, args = str(good["version"]), dict(good["args"]), dict(args or {})
    steps = [{"name": f"{BASELINE} ({good.get('id') or 'sglang ' + old_version})", "version": old_version,
              "args": old_args, "change": None}]
    for change in gates.changes(old_version, old_args, version, args):   # the release first, then each flag
        step_version, step_args = old_version, old_args
        if change["kind"] == "version":
            step_version = change["to"]
        else:
            step_args = {k: v for k, v in old_args.items() if k != change["flag"]}
            if change["to"] is not None:
                step_args[change["flag"]] = change["to"]
        steps.append({"name": change["name"], "version": step_version, "args": step_args,
                      "change": {k: v for k, v in change.items() if k != "name"}})
    if len(steps) == 1:
        raise RegressionError(f"the desired state is the last known good release {good.get('id')} (sglang "
                              f"{old_version}, the same flags): there is no change to search")
    if len(steps) > 2:
        steps.append({"name": ALL, "version": str(version), "args": args, "change": None})
    steps.append({"name": AGAIN, "version": old_version, "args": old_args, "change": None})
    return steps


def measured(result):
    """A step's result as judge() reads it: with `bench` (its raw benchmark results, one per concurrency
    level: sglang_verify's `measure` entry point), its measurement (the gated metrics and each repeat's
    figures) and workload, read with verify's own code as a verify run's are (gates.levels, metrics_of,
    samples_of, workload); a benchmark that measured no single-stream decode is the step's error. A result
    without `bench` is returned as it is."""
    if "bench" not in result:
        return result
    rest = {k: v for k, v in result.items() if k != "bench"}
    try:
        lv = gates.levels(result["bench"] or [])
    except gates.VerifyError as exc:
        return {**rest, "error": f"its benchmark: {exc}"}
    return {**rest, "workload": gates.workload(lv),
            "measurement": {"metrics": gates.metrics_of(lv), "samples": gates.samples_of(lv)}}


def judge(results, history, thresholds):
    """The verdict on each measured step. `results`: one per step of plan(), in order, each
    {name, change, measurement (the verify result's own metrics and samples) or error (why the step
    could not run)}; step 0 is the baseline, and the step named AGAIN (when measured) the baseline
    again. `history`: the host's verify history (its run-to-run noise); `thresholds`: verify's
    settings (settings.py: min_effect_pct, false_alarm_pct, power_pct, the noise prior). Returns
    {steps, culprit, baseline_moved (None: not measured again or no noise known), lines}."""
    if not results or not results[0].get("measurement"):
        why = (results or [{}])[0].get("error") or "not measured"
        raise RegressionError(f"the baseline (the last known good release) could not be measured: {why}")
    th = settings.thresholds({**thresholds, "gate_mode": "noise", "inconclusive": "keep"}, RegressionError)
    name = gates.DECODE
    base = results[0]["measurement"]
    if name not in (base.get("metrics") or {}):
        raise RegressionError("the baseline measured no single-stream decode")
    estimate = (gates.host_noise(history, results[0].get("workload"), th).get(name)
                or gates.noise_estimate(name, [], [], th))   # no run in the history: the prior alone
    again = next((r["measurement"]["metrics"][name] for r in results[1:] if r["name"] == AGAIN
                  and name in ((r.get("measurement") or {}).get("metrics") or {})), None)
    drift = None if again is None else noise.bracket(
        [base["metrics"][name]], [again], (estimate or {}).get("sigma"), (estimate or {}).get("dof", 0),
        alpha=th["false_alarm_pct"] / 100.0)
    reference = drift["reference"] if drift else [base["metrics"][name]]
    rows = [{"name": results[0]["name"], "change": None, "decode_tok_s": base["metrics"][name], "verdict": "baseline"}]
    for res in results[1:]:
        row = {"name": res["name"], "change": res.get("change")}
        measurement = res.get("measurement")
        if res["name"] == AGAIN:
            rows.append({**row, "verdict": "baseline", "decode_tok_s": again} if again is not None else
                        {**row, "verdict": "not measured", "error": res.get("error") or "no single-stream decode"})
            continue
        if not measurement or name not in (measurement.get("metrics") or {}):
            rows.append({**row, "verdict": "not measured", "error": res.get("error") or "no single-stream decode"})
            continue
        value = measurement["metrics"][name]
        cmp = gates.compare_metric(name, [value], reference, th, estimate)
        rows.append({**row, "decode_tok_s": value, "verdict": cmp["noise_verdict"], "basis": cmp["noise_basis"],
                     **{k: cmp[k] for k in ("effect_pct", "interval_pct", "detectable_pct", "noise_pct")},
                     "comparison": cmp["comparison"]})
    singles = [r for r in rows[1:] if r["change"] is not None and "effect_pct" in r]
    failing = sorted((r for r in singles if r["verdict"] == "fail"), key=lambda r: r["effect_pct"])
    culprit = failing[0] if failing else None
    lines = [f"baseline: {rows[0]['name']}: single-stream decode {gates._fmt(rows[0]['decode_tok_s'])}"]
    if drift:
        lines.append(drift["message"])
    for r in rows[1:]:
        if r["name"] == AGAIN and "error" not in r:
            continue
        if "effect_pct" not in r:
            lines.append(f"{r['name']}: {r['verdict']}: {r['error']}")
        else:
            lines.append(f"{r['name']}: single-stream decode {gates._fmt(r['decode_tok_s'])}, {r['comparison']}")
    if culprit:
        lines.append(f"the change that costs the throughput: {culprit['name']} ({culprit['effect_pct']:+.1f} %"
                     + (f", interval [{culprit['interval_pct'][0]:+.1f}, {culprit['interval_pct'][1]:+.1f}] %"
                        if culprit["interval_pct"] else "") + ")"
                     + (f"; also beyond the noise: {', '.join(r['name'] for r in failing[1:])}" if failing[1:] else "")
                     + ("; but the baseline itself moved, so measure again on a quiet host" if drift and drift["moved"]
                        else ""))
    else:
        worst = min(singles, key=lambda r: r["effect_pct"]) if singles else None
        lines.append("no single change costs throughput beyond the noise"
                     + (f" (the largest loss: {worst['name']}, {worst['effect_pct']:+.1f} %, {worst['verdict']})"
                        if worst and worst["effect_pct"] < 0 else "")
                     + ("; measure again, or with more runs in the host's history" if any(
                         r["verdict"] == "inconclusive" for r in singles) else ""))
    return {"steps": rows, "culprit": culprit["name"] if culprit else None,
            "baseline_moved": drift["moved"] if drift else None, "lines": lines}
