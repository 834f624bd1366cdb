"""Audit one host: what its installed SGLang will do with its flags, and what the server did.

Static (no server needed): the installed ``sglang`` package of the host's venv (read as text,
never imported), the model's ``config.json`` on the host, the GPU facts and the host's desired
arguments give one Finding per optimisation (``sglang_source.predict``); the host's expectations
(``sglang_expect``) are checked against them. Runtime: the running server's resolved settings
(``/server_info``, ``/get_server_info`` on older releases) are compared with the same findings
and expectations; every place SGLang resolved something differently than predicted is reported.

    src, where = load_installed(venv)                     # site-packages/sglang of the venv
    config, note = read_model_config(args["model_path"])   # config.json on the host, or why not
    report = static_audit(src, args, hardware, expect, model_config=config, model_note=note)
    runtime_audit(report, src, read_server(url, api_key), expect)  # server vs prediction
    report["lines"], report["failures"]                   # readable lines, messages that fail

Stdlib only; used by plugins/modules/sglang_audit.py on the host and by the unit tests.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import re
import shlex
import urllib.error
import urllib.request

from ansible_collections.sglang.fleet.plugins.module_utils.audit.assertions import evaluate as evaluate_assertions
from ansible_collections.sglang.fleet.plugins.module_utils.audit.assertions import failure_message as assertion_failure
from ansible_collections.sglang.fleet.plugins.module_utils.audit.assertions import result_lines as assertion_lines
from ansible_collections.sglang.fleet.plugins.module_utils.audit.assertions import validate as validate_assertions
from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host.args import (
    SECRET_FIELDS,
    ArgsError,
    redact_server_info,
    to_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import NOT_ON_CPU, is_cpu_host
from ansible_collections.sglang.fleet.plugins.module_utils.source import (
    Finding,
    Runtime,
    UnknownLayout,
    normalise_argv,
    predict,
    validate_argv,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source.cache import cached_source
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import (
    AUTO_DISABLED,
    BY_LABEL,
    EXPECT_KEYS,
    LABEL,
    ON,
    SERVER_FIELDS,
    SETTINGS,
    SPECULATIVE_FIELDS,
    UNAVAILABLE,
)
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import STATUSES as _STATUSES
from ansible_collections.sglang.fleet.plugins.module_utils.transport.observe import get_json

# The audited optimisations, their labels, statuses and /server_info fields: one registry
# (plugins/module_utils/source/optimisations.py).
# Expectation keys naming an optimisation (sglang_expect.<key>: "on" | "off" | a status) -> label.
OPTIMISATIONS = EXPECT_KEYS
STATUSES = _STATUSES
# speculative_* settings -> keys of the speculative finding's value.
SPECULATIVE = SPECULATIVE_FIELDS
_SPEC = LABEL["speculative"]
# Settings a finding carries as its value (the rest are read from the arguments).
FINDING_VALUES = {o.label: o.key for o in SETTINGS}
# Findings whose report line shows the value next to the status.
_SHOWS_VALUE = tuple(label for label, o in BY_LABEL.items() if o.show_value)


class AuditError(SglangFleetError):
    """Something the audit cannot work with; the message says what to do."""


# --------------------------------------------------------------------------------------
# Inputs on the host
# --------------------------------------------------------------------------------------

def find_installed(venv: str) -> str:
    """The ``site-packages/sglang`` folder of a venv (``lib/python3*/site-packages/sglang``)."""
    hits = sorted(p for p in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "sglang"))
                  if os.path.isfile(os.path.join(p, "srt", "server_args.py")))
    if not hits:
        raise AuditError(f"no installed sglang in {venv} (looked for lib/python3*/site-packages/sglang/"
                         "srt/server_args.py): run deploy.yml first (its ml_env role builds this venv), "
                         "or check sglang_version and sglang_env_root")
    if len(hits) > 1:
        raise AuditError(f"{venv} holds sglang under several Pythons ({', '.join(hits)}): rebuild the venv")
    return hits[0]


def load_installed(venv: str, version: str | None = None):
    """(SglangSource, path) of the sglang installed in ``venv``; checks the version if given. As root
    (deploy), the reading is cached in the venv for the next readers (plugins/module_utils/source/cache.py)."""
    where = find_installed(venv)
    try:
        src = cached_source(where, write=os.geteuid() == 0)
    except UnknownLayout as exc:
        raise AuditError(f"cannot read the installed SGLang: {exc}") from exc
    if version and src.version != version:
        raise AuditError(f"{where} is sglang {src.version}, not sglang_version {version}: "
                         "the venv was built for another release; run deploy.yml to rebuild it")
    return src, where


def read_model_config(model_path: str | None) -> tuple[dict | None, str]:
    """(config.json as a dict, or None; a note saying where it came from or why it is unknown)."""
    if not model_path:
        return None, "model config unknown: no model_path in the arguments"
    if not str(model_path).startswith("/"):
        return None, (f"model config unknown: {model_path} is a Hugging Face repo id (SGLang downloads it "
                      "at start); the static audit reads config.json only from a folder on the host")
    path = os.path.join(model_path, "config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None, f"model config unknown: {path} does not exist on the host"
    except (OSError, ValueError) as exc:
        return None, f"model config unknown: cannot read {path}: {exc}"
    if not isinstance(data, dict):
        return None, f"model config unknown: {path} is not a JSON object"
    return data, f"from {path} on the host"


# --------------------------------------------------------------------------------------
# Wording
# --------------------------------------------------------------------------------------

def hardware_line(hw: dict) -> str:
    """One line on the GPUs, saying honestly whether they were declared or detected (or that a CPU
    host has none)."""
    source = (hw or {}).get("source")
    if is_cpu_host(hw):
        return (f"hardware: no GPU, the GPU facts are {NOT_ON_CPU}; predictions that depend on the GPU say "
                "'compute capability unknown'")
    if not hw or source == "none" or not hw.get("gpu_count"):
        why = (hw or {}).get("error") or "no sglang_hardware declared and nothing detected"
        return (f"hardware: unknown ({why}); predictions that depend on the GPU say "
                "'compute capability unknown'")
    sm = hw.get("sm") or _sm_of(hw.get("compute_capability"))
    gpus = f"{hw['gpu_count']}x {hw.get('gpu_model')}" + (f" (SM{sm})" if sm else "")
    if source == "declared":
        return f"hardware: {gpus}, declared in the inventory (sglang_hardware), not detected"
    if source == "detected":
        return f"hardware: {gpus}, detected with nvidia-smi"
    return f"hardware: {gpus}, source {source}"


def _sm_of(cc) -> int | None:
    m = re.match(r"^(\d+)\.(\d+)$", str(cc or ""))
    return int(m.group(1)) * 10 + int(m.group(2)) if m else None


def display_value(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        if set(value) >= {"algorithm", "num_steps"}:
            return (f"{value['algorithm']} {value['num_steps']}/{value.get('eagle_topk')}/"
                    f"{value.get('num_draft_tokens')}")
        return json.dumps(value, sort_keys=True)
    return str(value)


def finding_line(f) -> str:
    """`  name: status (value) - reason; rule file:line; override --flag; to enable: ...`."""
    text = f"  {f.name}: {f.status}"
    if f.name in _SHOWS_VALUE and f.value is not None:
        text += f" ({display_value(f.value)})"
    text += f" - {f.reason}"
    if f.rule_file and f.rule_line:
        text += f"; rule {f.rule_file}:{f.rule_line}"
    if f.override and f.status in (AUTO_DISABLED, UNAVAILABLE):
        text += f"; override {f.override}"
    if f.how_to_enable and f.status != ON:
        text += f"; to enable: {f.how_to_enable}"
    return text


def _args_hint(text: str | None) -> str | None:
    """`add --enforce-piecewise-cuda-graph (...)` -> `sglang_args.enforce_piecewise_cuda_graph: true`."""
    m = re.search(r"--([a-z0-9][a-z0-9-]*)(?: ([A-Za-z0-9_.]+))?", text or "")
    if not m:
        return None
    key = m.group(1).replace("-", "_")
    value = m.group(2) if m.group(2) and m.group(2) not in ("or", "and", "with") else "true"
    return f"sglang_args.{key}: {value}"


# --------------------------------------------------------------------------------------
# Expectations
# --------------------------------------------------------------------------------------

@dataclasses.dataclass
class Check:
    """One expectation, with what the audit found."""

    setting: str
    expected: object
    actual: object = None
    ok: bool | None = None        # None: cannot be decided statically (a runtime default)
    source: str = "predicted"     # predicted | server
    reason: str = ""
    fix: str = ""
    unknown: bool = False         # the setting is neither an SGLang argument nor an optimisation

    def message(self, host: str = "") -> str:
        where = f"{host}: " if host else ""
        if self.unknown:
            return f"{where}sglang_expect.{self.setting}: {self.reason}. Fix: {self.fix}"
        verb = "predicted" if self.source == "predicted" else "the server runs"
        expected = self.expected
        if self.setting in OPTIMISATIONS and isinstance(expected, bool):
            expected = "on" if expected else "off"
        text = (f"{where}sglang_expect.{self.setting}: expected {display_value(expected)}, "
                f"{verb} {display_value(self.actual)}")
        if self.reason:
            text += f" ({self.reason})"
        return text + f". Fix: {self.fix}"


def _is_on(expected) -> bool | None:
    if isinstance(expected, bool):
        return expected
    text = str(expected).strip().lower()
    return {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}.get(text)


def same_value(expected, actual) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual or (isinstance(actual, bool) and _is_on(expected) is actual)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, str) and isinstance(actual, str):
        norm = {"NEXTN": "EAGLE"}
        a, b = expected.strip().upper(), actual.strip().upper()
        return norm.get(a, a) == norm.get(b, b)
    return expected == actual


def _by_name(findings) -> dict:
    return {f.name: f for f in findings}


def _dest_value(src, args: dict, key: str):
    """(known, value): what the arguments set for a dest, else the release's static default."""
    if key in args:
        return True, args[key]
    flags = [f for f in src.flags if key in (f.dest, f.field) and not f.deprecated_alias_of]
    if not flags:
        return None, None
    default = flags[0].default
    if isinstance(default, Runtime) or default is None:   # None: SGLang fills it in at start
        return False, None
    return True, default


