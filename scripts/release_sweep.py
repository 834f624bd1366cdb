#!/usr/bin/env python3
"""Check the source reader on every SGLang release on PyPI against that release's REAL parser.

    make sweep                        # every release >= 0.4.6 -> docs/release-sweep.md
    .venv/bin/python scripts/release_sweep.py [--releases 0.5.11 0.5.23] [--tree DIR ...]
                                              [--out FILE] [--offline] [--pre]

For each release: the wheel (pip download --no-deps, cached in .cache/sglang-wheels like the tests'
wheels, 2 downloads at a time), the reader's layout (era) and flag table (module_utils/sglang_source),
the real argparse parser built from the wheel (scripts/release_sweep_real_parser.py: sglang's own
server_args.py / arg_groups run under `python -S`, stdlib-only sglang modules real, the rest
stubbed) and their differences: option strings missing / extra / out of order, and per flag dest,
action, nargs, required, type, choices, default. Then a fixed set of probe argvs (a removed flag, a
renamed one, --help, a typo, ...) is validated by the reader AND parsed by the real parser (each
verdict must agree; each replacement the reader suggests must parse), and the seeds' ct129 profile
(inventories/lab/host_vars/ct129.yml: 2x RTX A6000 SM86, Qwen3.6-27B, TP 2, NEXTN 3/1/4) goes
through the static audit (to_argv -> validate -> normalise -> predict -> sglang_expect).

The release list comes from PyPI's JSON API (final releases; --pre adds release candidates); offline,
from the pinned tests/fixtures/sglang_releases.txt (rewritten when PyPI answers). Exit 1 when any
release has a mismatch, a disagreement, a bad suggestion, or could not be read (an unknown layout
fails loudly: named in the table and on stderr, never a silent wrong table).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import pathlib
import subprocess
import sys
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
# the collection's code imports as Ansible imports it (pytest.ini does the same for the tests)
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / ".collections")]
import yaml  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402
from wheels import msgspec_dir, sglang_source_tree  # noqa: E402  (the tests' shared wheel cache)

from ansible_collections.sglang.fleet.plugins.module_utils import source as reader  # noqa: E402
from ansible_collections.sglang.fleet.plugins.module_utils.source.optimisations import SHORT, Status  # noqa: E402

REAL_PARSER = REPO / "scripts" / "release_sweep_real_parser.py"
PINNED = REPO / "tests" / "fixtures" / "sglang_releases.txt"
OUT = REPO / "docs" / "release-sweep.md"
CT129 = REPO / "inventories" / "lab" / "host_vars" / "ct129.yml"
PYPI_JSON = "https://pypi.org/pypi/sglang/json"
OLDEST = Version("0.4.6")
DOWNLOADS = 2                 # parallel wheel downloads (the machine has 2 cores)

# Probe argvs after "--model-path m": (column label, argv). Each is validated by the reader and
# parsed by the real parser of every release; the two verdicts must agree.
PROBES = (
    ("--enable-ep-moe", ["--enable-ep-moe"]),                     # removed (raises <= 0.5.7)
    ("--enable-flashinfer-mla", ["--enable-flashinfer-mla"]),     # removed
    ("--cuda-graph-max-bs 8", ["--cuda-graph-max-bs", "8"]),      # split 0.5.14, ambiguous 0.5.20+
    ("--enable-flashinfer-allreduce-fusion", ["--enable-flashinfer-allreduce-fusion"]),  # renamed 0.5.14
    ("--disable-cuda-graph", ["--disable-cuda-graph"]),
    ("--help", ["--help"]),
    ("--he", ["--he"]),                                           # prefix of --help
    ("--tp 2", ["--tp", "2"]),                                    # prefix of --tp-size
    ("--tp-szie 2", ["--tp-szie", "2"]),                          # typo
    ("--attention-backend nope", ["--attention-backend", "nope"]),  # bad choice
)

_ARGPARSE_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
                     "_StoreFalseAction": "store_false", "_StoreConstAction": "store_const",
                     "_AppendAction": "append", "_AppendConstAction": "append_const",
                     "_CountAction": "count", "_ExtendAction": "extend", "_HelpAction": "help"}


class SweepError(Exception):
    """A release the sweep could not check (download, unknown layout, real parser failure)."""


@dataclasses.dataclass
class Row:
    release: str
    era: str = ""
    flags: int = 0                       # reader's flags (add_argument calls), without -h/--help
    options: int = 0                     # option strings of the real parser, without -h/--help
    mismatches: list = dataclasses.field(default_factory=list)   # reader vs real parser
    compared: dict = dataclasses.field(default_factory=dict)     # attribute -> flags compared
    loose: list = dataclasses.field(default_factory=list)        # reader: run-time value (accepts any)
    unverifiable: list = dataclasses.field(default_factory=list)  # real value came from a stub
    verdicts: dict = dataclasses.field(default_factory=dict)     # probe label -> reader verdict
    disagreements: list = dataclasses.field(default_factory=list)
    suggestions_checked: int = 0
    bad_suggestions: list = dataclasses.field(default_factory=list)
    ct129: str = ""
    seconds: float = 0.0
    failure: str | None = None

    @property
    def problems(self) -> int:
        return len(self.mismatches) + len(self.disagreements) + len(self.bad_suggestions)


# --------------------------------------------------------------------------------------
# Releases
# --------------------------------------------------------------------------------------

def _keep(v: str, pre: bool) -> bool:
    try:
        ver = Version(v)
    except InvalidVersion:
        return False
    return ver >= OLDEST and (pre or not ver.is_prerelease)


def pypi_releases(pre: bool = False, timeout: float = 30) -> list[str]:
    """Releases >= 0.4.6 with a wheel that is not yanked, oldest first (PyPI's JSON API)."""
    with urllib.request.urlopen(PYPI_JSON, timeout=timeout) as resp:  # noqa: S310 - fixed https URL
        return releases_from_json(json.load(resp), pre)


def releases_from_json(data: dict, pre: bool = False) -> list[str]:
    """The releases of a PyPI JSON API answer worth sweeping, oldest first."""
    out = [v for v, files in data["releases"].items()
           if _keep(v, pre) and any(f["packagetype"] == "bdist_wheel" and not f.get("yanked") for f in files)]
    return sorted(out, key=Version)


def pinned_releases(pre: bool = False) -> list[str]:
    lines = PINNED.read_text(encoding="utf-8").splitlines()
    return sorted((ln.strip() for ln in lines if ln.strip() and not ln.startswith("#") and _keep(ln.strip(), pre)),
                  key=Version)


def write_pinned(versions: list[str]) -> None:
    head = ("# SGLang releases on PyPI >= 0.4.6 with a wheel (final releases), oldest first.\n"
            "# Written by scripts/release_sweep.py from https://pypi.org/pypi/sglang/json; read when offline.\n")
    text = head + "".join(v + "\n" for v in versions)
    if not PINNED.is_file() or PINNED.read_text(encoding="utf-8") != text:
        PINNED.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------------------
# The real parser (a throwaway `python -S` interpreter)
# --------------------------------------------------------------------------------------

def real_parser(pkg: pathlib.Path, parse: list | None = None):
    """The real parser's actions (a dict), or with ``parse`` its verdict on each argv."""
    cmd = [sys.executable, "-S", "-s", str(REAL_PARSER), *(["--parse"] if parse is not None else []),
           str(pkg.parent), str(msgspec_dir())]
    proc = subprocess.run(cmd, input=json.dumps(parse) if parse is not None else None, capture_output=True,
                          text=True, check=False, timeout=300)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise SweepError(f"the real parser of {pkg} could not be built: {tail[0]}")
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------------------
# Reader vs real parser
# --------------------------------------------------------------------------------------

def _norm(value):
    """A reader or real-parser value in one comparable form (tuples as lists, JSON-ish)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    return value


def _choice_key(c) -> str:
    return c if isinstance(c, str) else json.dumps(_norm(c))


def _type_name(t) -> str | None:
    return "<lambda>" if t == "lambda" else t


def compare(src, real: dict, row: Row) -> None:
    """Fill ``row`` with every difference between the reader's table and the real parser."""
    actions = real["actions"]
    real_opts = [o for a in actions for o in a["option_strings"]]
    mine_opts = src.option_strings()
    row.options = len(real_opts) - 2
    missing = [o for o in real_opts if o not in set(mine_opts)]
    extra = [o for o in mine_opts if o not in set(real_opts)]
    row.mismatches += [f"missing {o}" for o in missing] + [f"extra {o}" for o in extra]
    if not missing and not extra and mine_opts != real_opts:
        first = next(i for i, (a, b) in enumerate(zip(mine_opts, real_opts)) if a != b)
        row.mismatches.append(f"order: option {first} is {mine_opts[first]} in the reader, "
                              f"{real_opts[first]} in the real parser")
    count = dict.fromkeys(("dest", "action", "nargs", "required", "type", "choices", "default"), 0)
    for a in actions:
        if a["action"] == "_HelpAction":
            continue
        f = next((src.by_option[o] for o in a["option_strings"] if o in src.by_option), None)
        if f is None:
            continue
        name = a["option_strings"][0]

        def differ(attr, mine, theirs, name=name):
            count[attr] += 1
            if mine != theirs:
                row.mismatches.append(f"{name}: {attr} reader {mine!r} vs parser {theirs!r}")

        differ("dest", f.dest, a["dest"])
        differ("action", f.action, _ARGPARSE_ACTIONS.get(a["action"], a["action"]))
        differ("nargs", f.nargs, a["nargs"])
        differ("required", f.required, a["required"])
        if isinstance(a["type"], dict):
            row.unverifiable.append(f"{name} type")
        elif a["action"] not in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction",
                                 "BooleanOptionalAction") and a["nargs"] != 0:
            differ("type", _type_name(f.type), a["type"])
        if isinstance(a["choices"], dict):
            row.unverifiable.append(f"{name} choices")
        elif isinstance(f.choices, reader.Runtime):
            row.loose.append(f"{name} choices")
        else:
            differ("choices", sorted(map(_choice_key, f.choices)) if f.choices is not None else None,
                   a["choices"])
        if isinstance(a["default"], dict) and ("stub" in a["default"] or "repr" in a["default"]):
            row.unverifiable.append(f"{name} default")
        elif isinstance(f.default, reader.Runtime):
            row.loose.append(f"{name} default")
        else:
            differ("default", _norm(f.default), _norm(a["default"]))
    row.compared = count


