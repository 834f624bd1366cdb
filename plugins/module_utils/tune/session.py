"""tune.yml's side of the search (stdlib only, Python 3.8+): what the search needs from the host and
the installed release, and what the user reads at the end.

- ``incumbent``: the value the host runs now of each flag of the space (its inventory's, else the
  release's static default);
- ``check_space``: every value of the space tried on the host's flags through the installed release's
  parser and start-up refusals (a ``check(args) -> [messages]`` the caller gives): a value the release
  refuses is listed with its reason and never started;
- ``candidate_args``: the inventory's flags with a candidate's changes (a flag left at the incumbent's
  value stays as the inventory has it, unset included);
- ``failure_reason``: the line of a failed start's log that says why (what makes it infeasible);
- ``answer_lines`` and ``left_on_table``: the table, and the one line the fleet report shows.
"""

from __future__ import annotations

import json
import re

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.tune.search import same_value, space_dims


class TuneError(SglangFleetError, ValueError):
    """A tuning request that cannot be planned: says what is wrong and how to fix it."""


# What a failed start's log says, most telling first: SGLang's own exceptions and PyTorch's / CUDA's
# out of memory (plugins/module_utils/tune/search.py OUT_OF_MEMORY), then any error line.
_REASONS = (
    re.compile(r"(out of memory|OutOfMemoryError|Not enough memory|cudaErrorMemoryAllocation)", re.I),
    re.compile(r"^\s*(\w+\.)*\w*(Error|Exception)\b:"),
    re.compile(r"(Scheduler hit an exception|Received sigquit|exited during start-up|did not answer)", re.I),
    re.compile(r"\b(error|exception|failed|fatal)\b", re.I),
)
_SKIP = re.compile(r"^\s*(Traceback|File \"|\^|---|$)")


def incumbent(space, args, defaults):
    """{flag: value the host runs now} for each flag of ``space`` (a dict of flag -> values or a list of
    {flag, ...}): the inventory's ``args``, else the release's static default in ``defaults`` ({dest:
    value}; a flag resolved only at start-up is absent there). Such a flag whose values include null is
    unset now (None: SGLang's own choice at start-up, one value among the others). Raises TuneError
    naming the flags whose value is unknown and how to give it."""
    out, unknown = {}, []
    for dim in space_dims(space or {}):
        flag = dim.get("flag") if isinstance(dim, dict) else None
        if not isinstance(flag, str):
            continue   # search.normalise_space says what is wrong with it
        if flag in args:
            out[flag] = args[flag]
        elif flag in defaults:
            out[flag] = defaults[flag]
        elif isinstance(dim.get("values"), list) and None in dim["values"]:
            out[flag] = None
        else:
            unknown.append(flag)
    if unknown:
        raise TuneError(f"{', '.join(unknown)}: not set in sglang_args and resolved by SGLang only at start-up, so the "
                        "value the host runs now is unknown: set it in sglang_args to what the server runs (audit.yml "
                        "shows the resolved value), or add null (unset: SGLang's own choice) to its values, then tune "
                        "from there")
    return out


# Audit statuses (source/optimisations.py): what a flag could turn on here, and what the hardware rules out.
AUTO_DISABLED, UNAVAILABLE, OFF_BY_DEFAULT = "auto-disabled", "unavailable on this hardware", "off by default"


def default_space(args):
    """The space tune.yml searches when the inventory gives none: the speculative steps around the
    host's own (1 to 5, or up to two past it) where it runs EAGLE/MTP with one draft token per step
    (topk 1: the draft tokens follow the steps). Empty otherwise: the audit's candidates remain."""
    steps = args.get("speculative_num_steps")
    if not args.get("speculative_algorithm") or not isinstance(steps, int) or isinstance(steps, bool) \
            or args.get("speculative_eagle_topk", 1) != 1:
        return {}
    return {"speculative_num_steps": list(range(1, max(5, steps + 2) + 1))}


