#!/usr/bin/python
"""Preview an SGLang upgrade for one host: what the target release does differently with its flags."""

DOCUMENTATION = r"""
module: sglang_upgrade_preview
short_description: Compare what two SGLang releases do with one host's flags, before the upgrade
description:
  - Runs on the controller (delegated to localhost). Reads the C(sglang) package of the installed
    release (O(from_source_dir)) and of the target release (O(to_source_dir)), both extracted from
    their hash-checked wheels in the controller wheelhouse, as text; never imports them.
  - Reports the host's flags the target renames, removes, deprecates or validates differently (with
    the replacement) and whether the target's parser refuses the argv; the serving defaults
    (memory, scheduling, graphs, attention, speculative decoding, parallelism) that change for
    options the host does not set, with file:line in each release; each audited optimisation whose
    status or value changes, with its rule's file:line in both releases; and O(compat), the target's
    compatibility verdict with its memory fit.
  - Read-only; nothing on the host is touched.
options:
  from_source_dir: {description: The C(sglang) package folder of the release the host runs., type: path, required: true}
  to_source_dir: {description: The C(sglang) package folder of the target release., type: path, required: true}
  args: {description: "The host's SGLang arguments as a mapping (its release record's, else sglang_host.args).", type: dict, required: true}
  hardware: {description: "GPU facts (ansible_facts.sglang_gpu from gpu_facts).", type: dict, default: {}}
  model_config: {description: "The model's config.json as read on the host (empty when unknown).", type: dict, default: {}}
  compat: {description: "The target's compatibility result (status, summary, checks) or empty when not checked.", type: dict, default: {}}
extends_documentation_fragment: [sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Preview the upgrade from the installed release to 0.5.23
  sglang.fleet.sglang_upgrade_preview:
    from_source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-0.5.11/sglang
    to_source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-0.5.23/sglang
    args: {model_path: /models/Qwen3.6-27B, tp_size: 2}
    model_config: {architectures: [Qwen3_5ForConditionalGeneration]}
  delegate_to: localhost
"""

RETURN = r"""
report: {description: "The preview (from, to, refuses_argv, flags, defaults, optimisations, compat, summary, lines).", type: dict, returned: always}
lines: {description: The readable block for this host., type: list, returned: always}
summary: {description: "One line - host, from -> to, and what changes.", type: str, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.compat.upgrade import UpgradeError, as_json, preview
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option
from ansible_collections.sglang.fleet.plugins.module_utils.source import UnknownLayout, load_source


def main():
    module = AnsibleModule(
        argument_spec=dict(
            from_source_dir=dict(type="path", required=True),
            to_source_dir=dict(type="path", required=True),
            args=dict(type="dict", required=True),
            hardware=dict(type="dict", default={}),
            model_config=dict(type="dict", default={}),
            compat=dict(type="dict", default={}),
            **inventory_host_option(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        old, new = load_source(p["from_source_dir"]), load_source(p["to_source_dir"])
        report = as_json(preview(old, new, p["args"], p["hardware"], p["model_config"], host=p["host"],
                                 compat=p["compat"] or None))
    except (UnknownLayout, UpgradeError, OSError) as exc:
        module.fail_json(msg=f"{p['host']}: cannot preview the upgrade: {exc}")
    module.exit_json(changed=False, report=report, lines=report["lines"], summary=report["summary"])


if __name__ == "__main__":
    main()