# --------------------------------------------------------------------------------------
# Validation probes and suggestions, checked with the real parser
# --------------------------------------------------------------------------------------

def _verdict(problems) -> str:
    if not problems:
        return "ok"
    return ", ".join(p.kind + ("(warn)" if p.severity != "error" else "") for p in problems)


def _suggestion_cases(src) -> list[tuple[str, str]]:
    """(old flag, suggested argv) for every removed/renamed flag the reader knows of in this release."""
    olds = [f.option_strings[0] for f in src.flags
            if f.deprecated_alias_of or f.removed_message or f.action.startswith("Deprecated")]
    olds += [o for o in reader.FLAG_HISTORY if not src.has(o)]
    cases = []
    for old in olds:
        f = src.by_option.get(old)
        argv = [old, "1"] if (f.takes_value if f is not None else True) else [old]
        if f is not None and f.takes_value and isinstance(f.choices, list) and f.choices:
            argv[1] = str(f.choices[0])
        for p in reader.validate_argv(src, ["--model-path", "m", *argv]):
            if p.kind in ("removed", "renamed"):
                cases += [(old, s) for s in p.suggestion]
    return cases


def probe(src, pkg: pathlib.Path, row: Row) -> None:
    argvs = [["--model-path", "m", *argv] for _, argv in PROBES]
    verdicts = [reader.validate_argv(src, argv) for argv in argvs]
    cases = _suggestion_cases(src)
    for (label, _), problems in zip(PROBES, verdicts):
        cases += [(label, s) for p in problems if p.kind in ("removed", "renamed") for s in p.suggestion]
    results = real_parser(pkg, parse=argvs + [["--model-path", "m", *s.split()] for _, s in cases])
    for (label, _), problems, res in zip(PROBES, verdicts, results):
        row.verdicts[label] = _verdict(problems)
        accepts = not any(p.severity == "error" for p in problems)
        if accepts != res["ok"]:
            real = "accepts" if res["ok"] else f"rejects ({' '.join(res['error'])[:120]})"
            row.disagreements.append(f"{label}: reader {row.verdicts[label]}, real parser {real}")
    row.suggestions_checked = len(cases)
    for (old, s), res in zip(cases, results[len(argvs):]):
        if not res["ok"]:
            row.bad_suggestions.append(f"{old} -> '{s}': real parser: {' '.join(res['error'])[:120]}")


