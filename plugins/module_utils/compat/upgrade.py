"""Upgrade preview: what a target SGLang release does differently with one host's flags.

Two releases' sources (read as text by plugins/module_utils/source/, never imported), the host's
arguments, GPUs and model config give, installed release -> target release:
  - flags: each of the host's flags the target renames, removes, deprecates or validates
    differently (validate_argv of both releases, FLAG_HISTORY for the replacement), and whether
    the target's parser refuses the argv;
  - defaults: options the host does not set whose static default changed, kept only when the
    option is about serving (SERVING_TOPICS, a rule on the option's name), file:line in each;
  - optimisations: each audited optimisation (predict) whose status or value changes, with the
    rule's file:line in both releases;
  - compatibility: the target's verdict and memory fit (roles/sglang_compat), when given.

    report = preview(old_src, new_src, args, hardware, model_config, host="ct129")
    report["lines"], summary_line(report)

Pure functions, stdlib only; plugins/modules/sglang_upgrade_preview.py runs them on the controller.
"""
from __future__ import annotations

import dataclasses
import json
import re

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import ArgsError, to_argv
from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    FLAG_HISTORY,
    Runtime,
    normalise_argv,
    predict,
    validate_argv,
)

# The rule for "a default that changes serving": the option's name (its ServerArgs field) matches
# one of these topics. Anything else (paths, logging, tokenizer, API, storage...) is left out.
SERVING_TOPICS = (
    ("memory", r"mem|memory|kv_cache|max_total_tokens|tokens_ratio|page_size|offload|hicache"),
    ("scheduling", r"schedul|max_running|chunked_prefill|max_prefill|radix|prefill_tokens|overlap"),
    ("graphs", r"cuda_graph|piecewise|torch_compile|graph"),
    ("attention", r"attention|attn|rope|qk_norm|\bmla|kv_"),
    ("speculative decoding", r"speculative"),
    ("parallelism", r"(^|_)(tp|dp|pp|ep|cp)(_|$)|parallel|nnodes|moe|expert|all_?reduce"),
)


class UpgradeError(SglangFleetError):
    """Input the preview cannot work with; the message says what to do."""


def serving_topic(field: str) -> str | None:
    """The SERVING_TOPICS topic an option's field name belongs to, or None (not about serving)."""
    return next((topic for topic, pattern in SERVING_TOPICS if re.search(pattern, field)), None)


def _where(file, line) -> str | None:
    return f"{file}:{line}" if file and line else None


def _shown(value) -> str:
    if isinstance(value, Runtime):
        return f"computed at start ({value.expr})"
    if value is None:
        return "unset (chosen at start)"
    return json.dumps(value) if not isinstance(value, str) else value


# --------------------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------------------

def _problem(new, p) -> dict:
    if p.kind == "ambiguous":   # candidates, not a replacement: the flag history says which one
        history = FLAG_HISTORY.get(p.flag, ("", []))[1]
        replacement = next((o for o, _ in history if new.has(o)), None)
    else:
        replacement = p.suggestion[0] if p.suggestion and p.kind != "bad_choice" else None
    return {"flag": p.flag, "kind": p.kind, "severity": p.severity, "message": p.message,
            "replacement": replacement}


def flag_changes(old, new, argv: list, model_config: dict | None, hardware: dict | None) -> list[dict]:
    """The target's problems with the host's argv that the installed release does not have."""
    before = {(p.flag, p.kind) for p in validate_argv(old, argv, model_config, hardware)}
    return [_problem(new, p) for p in validate_argv(new, argv, model_config, hardware)
            if (p.flag, p.kind) not in before]


