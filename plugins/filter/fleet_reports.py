"""Where a host's reports are on the controller: `<reports_dir>/<host>[/<name>...]`.

The formula lives in plugins/module_utils/report/fleet_reports.py (host_path), which the scripts
and the router's verify use too.
"""

from ansible_collections.sglang.fleet.plugins.module_utils.report import fleet_reports


def sglang_report_path(host, reports_dir, *names):
    """`host | sglang.fleet.sglang_report_path(reports_dir[, name...])`, the host first so that a list of
    hosts maps to their paths (`map('sglang.fleet.sglang_report_path', dir, 'verify-history.jsonl')`)."""
    return fleet_reports.host_path(reports_dir, host, *names)


class FilterModule:
    def filters(self):
        return {"sglang_report_path": sglang_report_path}