# --------------------------------------------------------------------------------------
# The seeds' ct129 profile through the static audit
# --------------------------------------------------------------------------------------

_SHORT = SHORT   # label -> column name, from the registry of audited optimisations
_STATUS = {Status.AUTO_DISABLED.value: "auto-disabled", Status.UNAVAILABLE.value: "unavailable",
           Status.OFF_BY_DEFAULT.value: "off", Status.ON.value: "on"}


def ct129_profile() -> dict:
    hv = yaml.safe_load(CT129.read_text(encoding="utf-8"))
    return {"args": hv["sglang_args"], "hardware": hv["sglang_hardware"], "expect": hv.get("sglang_expect") or {},
            "model_config": hv["lab_model"]["config"]}


def predict_ct129(src, profile: dict) -> str:
    from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import AuditError, static_audit
    from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts
    try:
        report = static_audit(src, profile["args"], declared_facts(profile["hardware"]), profile["expect"],
                              model_config=profile["model_config"], host="ct129")
    except AuditError as exc:
        return f"refused: {str(exc)[:160]}"
    parts = []
    for f in report["findings"]:
        short = _SHORT.get(f["name"])
        if short is None:
            continue
        text = f"{short} {_STATUS.get(f['status'], f['status'])}"
        if short == "spec" and isinstance(f.get("value"), dict):
            v = f["value"]
            text = f"spec {v['algorithm']} {v['num_steps']}/{v['eagle_topk']}/{v['num_draft_tokens']}"
        elif f["status"] == "auto-disabled" and f.get("rule_file"):
            text += f" ({f['rule_file'].replace('sglang/srt/', '')}:{f['rule_line']})"
        parts.append(text)
    checks = report["expectations"]
    failed = [c["setting"] for c in checks if c["ok"] is False]
    unknown = [c["setting"] for c in checks if c["ok"] is None]
    parts.append(f"sglang_expect {sum(c['ok'] is True for c in checks)}/{len(checks)} met"
                 + (f", failed: {', '.join(failed)}" if failed else "")
                 + (f", unknown: {', '.join(unknown)}" if unknown else ""))
    return "; ".join(parts)


