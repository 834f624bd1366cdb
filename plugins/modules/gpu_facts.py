#!/usr/bin/python
"""Ansible module: read-only NVIDIA GPU facts from nvidia-smi (ansible_facts.sglang_gpu)."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts (count, model, compute capability, interconnect) from nvidia-smi
description:
  - Runs C(nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,compute_cap,memory.total,driver_version --format=csv),
    C(nvidia-smi topo -m) (two or more GPUs) and C(nvidia-smi) (CUDA version) and returns the parsed facts
    as C(ansible_facts.sglang_gpu).
  - Read-only; never changes the host, so it runs the same under C(--check).
  - A host without nvidia-smi, without a loaded driver or without GPUs is not an error
    unless O(required=true); the facts then say C(source=none), C(gpu_count=0) and why in C(error).
options:
  nvidia_smi:
    description: Name or path of the nvidia-smi binary.
    type: str
    default: nvidia-smi
  required:
    description: Fail when no GPU can be detected, instead of returning C(source=none).
    type: bool
    default: false
  declared:
    description:
      - The inventory's declaration of the host's GPUs (C(gpu_model), C(gpu_count), optionally
        C(hbm_bandwidth_gbs), C(compute_capability), C(interconnect), C(memory_mib), C(driver_version)).
      - When given and not empty, the facts say C(source=declared); where nvidia-smi exists and
        detects GPUs, a declaration whose count or model contradicts it fails, and the driver and
        CUDA version are the ones nvidia-smi reports.
    type: dict
    default: {}
  device:
    description:
      - The device the host's server runs on, the host model's C(sglang_host.device).
      - With C(cpu) (C(sglang_args.device=cpu)) nvidia-smi is not run and no GPU is needed; the facts say
        C(source=cpu), C(gpu_count=0) and C(reason). A declaration of GPUs (O(declared) with a
        C(gpu_count) other than 0) fails, saying to remove it or drop C(device=cpu).
    type: str
    choices: [cuda, cpu]
    default: cuda
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Detect GPUs
  sglang.fleet.gpu_facts:

- name: A GPU host must have its GPUs
  sglang.fleet.gpu_facts:
    required: true

- name: A lab host without GPUs (take the inventory's word, and say so)
  sglang.fleet.gpu_facts:
    declared: {gpu_model: NVIDIA RTX A6000, gpu_count: 2}

- name: A host whose server runs on the CPU (no nvidia-smi is run)
  sglang.fleet.gpu_facts:
    device: "{{ sglang_host.device }}"

- name: Show them
  ansible.builtin.debug:
    msg: "{{ sglang_gpu.gpu_count }} x {{ sglang_gpu.gpu_model }} (sm_{{ sglang_gpu.sm }}, {{ sglang_gpu.interconnect }})"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    sglang_gpu:
      description:
        - C(source) (detected, declared, none or cpu), C(gpu_count), C(gpu_model), C(gpus) (index, name,
          compute_capability, memory_mib, bus_id), C(compute_capability) (lowest), C(sm),
          C(memory_mib) (smallest per GPU), C(interconnect) (nvlink, pcie or none), C(link_matrix),
          C(nvlink_links), C(driver_version), C(cuda_version), C(hbm_bandwidth_gbs), C(gpu_spec);
          with C(source=none) only C(gpu_count=0) and C(error); with C(source=cpu) C(gpu_count=0),
          C(gpu_model=null), C(gpus=[]) and C(reason).
      returned: always
      type: dict
      sample:
        source: detected
        gpu_count: 2
        gpu_model: NVIDIA RTX A6000
        compute_capability: "8.6"
        sm: 86
        memory_mib: 49140
        interconnect: pcie
        nvlink_links: null
        hbm_bandwidth_gbs: 768
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import (
    GpuFactsError,
    collect_facts,
    cpu_facts,
    declared_facts,
    declared_mismatch,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "required": {"type": "bool", "default": False},
            "declared": {"type": "dict", "default": {}},
            "device": {"type": "str", "default": "cuda", "choices": ["cuda", "cpu"]},
        },
        supports_check_mode=True,
    )
    if module.params["device"] == "cpu":  # no GPU to read: nvidia-smi is not run
        try:
            facts = cpu_facts(module.params["declared"])
        except GpuFactsError as exc:
            module.fail_json(msg=str(exc))
        module.exit_json(changed=False, msg=f"no GPU facts read: {facts['reason']}",
                         ansible_facts={"sglang_gpu": facts})
    if module.params["declared"]:
        try:
            facts = declared_facts(module.params["declared"])
        except GpuFactsError as exc:
            module.fail_json(msg=f"sglang_hardware: {exc}")
        # Where nvidia-smi exists and sees GPUs, the declaration must agree with it.
        path = module.get_bin_path(module.params["nvidia_smi"], required=False)
        if path:
            detected = collect_facts(lambda argv: module.run_command(argv, check_rc=False), path)
            problem = declared_mismatch(facts, detected)
            if problem:
                module.fail_json(msg=problem, ansible_facts={"sglang_gpu": facts})
            if detected.get("source") == "detected":  # the driver nvidia-smi reports beats a declared one
                facts.update(driver_version=detected["driver_version"], cuda_version=detected["cuda_version"])
        module.exit_json(changed=False, ansible_facts={"sglang_gpu": facts})
    path = module.get_bin_path(module.params["nvidia_smi"], required=False)
    facts = collect_facts(lambda argv: module.run_command(argv, check_rc=False), path)
    if module.params["required"] and facts["source"] == "none":
        module.fail_json(msg=f"no GPU detected: {facts['error']}", ansible_facts={"sglang_gpu": facts})
    module.exit_json(changed=False, ansible_facts={"sglang_gpu": facts})


if __name__ == "__main__":
    main()