def check_expectations(src, args: dict, findings, expect: dict) -> list[Check]:
    """Each expectation against the static prediction, in the order of ``expect``."""
    by = _by_name(findings)
    spec = by.get(_SPEC)
    out = []
    for key, expected in (expect or {}).items():
        if key in OPTIMISATIONS:
            out.append(_check_optimisation(key, expected, by[OPTIMISATIONS[key]]))
        elif key in SPECULATIVE:
            value = spec.value if spec is not None else None
            actual = value.get(SPECULATIVE[key]) if isinstance(value, dict) else None
            ok = same_value(expected, actual) if actual is not None else False
            reason = spec.reason if spec is not None else ""
            if spec is not None and spec.rule_file:
                reason += f"; rule {spec.rule_file}:{spec.rule_line}"
            fix = f"set sglang_args.{key}: {display_value(expected)}"
            if key != "speculative_algorithm" and not args.get("speculative_algorithm"):
                fix += " and sglang_args.speculative_algorithm (e.g. NEXTN for MTP heads)"
            out.append(Check(key, expected, actual, ok, reason=reason, fix=fix + f", or change sglang_expect.{key}"))
        elif key in FINDING_VALUES and key in by:
            f = by[key]
            if f.value in (None, "auto"):
                out.append(Check(key, expected, None, None, reason=f.reason,
                                 fix="checked against the running server (runtime phase)"))
            else:
                out.append(Check(key, expected, f.value, same_value(expected, f.value), reason=f.reason,
                                 fix=f"set sglang_args.{key}: {display_value(expected)}, or change sglang_expect.{key}"))
        else:
            known, actual = _dest_value(src, args, key)
            if known is None:
                names = ", ".join(sorted(OPTIMISATIONS))
                out.append(Check(key, expected, None, False, unknown=True,
                                 reason=f"not a setting of sglang {src.version} nor an optimisation name",
                                 fix=f"use an SGLang argument name (argparse dest, e.g. tp_size) or one of: {names}"))
            elif known is False:
                out.append(Check(key, expected, None, None, reason=f"sglang {src.version} computes it at start",
                                 fix="checked against the running server (runtime phase)"))
            else:
                reason = "set in sglang_args" if key in args else f"default of sglang {src.version}"
                out.append(Check(key, expected, actual, same_value(expected, actual), reason=reason,
                                 fix=f"set sglang_args.{key}: {display_value(expected)}, or change sglang_expect.{key}"))
    return out