# --------------------------------------------------------------------------------------
# One release
# --------------------------------------------------------------------------------------

def check_tree(pkg: pathlib.Path, release: str, profile: dict | None = None) -> Row:
    """Every check on one extracted ``sglang/`` folder; a failure is recorded, never raised."""
    row = Row(release)
    start = time.monotonic()
    try:
        src = reader.load_source(pkg)
        row.era, row.flags = src.era, len(src.flags)
        if release != src.version and not release.startswith(str(pkg)):
            raise SweepError(f"the reader says version {src.version}, the wheel is {release}")
        compare(src, real_parser(pkg), row)
        probe(src, pkg, row)
        row.ct129 = predict_ct129(src, profile or ct129_profile())
    except reader.UnknownLayout as exc:
        row.failure = f"unknown layout: {exc}"
    except (SweepError, subprocess.TimeoutExpired, OSError) as exc:
        row.failure = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a reader crash is a finding, reported like the others
        row.failure = f"reader crashed: {type(exc).__name__}: {exc}"
    row.seconds = time.monotonic() - start
    return row


def check_release(version: str, profile: dict | None = None) -> Row:
    try:
        pkg = sglang_source_tree(version)
    except Exception as exc:  # noqa: BLE001 - download/extraction
        return Row(version, failure=f"download: {type(exc).__name__}: {str(exc)[-300:]}")
    return check_tree(pkg, version, profile)