def audit_candidates(findings, flags_by_option, space, gpu=True):
    """What the audit adds to ``space`` (a dict of flag -> values), and the lines that say why:
    each optimisation the release auto-disables here that a switch (a store_true flag) turns back on is
    tried off and on; one the hardware rules out is listed with its rule, never tried; one off by
    default is listed with how to try it. ``findings``: the static audit's (source.predict), each with
    name, status, reason, override, how_to_enable, rule_file, rule_line; ``flags_by_option``: the
    release's flags by option string. A switch named --disable-* turns a thing off, not on; without a
    GPU (``gpu`` false) nothing is tried: the audited optimisations are GPU kernels and graphs."""
    added, lines = {}, []
    for f in findings:
        rule = f" ({f['rule_file']}:{f['rule_line']})" if f.get("rule_file") else ""
        flag = flags_by_option.get(f.get("override") or "")
        dest = flag and (flag.get("field") or flag.get("dest"))
        switch = gpu and flag is not None and flag.get("action") == "store_true" and not dest.startswith("disable")
        if f["status"] == UNAVAILABLE:
            lines.append(f"{f['name']}: {UNAVAILABLE}: {f['reason']}{rule}: not tried")
        elif f["status"] == AUTO_DISABLED and switch and dest not in space:
            added[dest] = [False, True]
            lines.append(f"{f['name']}: auto-disabled here: {f['reason']}{rule}: trying {dest} false and true")
        elif f["status"] == AUTO_DISABLED:
            lines.append(f"{f['name']}: auto-disabled here: {f['reason']}{rule}"
                         + (f": in sglang_tune_space as {dest}" if dest in space else
                            f": not tried ({f.get('how_to_enable') or 'no switch turns it on'}; add it to sglang_tune_space)"))
        elif f["status"] == OFF_BY_DEFAULT and switch and dest not in space:
            lines.append(f"{f['name']}: off by default{rule}: not tried ({f.get('how_to_enable') or f['override']}; "
                         f"add {dest}: [false, true] to sglang_tune_space to try it)")
    return added, lines


def check_space(space, args, incumbent_flags, check):
    """(the space with only the values the release accepts, refused rows [{flag, value, why}]).
    Each value is tried alone on the host's flags: ``check(args) -> [error messages]`` is the release's
    parser and start-up rules. A flag unknown to the release is refused as a whole."""
    kept, refused = [], []
    for dim in space_dims(space):
        flag, values = dim.get("flag"), dim.get("values")
        if not isinstance(values, list):
            kept.append(dim)   # search.normalise_space says what is wrong with it
            continue
        ok = []
        for value in values:
            if flag in incumbent_flags and same_value(value, incumbent_flags[flag]):
                ok.append(value)   # what the host runs now: it started
                continue
            problems = check(candidate_args(args, incumbent_flags, {**incumbent_flags, flag: value}))
            if problems:
                refused.append({"flag": flag, "value": value, "why": "; ".join(problems)})
            else:
                ok.append(value)
        kept.append(dict(dim, values=ok))
    return kept, refused


def candidate_args(args, incumbent_flags, flags):
    """The inventory's ``args`` with each flag of ``flags`` that differs from the incumbent's value
    set to it (None unsets it)."""
    out = dict(args)
    for flag, value in flags.items():
        if flag in incumbent_flags and same_value(value, incumbent_flags[flag]):
            continue
        if value is None:
            out.pop(flag, None)
        else:
            out[flag] = value
    return out


def failure_reason(text, limit=300):
    """The line of a failed start's output that says why (the first kind of _REASONS found, its last
    occurrence), trimmed to ``limit`` characters; the last non-empty line when none matches."""
    lines = [ln.strip() for ln in str(text or "").splitlines() if not _SKIP.match(ln)]
    for pattern in _REASONS:
        hits = [ln for ln in lines if pattern.search(ln)]
        if hits:
            return hits[-1][:limit]
    return (lines[-1] if lines else "the start failed without a log line")[:limit]


def changes_text(changes):
    """'speculative_num_steps 1 -> 3, ...' for search's {flag: [from, to]}."""
    return ", ".join(f"{flag} {_show(old)} -> {_show(new)}" for flag, (old, new) in changes.items()) or "no change"


def left_on_table(result):
    """The fleet report's "left on the table" text for a finished search: '+38.2 % [+33.0, +43.1]:
    speculative_num_steps 1 -> 3', or None without a confirmed win."""
    if not result or not result.get("won") or result.get("gain") is None:
        return None
    lo, hi = result.get("interval") or (None, None)
    interval = f" [{lo * 100:+.1f}, {hi * 100:+.1f}]" if lo is not None else ""
    return f"{result['gain'] * 100:+.1f} %{interval}: {changes_text(result['changes'])}"