def _check_optimisation(key: str, expected, f) -> Check:
    want_on = _is_on(expected)
    where = f"; rule {f.rule_file}:{f.rule_line}" if f.rule_file and f.rule_line else ""
    reason = f.reason + where
    if want_on is None:
        if str(expected) not in STATUSES:
            return Check(key, expected, f.status, False, reason=f"{expected!r} is not a status",
                         fix=f"expect one of: on, off, {', '.join(STATUSES[1:])}")
        ok = f.status == str(expected)
    else:
        ok = (f.status == ON) == want_on
    if ok:
        return Check(key, expected, f.status, True, reason=reason)
    if f.status == UNAVAILABLE:
        fix = f"not possible on this hardware; remove sglang_expect.{key} for this host"
    elif f.status != ON and f.how_to_enable:
        hint = _args_hint(f.how_to_enable)
        fix = (f"set {hint}, i.e. {f.how_to_enable}" if hint else f.how_to_enable) + \
            f"; or change sglang_expect.{key}"
    elif f.status == ON:
        fix = f"turn it off in sglang_args (see {f.override})" if f.override else "turn it off in sglang_args"
        fix += f", or change sglang_expect.{key}"
    else:
        fix = f"change sglang_args (see {f.override}) or sglang_expect.{key}" if f.override else \
            f"change sglang_expect.{key}"
    return Check(key, expected, f.status, False, reason=reason, fix=fix)