# --------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------

ERAS = {"A": "A (add_argument)", "B": "B (dataclass fields)", "C": "C (arg_groups Structs)"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(rows: list[Row], *, origin: str, total_s: float) -> str:
    checked = [r for r in rows if r.failure is None]
    failed = [r for r in rows if r.failure is not None]
    bad = [r for r in checked if r.problems]
    lines = [
        "# Release sweep: the source reader on every SGLang release",
        "",
        "Written by `make sweep` (scripts/release_sweep.py); do not edit by hand. For each release on PyPI from",
        "0.4.6 on, the reader's flag table (plugins/module_utils/source/) is compared with the release's REAL",
        "argparse parser, built from its wheel (scripts/release_sweep_real_parser.py: sglang's own",
        "server_args.py and arg_groups/ executed, sglang modules whose imports are all standard library run",
        "for real, every other import stubbed); probe argvs are validated by the reader and parsed by the real",
        "parser; the seeds' ct129 profile (inventories/lab/host_vars/ct129.yml: 2x RTX A6000 SM86,",
        "Qwen3.6-27B, TP 2, NEXTN 3/1/4) goes through the static audit.",
        "",
        f"- run: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {total_s:.0f} s in all "
        f"(downloads included, {DOWNLOADS} at a time); releases from {origin}",
        f"- releases: {len(rows)} ({rows[0].release if rows else '-'} .. {rows[-1].release if rows else '-'}); "
        f"checked {len(checked)}, failed {len(failed)}"
        + (f" ({', '.join(r.release for r in failed)})" if failed else ""),
        f"- reader vs real parser: {sum(len(r.mismatches) for r in checked)} mismatches, "
        f"{sum(len(r.disagreements) for r in checked)} validation disagreements, "
        f"{sum(len(r.bad_suggestions) for r in checked)} suggestions that do not parse "
        f"(of {sum(r.suggestions_checked for r in checked)}); releases with any: "
        + (", ".join(r.release for r in bad) or "none"),
        f"- compared per flag: dest, action, nargs, required, type, choices, default "
        f"({sum(sum(r.compared.values()) for r in checked)} comparisons); not compared: "
        f"{sum(len(r.loose) for r in checked)} values the reader leaves to run time (its parser accepts any "
        f"value there) and {sum(len(r.unverifiable) for r in checked)} the real parser only has from a stub",
        "",
        "Columns: **flags** the reader's add_argument calls / the real parser's option strings (without",
        "-h/--help); **mismatch** reader vs real parser (option strings missing, extra or out of order;",
        "dest, action, nargs, required, type, choices, default); **disagree** probes where the reader's",
        "verdict (error or not) differs from the real parser's; **bad sugg.** suggested replacements the",
        "real parser rejects, of those checked; then the reader's verdict on each probe (after",
        "`--model-path m`; `ok` accepted, `(warn)` accepted with a warning, other kinds are errors),",
        "the ct129 prediction and the seconds the checks took (download excluded).",
        "",
    ]
    head = ["release", "layout", "flags", "mismatch", "disagree", "bad sugg."] + [f"`{p}`" for p, _ in PROBES] \
        + ["ct129 prediction", "s"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.failure is not None:
            cells = [r.release, r.era or "?", "-", f"**FAILED**: {_cell(r.failure)[:300]}", "-", "-"] \
                + ["-"] * len(PROBES) + ["-", f"{r.seconds:.1f}"]
        else:
            cells = [r.release, ERAS.get(r.era, r.era), f"{r.flags} / {r.options}",
                     str(len(r.mismatches)), str(len(r.disagreements)),
                     f"{len(r.bad_suggestions)} / {r.suggestions_checked}"] \
                + [r.verdicts.get(p, "-") for p, _ in PROBES] + [_cell(r.ct129), f"{r.seconds:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    details = [r for r in rows if r.failure is not None or r.problems]
    lines += ["", "## Details", ""]
    if not details:
        lines.append("No mismatch, disagreement, bad suggestion or failure.")
    for r in details:
        lines.append(f"### {r.release}")
        lines.append("")
        if r.failure is not None:
            lines.append(f"- FAILED: {_cell(r.failure)}")
        lines += [f"- mismatch: {_cell(m)}" for m in r.mismatches]
        lines += [f"- disagreement: {_cell(d)}" for d in r.disagreements]
        lines += [f"- bad suggestion: {_cell(s)}" for s in r.bad_suggestions]
        lines.append("")
    loose = sorted({x for r in checked for x in r.loose})
    stub = sorted({x for r in checked for x in r.unverifiable})
    lines += ["", "## Not compared", "",
              f"Left to run time by the reader (in at least one release): {', '.join(loose) or 'none'}.", "",
              f"Only from a stub in the real parser (in at least one release): {', '.join(stub) or 'none'}.", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------

def releases(args) -> tuple[list[str], str]:
    if args.releases:
        return sorted(args.releases, key=Version), "the command line"
    if not args.offline:
        try:
            found = pypi_releases(args.pre)
            if not args.pre:
                write_pinned(found)
            return found, PYPI_JSON
        except OSError as exc:
            print(f"release_sweep: PyPI not reachable ({exc}); using {PINNED.relative_to(REPO)}", file=sys.stderr)
    return pinned_releases(args.pre), str(PINNED.relative_to(REPO))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", nargs="+", metavar="VERSION", help="only these releases")
    ap.add_argument("--tree", nargs="+", default=[], type=pathlib.Path, metavar="DIR",
                    help="also check extracted sglang/ folders (e.g. a development checkout)")
    ap.add_argument("--out", type=pathlib.Path, default=OUT, help=f"the page to write (default {OUT.relative_to(REPO)})")
    ap.add_argument("--offline", action="store_true", help="use the pinned release list, do not ask PyPI")
    ap.add_argument("--pre", action="store_true", help="include pre-releases (rc)")
    args = ap.parse_args(argv)
    start = time.monotonic()
    versions, origin = ([], "the command line") if args.tree and not args.releases else releases(args)
    profile = ct129_profile()
    rows: list[Row] = []
    with concurrent.futures.ThreadPoolExecutor(DOWNLOADS) as pool:
        trees = {v: pool.submit(sglang_source_tree, v) for v in versions}
        for v in versions:
            try:
                pkg = trees[v].result()
            except Exception as exc:  # noqa: BLE001
                row = Row(v, failure=f"download: {type(exc).__name__}: {str(exc)[-300:]}")
            else:
                row = check_tree(pkg, v, profile)
            rows.append(row)
            print(f"{v}: era {row.era or '?'}, {row.flags} flags, {row.problems} problems, {row.seconds:.1f} s"
                  + (f", FAILED: {row.failure}" if row.failure else ""), file=sys.stderr, flush=True)
    for tree in args.tree:
        pkg = tree / "sglang" if (tree / "sglang").is_dir() else tree
        row = check_tree(pkg, str(pkg), profile)
        rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(rows, origin=origin, total_s=time.monotonic() - start), encoding="utf-8")
    failed = [r for r in rows if r.failure is not None]
    bad = [r for r in rows if r.failure is None and r.problems]
    for r in failed:
        print(f"release_sweep: FAILED {r.release}: {r.failure}", file=sys.stderr)
    for r in bad:
        print(f"release_sweep: {r.release}: {len(r.mismatches)} mismatches, {len(r.disagreements)} "
              f"disagreements, {len(r.bad_suggestions)} bad suggestions", file=sys.stderr)
    print(f"release_sweep: {len(rows)} releases, {len(failed)} failed, {len(bad)} with problems -> {args.out}",
          file=sys.stderr)
    return 1 if failed or bad else 0


if __name__ == "__main__":
    sys.exit(main())
