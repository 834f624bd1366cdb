"""Which change caused a regression (regression.yml): the plan, and the verdict on each change.

A deploy that changed several things at once (the SGLang release and some flags) got slower: its
gates failed and rolled the host back, or its loss was accepted. regression.yml measures, on that
host, its last known good release with each difference applied alone, with the same noise-aware
comparison the verify gates use (gates.noise_verdict), names the change that costs the throughput,
then puts back what the host ran.

plan(): the steps to measure. Step 0 is the last known good itself (the baseline); then one step per
difference (the release, then each flag, by name), each the last known good with that one change;
then, when there are several, all of them together (the desired state: what the deploy ran).

judge(): each step's single-stream decode against the baseline's, its verdict (fail: a loss beyond
the noise and at least the minimum effect; inconclusive; pass), and the culprit: the change with the
largest loss judged `fail`, else none (with the largest loss and why it cannot tell).
"""

from __future__ import annotations

from ansible_collections.sglang.fleet.plugins.module_utils.verify import gates

BASELINE = "the last known good"
ALL = "every change together (the desired state)"


class RegressionError(ValueError):
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
    return steps


def judge(results, history, thresholds, tol=10.0):
    """The verdict on each measured step. `results`: one per step of plan(), in order, each
    {name, change, measurement (the verify result's own metrics and samples) or error (why the step
    could not run)}; step 0 is the baseline. `history`: the host's verify history (its noise);
    `thresholds`: min_effect_pct, false_alarm_pct, power_pct (verify's). Returns {steps, culprit,
    lines}."""
    if not results or not results[0].get("measurement"):
        why = (results or [{}])[0].get("error") or "not measured"
        raise RegressionError(f"the baseline (the last known good release) could not be measured: {why}")
    opts = gates.noise_options({**thresholds, "gate_mode": "noise", "inconclusive": "keep"})
    if opts is None:
        raise RegressionError("min_effect_pct is needed to judge the changes (sglang_verify_min_effect_pct)")
    base = results[0]["measurement"]
    name = gates.DECODE
    if name not in (base.get("metrics") or {}):
        raise RegressionError("the baseline measured no single-stream decode")
    shape = results[0].get("workload")
    stats = {**opts, "mode": "noise", "noise": gates.host_noise(history, shape),
             "reference": base.get("samples") or {}, "reference_runs": {name: [base["metrics"][name]]}}
    rows = [{"name": results[0]["name"], "change": None, "decode_tok_s": base["metrics"][name], "verdict": "baseline"}]
    for res in results[1:]:
        row = {"name": res["name"], "change": res.get("change")}
        measurement = res.get("measurement")
        if not measurement or name not in (measurement.get("metrics") or {}):
            rows.append({**row, "verdict": "not measured", "error": res.get("error") or "no single-stream decode"})
            continue
        value = measurement["metrics"][name]
        verdict = gates.noise_verdict(name, value, {**stats, "samples": measurement.get("samples") or {},
                                                    "figures": {name: [value]}}, tol)
        if verdict is None:   # no repeats on a side: the point change alone
            verdict = {"verdict": "point", "effect": value / base["metrics"][name] - 1, "interval": None,
                       "detectable": None, "message": "no repeats to compare", "basis": "point"}
        shown = verdict.get("point_verdict") if verdict["verdict"] == "point" else verdict["verdict"]
        rows.append({**row, "decode_tok_s": value, "verdict": shown, "basis": verdict["basis"],
                     **gates.noise_figures(verdict), "comparison": verdict["message"]})
    singles = [r for r in rows[1:] if r["change"] is not None and "effect_pct" in r]
    failing = sorted((r for r in singles if r["verdict"] == "fail"), key=lambda r: r["effect_pct"])
    culprit = failing[0] if failing else None
    lines = [f"baseline: {rows[0]['name']}: single-stream decode {gates._fmt(rows[0]['decode_tok_s'])}"]
    for r in rows[1:]:
        if "effect_pct" not in r:
            lines.append(f"{r['name']}: {r['verdict']}: {r['error']}")
        else:
            lines.append(f"{r['name']}: single-stream decode {gates._fmt(r['decode_tok_s'])}, {r['comparison']}")
    if culprit:
        lines.append(f"the change that costs the throughput: {culprit['name']} ({culprit['effect_pct']:+.1f} %"
                     + (f", interval [{culprit['interval_pct'][0]:+.1f}, {culprit['interval_pct'][1]:+.1f}] %"
                        if culprit["interval_pct"] else "") + ")"
                     + (f"; also beyond the noise: {', '.join(r['name'] for r in failing[1:])}" if failing[1:] else ""))
    else:
        worst = min(singles, key=lambda r: r["effect_pct"]) if singles else None
        lines.append("no single change costs throughput beyond the noise"
                     + (f" (the largest loss: {worst['name']}, {worst['effect_pct']:+.1f} %, {worst['verdict']})"
                        if worst and worst["effect_pct"] < 0 else "")
                     + ("; measure again, or with more repeats (sglang_verify_repeats)" if any(
                         r["verdict"] == "inconclusive" for r in singles) else ""))
    return {"steps": rows, "culprit": culprit["name"] if culprit else None, "lines": lines}