def _arg_key(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def target_args(args: dict, changes: list[dict]) -> tuple[dict, list[str]]:
    """The host's args as the target would need them: each refused flag replaced (first suggestion)
    or dropped. Returns (args, what was done), for the target's prediction."""
    out, done = dict(args), []
    for c in changes:
        if c["severity"] != "error" or c["kind"] == "refused_at_start":
            continue
        key = _arg_key(c["flag"])
        if key not in out:
            continue
        value = out.pop(key)
        if c["replacement"]:   # a replacement without a value of its own takes the old flag's
            words = c["replacement"].split()
            out[_arg_key(words[0])] = " ".join(words[1:]) if len(words) > 1 else value
            carried = f" {value}" if len(words) == 1 and value is not True else ""
            done.append(f"{c['flag']} -> {c['replacement']}{carried}")
        else:
            done.append(f"{c['flag']} dropped")
    return out, done


# --------------------------------------------------------------------------------------
# Defaults
# --------------------------------------------------------------------------------------

def _options(src) -> dict:
    """{field: Flag} of the options a release really has (deprecated aliases and removed flags left out)."""
    out = {}
    for f in src.flags:
        if f.deprecated_alias_of or f.removed_message or f.action.startswith("Deprecated"):
            continue
        out.setdefault(f.server_arg, f)
    return out


def default_changes(old, new, given: set) -> list[dict]:
    """Serving options (SERVING_TOPICS) in both releases, not in ``given``, whose static default changed."""
    a, b = _options(old), _options(new)
    out = []
    for field in sorted(set(a) & set(b) - set(given)):
        fa, fb = a[field], b[field]
        if repr(fa.default) == repr(fb.default):
            continue
        topic = serving_topic(field)
        if topic is None:
            continue
        out.append({"option": fb.option_strings[0], "field": field, "topic": topic,
                    "from": _shown(fa.default), "to": _shown(fb.default),
                    "from_where": _where(fa.file, fa.line), "to_where": _where(fb.file, fb.line)})
    return out


# --------------------------------------------------------------------------------------
# Optimisations
# --------------------------------------------------------------------------------------

def _state(f) -> dict:
    return {"status": f.status, "value": f.value, "reason": f.reason, "rule": _where(f.rule_file, f.rule_line)}


def optimisation_changes(old_findings, new_findings) -> list[dict]:
    """Each optimisation whose predicted status or value differs, both sides with their rule's file:line."""
    after = {f.name: f for f in new_findings}
    out = []
    for f in old_findings:
        g = after.get(f.name)
        if g is None or (f.status == g.status and json.dumps(f.value, default=str) == json.dumps(g.value, default=str)):
            continue
        out.append({"name": f.name, "status_changes": f.status != g.status, "from": _state(f), "to": _state(g)})
    return out


# --------------------------------------------------------------------------------------
# The preview
# --------------------------------------------------------------------------------------

def preview(old, new, args: dict, hardware: dict, model_config: dict | None, *, host: str = "",
            compat: dict | None = None) -> dict:
    """The upgrade preview of one host (a JSON-able dict with ``lines`` and ``summary``).

    ``old``/``new``: SglangSource of the installed and target releases; ``args``: the host's
    arguments (what its release record says it runs); ``compat``: the target's compatibility
    result ({status, summary, checks}) or None when it was not checked.
    """
    where = f"{host}: " if host else ""
    try:
        argv = to_argv(args)
    except ArgsError as exc:
        raise UpgradeError(f"{where}{exc}") from exc
    hardware, model_config = hardware or {}, model_config or {}
    try:
        old_args = normalise_argv(old, argv)
    except ValueError as exc:
        raise UpgradeError(f"{where}the installed sglang {old.version} does not accept the host's own argv "
                           f"({exc}): fix the inventory or run drift.yml first") from exc
    flags = flag_changes(old, new, argv, model_config, hardware)
    refused = [c for c in flags if c["severity"] == "error"]
    new_raw, adjusted = target_args(args, flags)
    try:
        new_args = normalise_argv(new, to_argv(new_raw))
    except ValueError:   # a refusal without a usable replacement: predict from what still parses
        new_args = {k: v for k, v in old_args.items() if any(k in (f.dest, f.field) for f in new.flags)}
        adjusted.append("the rest predicted from the flags the target still has")
    report = {
        "host": host,
        "from": {"version": old.version, "era": old.era, "source_path": old.path},
        "to": {"version": new.version, "era": new.era, "source_path": new.path},
        "argv": argv,
        "refuses_argv": bool(refused),
        "flags": flags,
        "predicted_with": adjusted,
        "defaults": default_changes(old, new, set(old_args) | set(args)),
        "defaults_rule": "options the host does not set whose static default changed, named after "
                         + ", ".join(t for t, _ in SERVING_TOPICS),
        "optimisations": optimisation_changes(predict(old, old_args, hardware, model_config),
                                              predict(new, new_args, hardware, model_config)),
        "compat": _compat(compat),
    }
    report["summary"] = summary_line(report)
    report["lines"] = preview_lines(report)
    return report


def _compat(compat: dict | None) -> dict | None:
    if not compat:
        return None
    fit = next((c for c in compat.get("checks") or [] if c.get("check") == "memory_fit"), None)
    return {"status": compat.get("status"), "summary": compat.get("summary"), "memory_fit": fit}


def summary_line(report: dict) -> str:
    """One line: host, from -> to, and how it changes."""
    parts = [("the target REFUSES the argv" if report["refuses_argv"] else "argv accepted")]
    if report["flags"] and not report["refuses_argv"]:
        parts.append(f"{len(report['flags'])} flag warning(s)")
    flips = [o for o in report["optimisations"] if o["status_changes"]]
    parts += [f"{o['name']} {o['from']['status']} -> {o['to']['status']}" for o in flips]
    if len(report["optimisations"]) > len(flips):
        parts.append(f"{len(report['optimisations']) - len(flips)} optimisation value(s) change")
    parts.append(f"{len(report['defaults'])} serving default(s) change")
    if report["compat"]:
        parts.append(f"compat {report['compat']['status']}")
    return f"{report['host'] or 'host'} {report['from']['version']} -> {report['to']['version']}: " + "; ".join(parts)


def _side(state: dict) -> str:
    value = state["value"]
    text = state["status"] + (f" ({value})" if value not in (None, True, False) else "")
    return text + (f" [{state['rule']}]" if state["rule"] else " [no rule]")


def preview_lines(report: dict) -> list[str]:
    """The readable block of one host."""
    a, b = report["from"], report["to"]
    lines = [f"{report['host'] + ': ' if report['host'] else ''}sglang {a['version']} (era {a['era']}) -> "
             f"{b['version']} (era {b['era']})"]
    lines.append("flags: " + ("the target REFUSES this argv (the server would not start)" if report["refuses_argv"]
                              else "the target accepts this argv"))
    for c in report["flags"]:
        lines.append(f"  {c['flag']} [{c['kind']}, {c['severity']}]: {c['message']}")
    if not report["flags"]:
        lines.append("  no flag of the host is renamed, removed, deprecated or validated differently")
    if report["predicted_with"]:
        lines.append("  target predicted with: " + "; ".join(report["predicted_with"]))
    lines.append("optimisations that change (installed -> target):")
    for o in report["optimisations"]:
        lines.append(f"  {o['name']}: {_side(o['from'])} -> {_side(o['to'])}")
        lines.append(f"    now: {o['from']['reason']}")
        lines.append(f"    then: {o['to']['reason']}")
    if not report["optimisations"]:
        lines.append("  none")
    lines.append(f"serving defaults that change for options the host does not set ({len(report['defaults'])}):")
    for d in report["defaults"]:
        lines.append(f"  {d['option']} ({d['topic']}): {d['from']} [{d['from_where']}] -> {d['to']} [{d['to_where']}]")
    c = report["compat"]
    if c:
        fit = c["memory_fit"] or {}
        lines.append(f"compatibility of {b['version']}: {c['status']} ({c['summary']})")
        if fit:
            lines.append(f"  memory fit: {fit.get('status')} - {fit.get('detail')}")
    else:
        lines.append("compatibility: not checked")
    return lines


def as_json(report: dict) -> dict:
    """The report with dataclasses and Runtime values made JSON-able."""
    return json.loads(json.dumps(report, default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o)
                                 else str(o)))
