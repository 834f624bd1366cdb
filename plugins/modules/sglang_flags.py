#!/usr/bin/python
"""Check a host's SGLang argv against one release's real flag table, before anything changes."""

DOCUMENTATION = r"""
module: sglang_flags
short_description: Check SGLang argv against the flags of an exact SGLang release
description:
  - Reads the C(sglang) package source of one release (installed on a host, or extracted from
    its wheel on the controller) as text, never importing it, and checks every flag of O(argv)
    the way that release's argument parser would.
  - Unknown flags come with the closest matches, removed or renamed flags with their
    replacement in this release, ambiguous prefixes with the candidates, bad choices or types
    with the allowed values.
  - With O(model_config), also checks what that release's start-up resolution would refuse for
    this model although its parser accepts the argv (e.g. 0.5.10 - 0.5.13.post1 raise ValueError
    for speculative decoding on a hybrid linear-attention model with the radix cache on and
    C(--mamba-scheduler-strategy no_buffer)), citing the rule's file:line in the release.
  - Fails (before anything changes) when the release would reject the argv; deprecated
    aliases that still work are returned as warnings.
  - Read-only.
options:
  source_dir: {description: The C(sglang) package folder of the release., type: path, required: true}
  argv: {description: SGLang arguments (no program name)., type: list, elements: str, required: true}
  model_config:
    description: "The model's config.json (at least C(architectures)); empty: the start-up checks that need it are skipped."
    type: dict
    default: {}
  hardware: {description: "GPU facts (gpu_model, ...; ansible_facts.sglang_gpu).", type: dict, default: {}}
extends_documentation_fragment: [sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Check the flags against the release about to be installed
  sglang.fleet.sglang_flags:
    source_dir: ~/.cache/sglang-fleet/wheelhouse/src/sglang-0.5.20/sglang
    argv: "{{ sglang_args | sglang_argv }}"
    model_config: {architectures: [Qwen3_5ForConditionalGeneration]}
  delegate_to: localhost
"""

RETURN = r"""
version: {description: The release's version., type: str, returned: always}
era: {description: "Flag layout (A, B or C).", type: str, returned: always}
problems: {description: "Every problem found (flag, kind, message, suggestion, severity).", type: list, returned: always}
normalised: {description: "The settings the argv makes, by dest, when it parses.", type: dict, returned: success}
"""

import dataclasses

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option
from ansible_collections.sglang.fleet.plugins.module_utils.source import UnknownLayout, normalise_argv, validate_argv
from ansible_collections.sglang.fleet.plugins.module_utils.source.cache import cached_source


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source_dir=dict(type="path", required=True),
            argv=dict(type="list", elements="str", required=True),
            **inventory_host_option(),
            model_config=dict(type="dict", default={}),
            hardware=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    where = f"{module.params['host']}: " if module.params["host"] else ""
    try:
        src = cached_source(module.params["source_dir"], write=True)  # the controller's extracted copy
    except (UnknownLayout, OSError) as exc:
        module.fail_json(msg=f"{where}cannot read the SGLang source in {module.params['source_dir']}: {exc}. "
                             "Run deploy.yml (its ml_env role downloads and extracts the release) first.")
    problems = validate_argv(src, module.params["argv"], module.params["model_config"] or None,
                             module.params["hardware"])
    errors = [p for p in problems if p.severity == "error"]
    result = dict(
        changed=False,
        version=src.version,
        era=src.era,
        problems=[dataclasses.asdict(p) for p in problems],
    )
    if errors:
        lines = "\n".join(f"  - {p.message}" for p in errors)
        module.fail_json(
            msg=f"{where}sglang {src.version} would refuse to start with these arguments "
                f"(nothing was changed):\n{lines}\nFix sglang_args in the inventory and re-run.",
            **result)
    result["normalised"] = normalise_argv(src, module.params["argv"])
    for p in problems:
        module.warn(f"{where}{p.message}")
    known = set(src.option_strings())
    for token in module.params["argv"]:
        name = token.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            full = sorted(o for o in known if o.startswith(name))
            module.warn(f"{where}{name} is an abbreviation of {full[0] if len(full) == 1 else ' / '.join(full)} "
                        f"that sglang {src.version} accepts; write the full name: a prefix breaks when a later "
                        "release adds a flag that shares it (--cuda-graph-max-bs became ambiguous in 0.5.20)")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