# --------------------------------------------------------------------------------------
# Static audit
# --------------------------------------------------------------------------------------

def static_audit(src, args: dict, hardware: dict, expect: dict | None = None, *, source_path: str = "",
                 model_config: dict | None = None, model_note: str = "", host: str = "",
                 assertions: list | None = None, environment: dict | None = None) -> dict:
    """The static report (a JSON-able dict) for one host; ``report["failures"]`` lists what fails.

    ``args`` is the host model's mapping (sglang_host.args); it goes through the same
    mapping as the unit (sglang_argv), the release's parser and ``normalise_argv``.
    ``assertions`` (sglang_source_assertions) are evaluated over the installed package folder
    (``source_path``); each one that fails or cannot be checked fails the report like an unmet
    expectation. Invalid assertion data raises AuditError (preflight refuses it earlier).
    ``environment`` (the service's) is searched for packages that shadow the release's.
    """
    where = f"{host}: " if host else ""
    problems = validate_assertions(assertions)
    if problems:
        raise AuditError(f"{where}" + "; ".join(problems))
    try:
        argv = to_argv(args)
    except ArgsError as exc:
        raise AuditError(f"{where}{exc}") from exc
    problems = validate_argv(src, argv, model_config, hardware)   # + start-up refusals for this model
    errors = [p for p in problems if p.severity == "error"]
    if errors:
        raise AuditError(f"{where}sglang {src.version} would refuse these arguments: "
                         + "; ".join(p.message for p in errors) + ". Fix sglang_args in the inventory.")
    norm = normalise_argv(src, argv)
    findings = predict(src, norm, hardware or {}, model_config or {})
    checks = check_expectations(src, norm, findings, expect or {})
    archs = list((model_config or {}).get("architectures") or [])
    report = {
        "host": host,
        "phase": "static",
        "sglang": {"version": src.version, "era": src.era, "source_path": source_path or src.path},
        "hardware": {k: (hardware or {}).get(k) for k in
                     ("source", "gpu_model", "gpu_count", "compute_capability", "sm", "interconnect", "error")},
        "model": {"path": norm.get("model_path"), "architectures": archs,
                  "config": "read" if model_config is not None else "unknown", "note": model_note},
        "argv": argv,
        "args": norm,
        "warnings": [p.message for p in problems],
        "shadowed": shadowed_packages(environment, source_path or src.path),
        "findings": [dataclasses.asdict(f) for f in findings],
        "expectations": [dataclasses.asdict(c) for c in checks],
        "failures": [c.message(host) for c in checks if c.ok is False],
    }
    report["warnings"] += [shadowed_warning(entry) for entry in report["shadowed"]]
    results = evaluate_assertions(assertions or [], str(source_path or src.path))
    report["assertions"] = results
    report["failures"] += [assertion_failure(r, src.version, host) for r in results if r["status"] != "pass"]
    report["lines"] = _static_lines(report, src, findings, checks, host) + assertion_lines(results, src.version, host)
    report["ok"] = not report["failures"]
    return report


