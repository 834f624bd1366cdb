#!/usr/bin/python
"""Documentation of the sglang_report action (plugins/action/sglang_report.py does the work)."""

DOCUMENTATION = r"""
---
module: sglang_report
short_description: Write one host's JSON report on the controller (audit, verify, drift, release, compat)
description:
  - Writes O(dir)/O(kind)-O(stamp).json and O(dir)/O(kind)-latest.json, mode 0600 in a 0700 folder,
    each through a temporary file and a rename. Runs on the controller, in the controller's process.
  - Never reports a change and writes under check mode too; a report is a run's output.
options:
  dir: {description: The host's report folder on the controller., type: path, required: true}
  kind: {description: "The report's kind: audit, verify, drift, release or compat.", type: str, required: true}
  stamp: {description: The run's UTC time stamp (the file name's suffix)., type: str, required: true}
  report: {description: The report., type: dict, required: true}
  history: {description: "A history file (JSON lines) to append O(record) to, created 0600 (verify's).", type: path}
  record: {description: "The history's record of this run (with O(history)), or a list of records (tune.yml: the confirmation's runs).", type: raw}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Write the host's audit report
  sglang.fleet.sglang_report:
    dir: "reports/{{ inventory_hostname }}"
    kind: audit
    stamp: "{{ now(utc=true, fmt='%Y%m%dT%H%M%SZ') }}"
    report: "{{ audit_result.report }}"
"""

RETURN = r"""
paths: {description: The two files written (and the history appended to)., returned: success, type: list, elements: str}
"""
