"""Action plugin: write one host's JSON report on the controller, in the controller's own process.
With `history` and `record`, also append the record to the host's history (one JSON line, verify's).

`<dir>/<kind>-<stamp>.json` and `<dir>/<kind>-latest.json`, 0600 in a 0700 folder, each written
to a temporary file and renamed (a reader never sees half a report). A report is a run's output,
not a change on the host: never `changed`, written under --check too. One task and no module
run (no fork, no AnsiballZ), where ansible.builtin.file + copy on localhost took 3-4 s per report
for a 3-host lab play (a per-task timing callback, 2026-12-01).
"""

from __future__ import annotations

import datetime
import json
import os
import re

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.fleet.plugins.module_utils.files import write_atomic

KIND = re.compile(r"^[a-z][a-z0-9_]*\Z")
STAMP = re.compile(r"^[0-9A-Za-z:._+-]+\Z")  # e.g. 2026-12-01T07:29:36Z


def write_private(path, text):
    """Write `text` to `path` (0600) through a temporary file in the same folder."""
    write_atomic(path, text, 0o600, fsync=False, prefix=".report-")


def write_report(folder, kind, stamp, report):
    """Write the stamped report and its latest copy; return both paths."""
    if not KIND.match(kind):
        raise ValueError(f"report kind {kind!r} must be a lowercase word such as audit or verify")
    if not STAMP.match(stamp):
        raise ValueError(f"report stamp {stamp!r} must be a time stamp without '/' or spaces")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    text = json.dumps(report, indent=4, sort_keys=True, ensure_ascii=False) + "\n"
    paths = [os.path.join(folder, f"{kind}-{stamp}.json"), os.path.join(folder, f"{kind}-latest.json")]
    for path in paths:
        write_private(path, text)
    return paths


# The task arguments that are the report's, not the module's: its folder, its stamp, and (drift's,
# whose task runs with check_mode false) whether the run was under --check, for content to read.
REPORT_ARGS = ("report_dir", "report_stamp", "report_check_mode")


def run_module_and_report(action, module, task_vars, kind, content, stamp_of=None, name=None):
    """Run `module` with the task's arguments less REPORT_ARGS, then, when report_dir is given and the
    module succeeded, write content(result, stamp) (a dict, or None for no report) as the host's `kind`
    report stamped stamp_of(result), else report_stamp, else now (UTC), under --check too (content
    returns None where a report must not be written). What an action plugin named
    after its module does to fold "run it, then write its report" into one task; the result gets
    `report_stamp` and `report_paths`. A report that cannot be written fails the task with
    "<name> could not write the <kind> report" (`name`: the module's, as given, unless said)."""
    args = dict(action._task.args)
    folder, stamp, _check_mode = (args.pop(arg, None) for arg in REPORT_ARGS)
    result = action._execute_module(module_name=module, module_args=args, task_vars=task_vars)
    if stamp_of and not result.get("failed"):
        stamp = stamp_of(result) or stamp
    stamp = to_text(stamp or datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ"))
    report = content(result, stamp) if folder and not result.get("failed") else None
    if report is not None:
        try:
            result["report_paths"] = write_report(os.path.expanduser(to_text(folder)), kind, stamp, report)
        except (OSError, TypeError, ValueError) as exc:
            raise AnsibleActionFail(f"{name or module} could not write the {kind} report: {exc}") from exc
        result["report_stamp"] = stamp
    return result


def append_history(path, record):
    """Append `record` (or each record of a list) as one JSON line (keys sorted) to the history file
    `path` (0600 when created)."""
    records = record if isinstance(record, list) else [record]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "kind", "stamp", "report", "history", "record"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        missing = [name for name in ("dir", "kind", "stamp", "report") if args.get(name) in (None, "")]
        if missing:
            raise AnsibleActionFail(f"sglang_report needs {', '.join(missing)}")
        if not isinstance(args["report"], dict):
            raise AnsibleActionFail(f"sglang_report: report must be a mapping, got {type(args['report']).__name__}")
        try:
            paths = write_report(os.path.expanduser(to_text(args["dir"])), to_text(args["kind"]),
                                 to_text(args["stamp"]), args["report"])
        except (OSError, TypeError, ValueError) as exc:
            raise AnsibleActionFail(f"sglang_report could not write the {args['kind']} report: {exc}") from exc
        if args.get("history"):
            record = args.get("record")
            if not (isinstance(record, dict) or isinstance(record, list) and all(isinstance(r, dict) for r in record)):
                raise AnsibleActionFail("sglang_report: history needs record, a mapping (or a list of them)")
            try:
                append_history(os.path.expanduser(to_text(args["history"])), args["record"])
            except (OSError, TypeError, ValueError) as exc:
                raise AnsibleActionFail(f"sglang_report could not append to {args['history']}: {exc}") from exc
            paths.append(args["history"])
        result.update(changed=False, paths=paths)
        return result
