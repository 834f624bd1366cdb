"""Action plugin: write one host's JSON report on the controller, in the controller's own process.

`<dir>/<kind>-<stamp>.json` and `<dir>/<kind>-latest.json`, 0600 in a 0700 folder, each written
to a temporary file and renamed (a reader never sees half a report). A report is a run's output,
not a change on the host: never `changed`, written under --check too. One task and no module
run (no fork, no AnsiballZ), where ansible.builtin.file + copy on localhost took 3-4 s per report
for a 3-host lab play (a per-task timing callback, 2026-12-01).
"""

from __future__ import annotations

import json
import os
import re
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

KIND = re.compile(r"^[a-z][a-z0-9_]*\Z")
STAMP = re.compile(r"^[0-9A-Za-z:._+-]+\Z")  # e.g. 2026-12-01T07:29:36Z


def write_private(path, text):
    """Write `text` to `path` (0600) through a temporary file in the same folder."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".report-")
    try:
        with os.fdopen(fd, "w") as f:  # mkstemp creates it 0600
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "kind", "stamp", "report"))

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
        result.update(changed=False, paths=paths)
        return result