def shadowed_packages(environment: dict | None, source_path: str) -> list[dict]:
    """Packages of the installed release that the service's PYTHONPATH puts something else ahead of.

    ``environment`` is the service's (sglang_host.service.environment); ``source_path`` the installed
    ``sglang`` package folder, whose parent is the venv's site-packages. Each entry: ``{"package",
    "path" (what the server imports), "lab_standin" (the lab's sgl_kernel stand-in, which says so with
    ``LAB_STANDIN = True``)}``. The lab's real-SGLang host is the case in point (lab/real_sglang):
    its reports must say that sgl_kernel is not the release's.
    """
    site = os.path.dirname(os.path.abspath(source_path)) if source_path else ""
    found = []
    for entry in str((environment or {}).get("PYTHONPATH") or "").split(":"):
        if not entry or not site or not os.path.isdir(entry):
            continue
        for name in sorted(os.listdir(entry)):
            package = name[:-3] if name.endswith(".py") else name
            init = os.path.join(entry, name) if name.endswith(".py") else os.path.join(entry, name, "__init__.py")
            if not os.path.isfile(init) or not (os.path.isdir(os.path.join(site, package))
                                                or os.path.isfile(os.path.join(site, package + ".py"))):
                continue
            try:
                with open(init, encoding="utf-8", errors="replace") as fh:
                    standin = re.search(r"^LAB_STANDIN\s*=\s*True", fh.read(), re.M) is not None
            except OSError:
                standin = False
            found.append({"package": package, "path": os.path.join(entry, name), "lab_standin": standin})
    return found


def shadowed_warning(entry: dict) -> str:
    what = ("the lab's stand-in for sglang-kernel's CPU build (lab/real_sglang/README.md), not the release's kernels"
            if entry["lab_standin"] else "not the release's")
    return (f"{entry['package']} is shadowed by the service's PYTHONPATH: the server imports {entry['path']}, "
            f"{what}")


def _static_lines(report, src, findings, checks, host) -> list[str]:
    m = report["model"]
    model = f"model: {m['path']}"
    model += f" ({', '.join(m['architectures'])}, {m['note']})" if m["config"] == "read" else f" ({m['note']})"
    lines = [f"{host + ': ' if host else ''}sglang {src.version} (era {src.era}) read from "
             f"{report['sglang']['source_path']}",
             hardware_line(report["hardware"]), model]
    lines += [f"warning: {w}" for w in report["warnings"]]
    lines.append("optimisations (static prediction from the installed source):")
    lines += [finding_line(f) for f in findings]
    lines += _expectation_lines(checks, host)
    return lines


def _expectation_lines(checks, host) -> list[str]:
    if not checks:
        return ["expectations: none (set sglang_expect for this host)"]
    bad = [c for c in checks if c.ok is False]
    later = [c for c in checks if c.ok is None]
    head = f"expectations: {len(checks)} checked, " + (f"{len(bad)} NOT met" if bad else "all met")
    if later:
        head += f", {len(later)} left to the runtime phase ({', '.join(c.setting for c in later)})"
    return [head] + [f"  FAILED {c.message(host)}" for c in bad]


# --------------------------------------------------------------------------------------
# Runtime: the running server's resolved settings
# --------------------------------------------------------------------------------------

