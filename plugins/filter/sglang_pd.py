"""The filter of a PD pair (prefill and decode servers declared as two inventory groups).

The logic lives in plugins/module_utils/host/pd.py.
"""

from ansible_collections.sglang.fleet.plugins.module_utils.host import pd


class FilterModule:
    def filters(self):
        return {"sglang_pd_plan": pd.plan_of}
