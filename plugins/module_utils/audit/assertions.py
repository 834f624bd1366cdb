"""The user's own checks on the installed SGLang source: grep/sed-style assertions as inventory data.

Each item of ``sglang_source_assertions`` names files inside the installed ``sglang`` package (a
path or glob relative to the package folder, or a list of them), a Python regular expression
(compiled with ``re.MULTILINE``) and what must hold over all those files together:

    - name: multimodal auto-disable rule present
      path: srt/server_args.py
      regex: '^\\s*if self\\.get_model_config\\(\\)\\.is_multimodal:\\n\\s*self\\.disable_piecewise_cuda_graph = True'
      must: match            # match | not_match, or count: N (exact number of matches)
      group: max_bs          # optional, with must: match: the captured group (number or name) ...
      equals: "32"           # ... of the first match, compared as text
      message: why it matters
      fix: what to do when it does not hold

    problems = validate(items)                       # [] or one message per problem, naming the item
    results = evaluate(items, "/opt/ml-env/sglang-0.5.11/lib/python3.11/site-packages/sglang")
    # [{"name", "status": "pass" | "fail" | "error", "detail", "location": "sglang/srt/server_args.py:1229", ...}]

A result is ``error`` when the assertion could not be evaluated (no file matches its path, more
than MAX_FILES files, an unreadable or oversized file): that fails the host like ``fail``, since
nothing was checked. Files are read as UTF-8 text (undecodable bytes replaced), never imported.

Stdlib only and Python 3.8 compatible: it runs on the managed host (plugins/modules/sglang_audit.py, through
plugins/module_utils/audit/host_audit.py) and on the controller (filter_plugins/sglang_assertions.py, which
loads this file by path, so it imports no other file of the repository).
"""
from __future__ import annotations

import difflib
import glob
import os
import re

VARIABLE = "sglang_source_assertions"
KEYS = ("name", "path", "regex", "must", "count", "group", "equals", "message", "fix")
MUST = ("match", "not_match")
# Files read per assertion, at most; a path that matches more is an error (narrow it). sglang
# 0.5.23 has 4,719 .py files (srt/**/*.py alone: 2,141), all read in about 1.5 s.
MAX_FILES = 5000
# Bytes read per file, at most (SGLang's largest source file is well under 1 MiB).
MAX_FILE_BYTES = 8 * 1024 * 1024
# Match locations listed in a result and its detail.
SHOWN = 5


# --------------------------------------------------------------------------------------
# Validation (preflight on the controller, and again in the module on the host)
# --------------------------------------------------------------------------------------

def _label(index, item, variable: str) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return f"{variable}[{index}]" + (f" ({name!r})" if isinstance(name, str) and name.strip() else "")


def path_problem(path) -> str | None:
    """Why a path or glob cannot be used (it must stay inside the sglang package), or None."""
    if not isinstance(path, str) or not path.strip():
        return "a path must be a non-empty string (a file or glob relative to the sglang package, e.g. srt/server_args.py)"
    if "\0" in path:
        return f"path {path!r} contains a NUL character"
    parts = re.split(r"[\\/]+", path)
    if path.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", path):
        return (f"path {path!r} is absolute: write it relative to the installed sglang package folder, "
                "e.g. srt/server_args.py or srt/**/*.py")
    if ".." in parts:
        return (f"path {path!r} leaves the sglang package (..): write it relative to the installed sglang "
                "package folder, e.g. srt/server_args.py or srt/**/*.py")
    if parts[0] == "sglang" and len(parts) > 1:
        return (f"path {path!r} starts with sglang/, but paths are relative to the sglang package folder "
                f"itself: write {'/'.join(parts[1:])}")
    return None


def _paths(item) -> list:
    path = item.get("path")
    return list(path) if isinstance(path, (list, tuple)) else [path]