def _first(base: str, paths, api_key: str, timeout: float):
    """(path, json) of the first endpoint that exists (404 -> the next name)."""
    last = None
    for path in paths:
        try:
            return path, get_json(base + path, api_key, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                last = exc
                continue
            if exc.code == 401:
                raise AuditError(f"{base}{path} answered 401 Unauthorized: the server has an API key; put it "
                                 "in sglang_service_secrets.SGLANG_API_KEY") from exc
            raise AuditError(f"{base}{path} answered HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AuditError(f"cannot reach {base}{path}: {reason}; is the service running "
                             "(systemctl status sglang, or run deploy.yml)?") from exc
        except ValueError as exc:
            raise AuditError(f"{base}{path} did not answer JSON: {exc}") from exc
    raise AuditError(f"{base} has none of {', '.join(paths)} (last: HTTP {last.code if last else '?'})")


def read_server(url: str, api_key: str = "", timeout: float = 10.0, secrets=()) -> dict:
    """Resolved settings and model info of a running server (new endpoint names, then old ones).

    Secrets are redacted here, where they are read (``sglang_args.redact_server_info``): real
    SGLang returns api_key/admin_api_key in clear and, from 0.5.20, the argv with ``--api-key``
    in ``launch_command``; ``api_key`` and ``secrets`` are also replaced wherever they appear.
    """
    base = url.rstrip("/")
    known = [api_key, *secrets]
    ep, info = _first(base, ("/server_info", "/get_server_info"), api_key, timeout)
    try:
        mep, model = _first(base, ("/model_info", "/get_model_info"), api_key, timeout)
    except AuditError:
        mep, model = None, None
    if not isinstance(info, dict):
        raise AuditError(f"{base}{ep} did not answer a JSON object")
    info, model = redact_server_info(info, known), redact_server_info(model, known)
    return {"url": base, "endpoint": ep, "server_info": info, "model_endpoint": mep, "model_info": model,
            "max_model_len": _max_model_len(base, api_key, timeout)}


def _max_model_len(base: str, api_key: str, timeout: float):
    """The context length the server resolved, from /v1/models (every release the project covers:
    ModelCard.max_model_len = model_config.context_len, 0.5.11 srt/entrypoints/http_server.py:1612,
    0.5.23 :2005); /server_info only shows --context-length as given. None when it does not say."""
    try:
        cards = get_json(base + "/v1/models", api_key, timeout).get("data") or []
        value = cards[0].get("max_model_len") if cards and isinstance(cards[0], dict) else None
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _on_at_runtime(name: str, r: dict):
    """(on?, evidence) for an optimisation in resolved settings; None when the server does not say
    (the registry's reader of /server_info for that label)."""
    opt = BY_LABEL.get(name)
    return opt.read(r) if opt is not None and opt.read is not None else None


def _spec_at_runtime(r: dict) -> dict | None:
    algo = r.get("speculative_algorithm")
    if not algo:
        return None
    algo = str(algo).upper()
    return {"algorithm": "EAGLE" if algo == "NEXTN" else algo, "num_steps": r.get("speculative_num_steps"),
            "eagle_topk": r.get("speculative_eagle_topk"), "num_draft_tokens": r.get("speculative_num_draft_tokens")}


def _pred_text(f) -> str:
    text = f"{f.status}" + (f" ({display_value(f.value)})" if f.name == _SPEC and f.value else "")
    if f.rule_file and f.rule_line:
        text += f", rule {f.rule_file}:{f.rule_line}"
    return text


_UNMODELLED = ("Something at start-up that the static audit does not model changed it: read the service log, "
               "and compare sglang_args with the server's launch_command")
_STALE = "The server runs other arguments than the inventory's (see above): run deploy.yml, then audit again"


def compare_resolved(findings, resolved: dict, why: str = _UNMODELLED) -> tuple[list[dict], list[str]]:
    """(mismatches, lines): each finding against the server's resolved settings.

    A mismatch is ``{"name", "predicted", "server", "message"}`` with the message
    "SGLang resolved <name> differently than predicted: predicted ..., server says ...".
    """
    mismatches, lines = [], []

    def miss(f, predicted, server):
        msg = f"SGLang resolved {f.name} differently than predicted: predicted {predicted}, server says {server}. {why}"
        mismatches.append({"name": f.name, "predicted": predicted, "server": server, "message": msg})
        lines.append(f"  MISMATCH {f.name}: predicted {predicted}; server says {server}")

    for f in findings:
        if f.name == _SPEC:
            pred = f.value if isinstance(f.value, dict) else None
            got = _spec_at_runtime(resolved)
            if pred is None and got is None:
                lines.append(f"  {f.name}: off, as predicted (speculative_algorithm=unset)")
            elif pred is None or got is None or any(
                    not same_value(pred[k], got[k]) for k in ("algorithm", "num_steps", "eagle_topk", "num_draft_tokens")
                    if pred.get(k) is not None):
                server = "speculative_algorithm=unset" if got is None else (
                    f"speculative_algorithm={got['algorithm']} speculative_num_steps={display_value(got['num_steps'])} "
                    f"speculative_eagle_topk={display_value(got['eagle_topk'])} "
                    f"speculative_num_draft_tokens={display_value(got['num_draft_tokens'])}")
                miss(f, _pred_text(f), server)
            else:
                lines.append(f"  {f.name}: {display_value(got)}, as predicted")
        elif f.name in FINDING_VALUES:
            key = FINDING_VALUES[f.name]
            if key not in resolved:
                continue
            if isinstance(f.value, (int, float)) and not isinstance(f.value, bool) and f.reason == "set explicitly" \
                    and resolved[key] is not None:
                if not same_value(f.value, resolved[key]):
                    miss(f, f"{display_value(f.value)} (set explicitly)", f"{key}={display_value(resolved[key])}")
                else:
                    lines.append(f"  {f.name}: {display_value(resolved[key])}, as predicted ({key}={display_value(resolved[key])})")
                continue
            if resolved[key] is None:   # e.g. context_length: /server_info shows the flag as given (0.5.23)
                lines.append(f"  {f.name}: the server shows {key} as given (unset), not what it resolved "
                             f"(predicted {display_value(f.value)})")
                continue
            if same_value(f.value, resolved[key]):
                lines.append(f"  {f.name}: {display_value(resolved[key])}, as predicted ({key}={display_value(resolved[key])})")
                continue
            # derived by SGLang (the model's rope scaling, the device's memory): said, not failed
            lines.append(f"  {f.name}: server resolved {key}={display_value(resolved[key])} (predicted {display_value(f.value)})")
        else:
            got = _on_at_runtime(f.name, resolved)
            if got is None:
                lines.append(f"  {f.name}: the server does not report it (predicted {f.status})")
                continue
            on, evidence = got
            if on != (f.status == ON):
                miss(f, _pred_text(f), evidence)
            else:
                lines.append(f"  {f.name}: {'on' if on else 'off'}, as predicted ({evidence})")
    return mismatches, lines


def _launch_args(src, info: dict):
    launch = info.get("launch_command")
    if not launch:
        return None
    words = shlex.split(launch) if isinstance(launch, str) else [str(w) for w in launch]
    # "python -m sglang.launch_server --model-path ..." or just the flags
    start = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    try:
        return normalise_argv(src, words[start:])
    except ValueError:
        return None


def runtime_audit(report: dict, src, server: dict, expect: dict | None = None, *, host: str = "",
                  check_mode: bool = False) -> dict:
    """Add the running server's view to a static report (in place) and return it.

    ``server`` is ``read_server``'s result. The server's launch arguments (when it reports them)
    are compared with the inventory's: when they differ the server has not been restarted with
    the inventory's flags yet (``restart_pending``); under check mode that is what deploy would
    do, so the differences are reported but do not fail.
    """
    where = f"{host}: " if host else ""
    info = server["server_info"]
    findings = [Finding(**f) for f in report["findings"]]
    failures = []
    lines = [f"runtime ({server['url']}{server['endpoint']}, server reports sglang {info.get('version', '?')}):"]
    pending = []
    if info.get("version") and info["version"] != src.version:
        pending.append(f"sglang version (venv {src.version}, server {info['version']})")
    launch = _launch_args(src, info)
    if launch is not None:
        want = report["args"]
        for key in sorted(set(launch) | set(want)):
            # Secrets are never compared (read_server redacted them; the inventory has none).
            # A flag missing from launch_command is left to the resolved-settings compare.
            if key in SECRET_FIELDS:
                continue
            if key in launch and not same_value(want.get(key), launch[key]):
                pending.append(f"{key} (inventory {display_value(want.get(key))}, server {display_value(launch[key])})")
    if pending:
        failures.append(f"{where}the server was not started with the inventory's SGLang and arguments: "
                        f"{'; '.join(pending)}. " + ("deploy.yml would restart it." if check_mode else
                                                     "Run deploy.yml to restart it with the inventory's."))
    resolved = dict(info)
    if resolved.get("context_length") is None and server.get("max_model_len") is not None:
        resolved["context_length"] = server["max_model_len"]
        lines.append(f"  (context_length is /v1/models' max_model_len, {server['max_model_len']}: /server_info "
                     "shows the flag as given)")
    mismatches, cmp_lines = compare_resolved(findings, resolved, _STALE if pending else _UNMODELLED)
    lines += cmp_lines
    failures += [f"{where}{m['message']}" for m in mismatches]
    checks = _runtime_expectations(report, info, expect or {})
    failures += [c.message(host) for c in checks if c.ok is False]
    state = (info.get("internal_states") or [{}])[0] if isinstance(info.get("internal_states"), list) else {}
    accept = state.get("avg_spec_accept_length") if isinstance(state, dict) else None
    if accept is not None:
        lines.append(f"  average speculative accept length so far: {accept:.2f}")
    model_info = server.get("model_info") or {}
    if model_info.get("architectures") and report["model"]["config"] == "unknown":
        lines.append(f"  model (from the server's {server.get('model_endpoint')}): "
                     f"{', '.join(model_info['architectures'])}; the static prediction did not know it")
    bad = [c for c in checks if c.ok is False]
    if checks:
        lines.append(f"expectations against the server: {len(checks)} checked, "
                     + (f"{len(bad)} NOT met" if bad else "all met"))
    # Under --check a server still running older flags is what deploy would restart: report, not fail.
    notes = failures if (pending and check_mode) else []
    if notes:
        failures = []
    lines += [f"  FAILED {f}" for f in failures] + [f"  note (check mode, restart pending): {n}" for n in notes]
    report["runtime"] = {
        "url": server["url"], "endpoint": server["endpoint"], "version": info.get("version"),
        "model_info": model_info, "restart_pending": bool(pending), "pending": pending,
        "mismatches": mismatches, "expectations": [dataclasses.asdict(c) for c in checks],
        "avg_spec_accept_length": accept, "notes": notes,
        "resolved": {k: info.get(k) for k in _RESOLVED_KEYS if k in info},
        "lines": lines,
    }
    report["phase"] = "runtime"
    report["failures"] = list(report["failures"]) + [f for f in failures if f not in report["failures"]]
    report["lines"] = list(report["lines"]) + lines
    report["ok"] = not report["failures"]
    return report


_RESOLVED_KEYS = ("model_path", "tp_size", *SERVER_FIELDS, "launch_command")


def _runtime_expectations(report: dict, info: dict, expect: dict) -> list[Check]:
    static = {c["setting"]: c for c in report["expectations"]}
    by = {f["name"]: f for f in report["findings"]}
    out = []
    for key, expected in expect.items():
        st = static.get(key) or {}
        if key in OPTIMISATIONS:
            got = _on_at_runtime(OPTIMISATIONS[key], info)
            if got is None:
                continue
            on, evidence = got
            want = _is_on(expected)
            if want is None:   # a status: only "on" or not can be seen at run time
                want = str(expected) == "on"
            actual = "on" if on else "off"
            ok = on == want
            reason = f"server_info {evidence}"
        elif key in SPECULATIVE or key in info:
            if key not in info:
                continue
            actual = info[key]
            ok = same_value(expected, actual) if actual is not None else expected is None
            reason = f"server_info {key}"
        else:
            continue
        if ok:
            out.append(Check(key, expected, actual, True, source="server", reason=reason))
            continue
        if st.get("ok") is False:
            fix = st.get("fix", "")
        else:
            pred = by.get(OPTIMISATIONS.get(key, ""), {}).get("status") if key in OPTIMISATIONS else st.get("actual")
            fix = (f"sglang_args already give it (predicted {display_value(pred)}); SGLang changed it at start-up: read "
                   "the service log, and check the service was restarted after the last deploy")
        out.append(Check(key, expected, actual, False, source="server", reason=reason, fix=fix))
    return out


def result_for(report: dict) -> dict:
    """The module's return values for a report."""
    return {"report": report, "lines": report["lines"], "failures": report["failures"], "ok": report["ok"]}
