"""Filters for sglang_verify: its thresholds checked as the gates check them."""

from ansible_collections.sglang.fleet.plugins.module_utils.verify.settings import problems


def sglang_verify_threshold_problems(thresholds):
    """Each problem of the verify thresholds dict (roles/sglang_verify/vars/main.yml builds it), as the gates
    would refuse it; empty when they are fine (plugins/module_utils/verify/settings.py)."""
    return problems(thresholds)


class FilterModule:
    def filters(self):
        return {"sglang_verify_threshold_problems": sglang_verify_threshold_problems}