def _item_problems(item, label: str) -> list[str]:
    if not isinstance(item, dict):
        return [f"{label} must be a mapping with name, path, regex and must or count, got {type(item).__name__}"]
    out = []
    for key in item:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else f"the keys are {', '.join(KEYS)}"
            out.append(f"{label} has an unknown key {key!r}: {hint}")
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        out.append(f"{label} has no name: give it a short name (name: ...), shown in the report and its failures")
    if "path" not in item:
        out.append(f"{label} has no path: a file or glob relative to the installed sglang package, "
                   "e.g. srt/server_args.py or srt/**/*.py")
    else:
        paths = _paths(item)
        if not paths:
            out.append(f"{label}: path is an empty list")
        for path in paths:
            why = path_problem(path)
            if why:
                out.append(f"{label}: {why}")
    pattern = None
    regex = item.get("regex")
    if "regex" not in item or regex is None:
        out.append(f"{label} has no regex: a Python regular expression (re.MULTILINE) to search the files for")
    elif not isinstance(regex, str):
        out.append(f"{label}: regex must be a string, got {type(regex).__name__} (quote it in YAML)")
    elif not regex:
        out.append(f"{label}: regex is empty (it would match everywhere)")
    else:
        try:
            pattern = re.compile(regex, re.MULTILINE)
        except re.error as exc:
            out.append(f"{label}: regex {regex!r} is not a valid Python regular expression: {exc}")
    has_must, has_count = "must" in item, "count" in item
    if has_must and has_count:
        out.append(f"{label} sets both must and count: use one (must: match | not_match, or count: N)")
    elif not has_must and not has_count:
        out.append(f"{label} needs must (match or not_match) or count (the exact number of matches)")
    elif has_must and item["must"] not in MUST:
        out.append(f"{label}: must is {item['must']!r}: use match or not_match (or count: N)")
    elif has_count and (isinstance(item["count"], bool) or not isinstance(item["count"], int) or item["count"] < 0):
        out.append(f"{label}: count is {item['count']!r}: it must be a whole number >= 0, without quotes")
    if ("group" in item or "equals" in item) and item.get("must") != "match":
        out.append(f"{label}: group and equals compare the captured value of a match, so they need must: match")
    if "group" in item:
        group = item["group"]
        if isinstance(group, bool) or not isinstance(group, (int, str)) or (isinstance(group, int) and group < 0) \
                or (isinstance(group, str) and not group):
            out.append(f"{label}: group is {group!r}: a group number (0 = the whole match) or a group name")
        elif pattern is not None and isinstance(group, int) and group > pattern.groups:
            out.append(f"{label}: group {group} does not exist: the regex has {pattern.groups} group(s)")
        elif pattern is not None and isinstance(group, str) and group not in pattern.groupindex:
            named = ", ".join(sorted(pattern.groupindex)) or "none"
            out.append(f"{label}: group {group!r} is not a named group of the regex (its named groups: {named})")
    if "equals" in item and (item["equals"] is None or isinstance(item["equals"], (dict, list))):
        out.append(f"{label}: equals must be a string or a number (compared as text with the captured value)")
    for key in ("message", "fix"):
        if key in item and not isinstance(item[key], str):
            out.append(f"{label}: {key} must be a string")
    return out


def validate(items, variable: str = VARIABLE) -> list[str]:
    """Problems with a list of assertions, one message each, naming the item; [] when fine."""
    if items is None:
        return []
    if not isinstance(items, (list, tuple)):
        return [f"{variable} must be a list of assertions (name, path, regex, must or count), "
                f"got {type(items).__name__}"]
    out, seen = [], {}
    for index, item in enumerate(items):
        label = _label(index, item, variable)
        out += _item_problems(item, label)
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str) and name.strip():
            if name in seen:
                out.append(f"{label}: the name {name!r} is already used by {variable}[{seen[name]}]: names must be unique")
            else:
                seen[name] = index
    return out


# --------------------------------------------------------------------------------------
# Evaluation (on the host, over the installed package)
# --------------------------------------------------------------------------------------

class _Unreadable(Exception):
    pass


def _files(package: str, patterns: list) -> list[str]:
    """Regular files under ``package`` matching the patterns (globs, ``**`` recursive), sorted."""
    root = os.path.realpath(package)
    found = set()
    for pattern in patterns:
        for hit in glob.glob(os.path.join(package, pattern), recursive=True):
            if os.path.isfile(hit) and (os.path.realpath(hit) + os.sep).startswith(root + os.sep):
                found.add(os.path.normpath(hit))
    return sorted(found)


def _read(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise _Unreadable(f"{path} is {size} bytes, more than the {MAX_FILE_BYTES} read per file")
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        raise _Unreadable(f"cannot read {path}: {exc.strerror or exc}") from exc


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith("ch") else "s")


def _show_paths(item) -> str:
    return ", ".join(str(p) for p in _paths(item))


