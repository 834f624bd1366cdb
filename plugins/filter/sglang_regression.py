"""regression.yml's plan: the last known good release with each difference from the desired state
applied alone (plugins/module_utils/verify/regression.py)."""

from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.fleet.plugins.module_utils.verify import regression


def sglang_regression_plan(good, version, args):
    """The steps regression.yml measures: [{name, version, args, change}], the baseline first."""
    try:
        return regression.plan(good, version, args)
    except regression.RegressionError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {"sglang_regression_plan": sglang_regression_plan}
