#!/usr/bin/python
"""A model revision's files on a host: plan, check, mark, drift, collect (plugins/module_utils/model/files.py)."""

DOCUMENTATION = r"""
module: sglang_model_files
short_description: Plan, check, mark, watch and collect a host's model revisions
description:
  - A model revision lives in O(path), C(<root>/<org>--<name>/<revision>), as the controller's lock
    lists its files (path, size, sha256); the controller rsyncs them there.
  - O(state=plan) says which files rsync has to send, how many bytes, and whether they fit on the
    file system (RV(fits), RV(message)). Files missing or of another size count whole; the revision
    being replaced is never removed (it stays for rollback).
  - O(state=check) compares the files with the lock (O(mode=sizes), or O(mode=deep) for sha256 too).
    Problems do not fail the task - it returns RV(ok)=false and RV(lines); the role decides.
  - O(state=mark) checks the same way and, when nothing is wrong, writes the marker
    C(.sglang-fleet-model.json) (the lock, the check, each file's mtime); the revision is then staged.
    A problem leaves no marker and returns RV(ok)=false with RV(problems), as O(state=check) does.
  - O(state=drift) compares a staged revision with its marker (sizes and mtimes, or sha256 with
    O(mode=deep)); like O(state=check) it returns RV(ok) and never fails on a problem.
  - O(state=collect) removes the revisions under O(root) that are not in O(keep), only those
    sglang-fleet staged (with the marker or C(.rsync-partial)); check mode lists them only.
options:
  state: {description: What to do., type: str, choices: [plan, check, mark, drift, collect], required: true}
  path: {description: "The revision folder (O(state=plan), check, mark, drift).", type: path}
  root: {description: "The model root, for O(state=collect).", type: path}
  files: {description: "The lock's files (path, size, sha256); O(lock)'s files when empty.", type: list, elements: dict,
          default: []}
  lock: {description: "The lock (repo, source, revision, files); needed by O(state=mark).", type: dict, default: {}}
  mode: {description: "How deep O(state=check), mark and drift look.", type: str, choices: [sizes, deep], default: sizes}
  keep: {description: "Revision folders O(state=collect) keeps (absolute paths).", type: list, elements: path, default: []}
  now: {description: UTC time stamp the marker records., type: str, default: ""}
  margin_bytes: {description: Bytes O(state=plan) leaves free on the file system., type: int, default: 0}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Will the revision fit
  sglang.fleet.sglang_model_files:
    state: plan
    path: /var/lib/sglang-fleet/models/Qwen--Qwen3.6-27B/0123456789abcdef0123456789abcdef01234567
    lock: "{{ model_lock }}"
    margin_bytes: 2000000000
  register: model_plan

- name: Mark the transferred revision as staged
  sglang.fleet.sglang_model_files:
    state: mark
    path: /var/lib/sglang-fleet/models/Qwen--Qwen3.6-27B/0123456789abcdef0123456789abcdef01234567
    lock: "{{ model_lock }}"
    mode: deep
    now: "20261130T120000Z"

- name: Remove the revisions no host entry uses
  sglang.fleet.sglang_model_files:
    state: collect
    root: /var/lib/sglang-fleet/models
    keep: [/var/lib/sglang-fleet/models/Qwen--Qwen3.6-27B/0123456789abcdef0123456789abcdef01234567]
"""

RETURN = r"""
missing: {description: "Files rsync has to send (absent).", type: list, returned: state=plan}
wrong_size: {description: Files present with another size than the lock's (sent again)., type: list, returned: state=plan}
present: {description: Files present with the lock's size., type: list, returned: state=plan}
bytes_to_transfer: {description: Sum of the sizes of RV(missing) and RV(wrong_size)., type: int, returned: state=plan}
bytes_total: {description: Size of the whole revision., type: int, returned: state=plan}
free_bytes: {description: Bytes free on the file system of O(path)., type: int, returned: state=plan}
mount: {description: Mount point of that file system., type: str, returned: state=plan}
fits: {description: Whether RV(bytes_to_transfer) fits in RV(free_bytes) less O(margin_bytes)., type: bool, returned: state=plan}
message: {description: "Why it does not fit, with the numbers (empty when it fits).", type: str, returned: state=plan}
ok: {description: Whether there is no problem., type: bool, returned: state=check or drift}
problems: {description: "One per problem - path, problem, expected, actual, line.", type: list, returned: state=check or drift}
lines: {description: One readable line per problem., type: list, returned: state=check or drift}
extra: {description: Files in the folder the lock does not list (not problems)., type: list, returned: state=check}
marker: {description: The marker written (or already there)., type: dict, returned: state=mark}
removed: {description: Folders removed (or that would be in check mode)., type: list, returned: state=collect}
freed_bytes: {description: Bytes those removals free., type: int, returned: state=collect}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.model.files import (
    ModelFilesError,
    check,
    collect,
    drift,
    mark,
    plan,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["plan", "check", "mark", "drift", "collect"], "required": True},
            "path": {"type": "path"},
            "root": {"type": "path"},
            "files": {"type": "list", "elements": "dict", "default": []},
            "lock": {"type": "dict", "default": {}},
            "mode": {"type": "str", "choices": ["sizes", "deep"], "default": "sizes"},
            "keep": {"type": "list", "elements": "path", "default": []},
            "now": {"type": "str", "default": ""},
            "margin_bytes": {"type": "int", "default": 0},
        },
        required_if=[("state", "plan", ["path"]), ("state", "check", ["path"]), ("state", "mark", ["path", "lock"]),
                     ("state", "drift", ["path"]), ("state", "collect", ["root"])],
        supports_check_mode=True,
    )
    p = module.params
    state, path, mode = p["state"], p["path"], p["mode"]
    files = p["files"] or p["lock"].get("files")
    try:
        if state == "plan":
            module.exit_json(changed=False, **plan(path, files, margin=p["margin_bytes"]))
        if state in ("check", "drift"):
            problems, extra = check(path, files, mode) if state == "check" else (drift(path, mode), None)
            result = {"ok": not problems, "problems": problems, "lines": [x["line"] for x in problems]}
            module.exit_json(changed=False, **result, **({} if extra is None else {"extra": extra}))
        if state == "mark":  # check, then mark when nothing is wrong (one read of every byte in deep mode)
            problems, extra = check(path, files, mode)
            if problems:
                module.exit_json(changed=False, ok=False, problems=problems, lines=[x["line"] for x in problems], extra=extra)
            changed, marker = mark(path, p["lock"], mode, p["now"], write=not module.check_mode, checked=True)
            module.exit_json(changed=changed, ok=True, problems=[], lines=[], extra=extra, marker=marker)
        removed, freed = collect(p["root"], p["keep"], dry_run=module.check_mode)
        module.exit_json(changed=bool(removed), removed=removed, freed_bytes=freed)
    except (ModelFilesError, OSError) as exc:
        module.fail_json(msg=f"sglang_model_files: {exc}")


if __name__ == "__main__":
    main()