def evaluate_one(item: dict, package: str, *, max_files: int = MAX_FILES, prefix: str = "sglang",
                 label: str = VARIABLE) -> dict:
    """One assertion's result over the installed package folder ``package``.

    ``{"name", "status", "detail", "location", "locations", "matches", "files_read", "value",
    "message", "fix", "path", "regex"}``; ``location`` is ``sglang/<file>:<line>`` of the first
    match (of its captured group with ``group``/``equals``; None when there is no match),
    ``locations`` the first SHOWN distinct ones, ``value`` the captured group (with ``group``).
    """
    result = {"name": item.get("name"), "status": "error", "detail": "", "location": None, "locations": [],
              "matches": 0, "files_read": 0, "value": None, "path": item.get("path"), "regex": item.get("regex"),
              "message": item.get("message") or "", "fix": item.get("fix") or ""}
    problems = _item_problems(item, label)
    if problems:
        result["detail"] = "; ".join(problems)
        return result
    pattern = re.compile(item["regex"], re.MULTILINE)
    paths = _show_paths(item)
    files = _files(package, _paths(item))
    if not files:
        result["detail"] = f"no file of the installed sglang package ({package}) matches {paths}"
        return result
    if len(files) > max_files:
        result["detail"] = (f"{paths} matches {len(files)} files, more than the {max_files} read per assertion: "
                            "narrow the path")
        return result
    group = item.get("group", 0 if "equals" in item else None)
    total, first = 0, None
    for path in files:
        try:
            text = _read(path)
        except _Unreadable as exc:
            result["detail"] = str(exc)
            return result
        result["files_read"] += 1
        rel = prefix + "/" + os.path.relpath(path, package).replace(os.sep, "/")
        for m in pattern.finditer(text):
            total += 1
            # The line of the captured value when there is one (a default several lines below
            # the text that anchors it), else of the match's start.
            start = m.start(group) if group is not None and m.start(group) >= 0 else m.start()
            here = f"{rel}:{text.count(chr(10), 0, start) + 1}"
            if len(result["locations"]) < SHOWN and here not in result["locations"]:
                result["locations"].append(here)
            if first is None:
                first = m
    result["matches"] = total
    result["location"] = result["locations"][0] if result["locations"] else None
    where = f"{_n(result['files_read'], 'file')} read for {paths}"
    locs = ", ".join(result["locations"]) + (", ..." if total > len(result["locations"]) else "")
    more = f" ({total} matches: {locs})" if total > 1 else ""
    if "count" in item:
        want = item["count"]
        result["status"] = "pass" if total == want else "fail"
        result["detail"] = f"{_n(total, 'match')}, expected {want}" + (f": {locs}" if total else "") + f"; {where}"
    elif item["must"] == "not_match":
        result["status"] = "pass" if total == 0 else "fail"
        result["detail"] = (f"no match; {where}" if total == 0 else
                            f"matched at {result['location']}{more}, expected no match")
    elif total == 0:
        result["status"] = "fail"
        result["detail"] = f"no match; {where}"
    elif group is None:
        result["status"] = "pass"
        result["detail"] = f"matched at {result['location']}{more}"
    else:
        value = first.group(group)
        result["value"] = value
        shown = "the match" if group == 0 else f"group {group}"
        if "equals" not in item:
            result["status"] = "pass"
            result["detail"] = f"matched at {result['location']}{more}, {shown} is {value!r}"
        else:
            want = str(item["equals"])
            result["status"] = "pass" if value == want else "fail"
            result["detail"] = (f"{shown} is {value!r} at {result['location']}{more}"
                                + (f", equals {want!r}" if value == want else f", expected {want!r}"))
    return result


def evaluate(items, package: str, *, max_files: int = MAX_FILES, prefix: str = "sglang") -> list[dict]:
    """Every assertion's result, in order (see evaluate_one)."""
    return [evaluate_one(item if isinstance(item, dict) else {}, package, max_files=max_files, prefix=prefix,
                         label=_label(index, item, VARIABLE))
            for index, item in enumerate(items or [])]


def failure_message(result: dict, version: str = "", host: str = "") -> str:
    """The message a failed or errored assertion fails the host with (message and fix included)."""
    where = f"{host}: " if host else ""
    release = f" on sglang {version}" if version else ""
    verb = "failed" if result["status"] == "fail" else "could not be checked"
    text = f"{where}{VARIABLE} {result['name']!r} {verb}{release}: {result['detail']}"
    if result.get("message"):
        text += f". {result['message'].rstrip('.')}"
    fix = result.get("fix") or ("fix the assertion's path or regex" if result["status"] == "error" else
                                f"check what changed in this sglang release, or change the assertion in {VARIABLE}")
    return text + f". Fix: {fix}"


def result_lines(results: list, version: str = "", host: str = "") -> list[str]:
    """The printed lines: a summary, one line per passing assertion, a FAILED line per other one."""
    if not results:
        return []
    bad = [r for r in results if r["status"] == "fail"]
    errors = [r for r in results if r["status"] == "error"]
    head = f"source assertions ({VARIABLE}): {len(results)} checked, "
    if not bad and not errors:
        head += "all passed"
    else:
        head += ", ".join(p for p in (f"{len(bad)} FAILED" if bad else "",
                                      f"{len(errors)} could not be checked" if errors else "") if p)
    lines = [head]
    for r in results:
        if r["status"] == "pass":
            lines.append(f"  pass {r['name']}: {r['detail']}")
        else:
            lines.append(f"  FAILED {failure_message(r, version, host)}")
    return lines