def answer_lines(host, result, metric, refused=()):
    """What the user reads: the verdict, how each change of a several-flag best was judged alone, then
    one line per candidate (figure, gain against the incumbent with its interval, verdict, why), the
    values the release refused, the time it took."""
    unit = "tok/s"
    head = (f"{host}: tuned {metric}: " + (f"the winner {left_on_table(result)}" if result["won"] else
                                           f"the incumbent stays: {result['message']}"))
    lines = [head]
    for check in result.get("earned") or ():
        lines.append(f"  each change alone: {check['flag']} {_show(check['from'])} -> {_show(check['to'])} "
                     f"{'kept' if check['kept'] else 'left out'}: {check['why']}")
    for row in result["rows"]:
        figure = f"{row['figure']:.1f} {unit}" if row.get("figure") is not None else "-"
        gain = ""
        if row.get("gain") is not None:
            lo, hi = row.get("interval") or (None, None)
            gain = f" {row['gain'] * 100:+.1f} %" + (f" [{lo * 100:+.1f}, {hi * 100:+.1f}]" if lo is not None else "")
        why = f": {row['why']}" if row.get("why") else ""
        lines.append(f"  {changes_text(row['changes']) if row['changes'] else 'the incumbent'}: {figure}"
                     f" x{row['measurements']}{gain}, {row['verdict']}{why}")
    for row in refused:
        lines.append(f"  {row['flag']} -> {_show(row['value'])}: refused by the installed release, never started: {row['why']}")
    lines.append(f"  {result['measurements']} measurements and {result['restarts']} restarts in "
                 f"{result['used_s'] / 60:.1f} min of a {result['budget_s'] / 60:.1f} min budget"
                 + ("; out of time" if result.get("out_of_time") else ""))
    return lines


_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def yaml_scalar(value):
    """One flag value as YAML writes it: true/false, a number, a plain word, else a JSON string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    return text if _PLAIN.match(text) and text.lower() not in _YAML_WORDS else json.dumps(text)


def edit_args_block(text, changes, key="sglang_args"):
    """``text`` (a host's inventory file) with each flag of ``changes`` set in its top-level block
    mapping ``key`` (None removes the flag), every other line as it was: comments, order and layout
    kept. A flag's line keeps its trailing comment; a new flag goes after the block's last flag.
    Raises TuneError where that cannot be done line by line (no such block, a flow mapping, a flag
    whose value spans lines): the caller then says to write it by hand."""
    lines = text.splitlines(True)
    head = re.compile(rf"^{re.escape(key)}:\s*(#.*)?$")
    start = next((i for i, ln in enumerate(lines) if head.match(ln.rstrip("\n"))), None)
    if start is None:
        flow = any(re.match(rf"^{re.escape(key)}:\s*\S", ln) for ln in lines)
        raise TuneError(f"{key} is written as a flow mapping ({key}: {{...}}), which cannot be edited line by line"
                        if flow else f"the file does not set {key} itself")
    end, indent, last = start + 1, None, start
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        m = re.match(r"^(\s+)[A-Za-z0-9_]+:", lines[end])
        if m and indent is None:
            indent = m.group(1)
        if m and m.group(1) == indent or (indent and lines[end].startswith(indent + " ") and lines[end].strip()
                                          and not lines[end].lstrip().startswith("#")):
            last = end
        end += 1
    indent = indent or "  "
    for flag, value in changes.items():
        pattern = re.compile(rf"^{re.escape(indent)}{re.escape(flag)}:(\s*)([^#\n]*?)(\s+#.*)?$")
        at = next((i for i in range(start + 1, last + 1) if pattern.match(lines[i].rstrip("\n"))), None)
        if at is not None:
            m = pattern.match(lines[at].rstrip("\n"))
            if not m.group(2).strip() or at + 1 <= last and lines[at + 1].startswith(indent + " "):
                raise TuneError(f"{key}.{flag} spans several lines")
            if value is None:
                del lines[at]
                last -= 1
            else:
                lines[at] = f"{indent}{flag}: {yaml_scalar(value)}{m.group(3) or ''}\n"
        elif value is not None:
            if not lines[last].endswith("\n"):
                lines[last] += "\n"
            lines.insert(last + 1, f"{indent}{flag}: {yaml_scalar(value)}\n")
            last += 1
    return "".join(lines)


def _show(value):
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
