#!/usr/bin/python
"""Ansible module: bytes of model weights read per decode pass, from the model folder on the host."""

DOCUMENTATION = r"""
module: sglang_verify_weights
short_description: Read the model's weight bytes on the host (for the decode roofline)
description:
  - With O(declared) > 0, returns it. Else reads O(model_path) on the host with
    plugins/module_utils/verify/roofline.py model_weight_bytes - C(model.safetensors.index.json) metadata.total_size,
    else the tensor bytes of the C(*.safetensors) files, else an estimate from C(config.json).
  - A folder that is missing or unreadable is not an error - C(bytes) is null and C(error) says why
    (the roofline is then reported as unavailable).
  - Read-only; supports check mode.
options:
  model_path: {description: The model folder on the host (sglang_args.model_path)., type: str, default: ""}
  declared: {description: Declared weight bytes (sglang_model_weight_bytes); 0 = read the folder., type: int, default: 0}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Weight bytes of the served model
  sglang.fleet.sglang_verify_weights:
    model_path: /models/Qwen3.6-27B
  register: __weights
"""

RETURN = r"""
weights:
  description: C(bytes) (int or null), C(method) (declared, safetensors_index, safetensors_files, config_estimate), C(detail), C(error).
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.verify.roofline import RooflineError, model_weight_bytes


def main():
    module = AnsibleModule(
        argument_spec={
            "model_path": {"type": "str", "default": ""},
            "declared": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["declared"] > 0:
        weights = {"bytes": p["declared"], "method": "declared", "detail": "sglang_model_weight_bytes", "error": None}
    elif not p["model_path"]:
        weights = {"bytes": None, "method": None, "detail": None, "error": "no model_path in the SGLang arguments"}
    else:
        try:
            weights = dict(model_weight_bytes(p["model_path"]), error=None)
        except (RooflineError, OSError, ValueError) as exc:
            weights = {"bytes": None, "method": None, "detail": None, "error": f"{p['model_path']}: {exc}"}
    module.exit_json(changed=False, weights=weights)


if __name__ == "__main__":
    main()
