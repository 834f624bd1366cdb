"""The filters of a multi-node server (one SGLang server spanning an inventory group's hosts).

The logic lives in plugins/module_utils/host/multinode.py; a batch size it cannot read
(BatchError) is Ansible's filter error here, with the same message and the same cause (Ansible
appends each cause's words to the message it shows).
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.fleet.plugins.module_utils.host import multinode


def sglang_multinode_batches(batches, play_hosts_all, hostvars):
    try:
        return multinode.rollout_batches(batches, play_hosts_all, hostvars)
    except multinode.BatchError as exc:
        raise AnsibleFilterError(str(exc)) from exc.__cause__


class FilterModule:
    def filters(self):
        return {
            "sglang_multinode_plan": multinode.plan_of,
            "sglang_multinode_gpu_problems": multinode.gpu_problems,
            "sglang_multinode_batches": sglang_multinode_batches,
            "sglang_multinode_without": multinode.members_without,
        }
