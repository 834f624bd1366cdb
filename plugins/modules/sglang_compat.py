#!/usr/bin/python
"""Ansible module: will this SGLang release run on this host? One verdict line per check."""

DOCUMENTATION = r"""
---
module: sglang_compat
short_description: Check an SGLang release against a host (glibc, Python, driver, GPU, memory, disk, RAM)
description:
  - Runs where it is delegated (the controller). Resolves what sglang==O(version) installs on a GPU
    host - the full profile's hash-locked pins, made with C(uv pip compile) exactly as ml_env makes
    them and kept in the same place (O(dest)/locks) - and reads the wheel tags, Requires-Python and
    sizes of its compiled packages (sglang, sglang-kernel or sgl-kernel, torch, FlashInfer, triton)
    from PyPI's JSON API, cached under O(dest)/pypi. An offline controller works from those caches.
  - Then one check per line, each C(ok), C(blocked) (with the fix) or C(unknown) (with the reason) -
    platform (glibc and CPU architecture against the wheel tags), python (Requires-Python and cp
    tags), driver (the NVIDIA driver against the CUDA runtime torch pins, from O(driver_table)),
    gpu_arch (the GPUs' compute capability against the SM targets in the kernels, from
    O(kernel_table)), memory_fit (weights / TP against GPU memory x mem_fraction_static, with the KV
    cache at context_length), disk (free space against the profile's size) and host_ram.
  - Never fails for a blocked check (the caller decides, after writing the report); fails only for
    bad input, such as a name in O(ignore) that is not a check.
options:
  version: {description: SGLang release (PyPI version)., type: str, required: true}
  dest: {description: The controller wheelhouse (ml_env_controller_wheelhouse)., type: path, required: true}
  python_version: {description: The host's Python for the venv as C(3.11) (empty when it could not be probed)., type: str, default: ""}
  architecture: {description: The host's CPU architecture., type: str, default: x86_64}
  glibc: {description: The host's glibc as C(2.36) (empty on musl)., type: str, default: ""}
  profile: {description: The ml_env profile the host installs (its size is what the disk check needs)., type: str, default: full, choices: [full, light]}
  extra_pins: {description: ml_env_extra_pins (name -> version)., type: dict, default: {}}
  retries: {description: Resolution attempts., type: int, default: 3}
  index_url: {description: The package index (PyPI)., type: str, default: "https://pypi.org"}
  gpu: {description: The host's GPU facts (ansible_facts.sglang_gpu from gpu_facts)., type: dict, default: {}}
  args: {description: The SGLang arguments (the host model's sglang_host.args)., type: dict, default: {}}
  host_facts: {description: "C(host_facts) of sglang_host_check (disk, RAM, model).", type: dict, default: {}}
  driver_table: {description: YAML file of CUDA version -> minimum driver., type: path, required: true}
  kernel_table: {description: YAML file of the kernels' SM targets (may not exist yet)., type: path, required: true}
  ignore: {description: Checks whose C(blocked) is accepted on purpose., type: list, elements: str, default: []}
extends_documentation_fragment: [sglang.fleet.inventory_host]
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Check the release can run on the host
  sglang.fleet.sglang_compat:
    version: "0.5.23"
    dest: ~/.cache/sglang-fleet/wheelhouse
    python_version: "3.11"
    glibc: "2.36"
    gpu: "{{ ansible_facts.sglang_gpu }}"
    args: "{{ sglang_host.args }}"
    host_facts: "{{ __host.host_facts }}"
    driver_table: "{{ role_path }}/files/cuda_min_driver.yml"
    kernel_table: "{{ role_path }}/files/kernel_sm_targets.yml"
  delegate_to: localhost
"""

RETURN = r"""
status: {description: "The worst status not ignored (ok, unknown or blocked).", type: str, returned: always}
summary: {description: "Counts per status, e.g. \"5 ok, 2 unknown\".", type: str, returned: always}
checks: {description: "One dict per check (check, status, detail, fix, ignored).", type: list, returned: always}
lines: {description: "One line per check, for the play output.", type: list, returned: always}
blocked: {description: The blocked checks not ignored., type: list, returned: always}
msg: {description: "What stops the host and how to get past it, or the summary.", type: str, returned: always}
release:
  description: What the verdict is about - version, resolved_for, resolve_error, error, cuda, pins (compiled packages).
  type: dict
  returned: always
"""

import fcntl
import os

import yaml
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.compat.checks import (
    KEY_PACKAGES,
    bad_ignores,
    check_disk,
    check_driver,
    check_gpu_arch,
    check_host_ram,
    check_memory_fit,
    check_platform,
    check_python,
    cuda_runtime,
    verdict,
)
from ansible_collections.sglang.fleet.plugins.module_utils.compat.release_facts import Pypi, release_facts
from ansible_collections.sglang.fleet.plugins.module_utils.module_options import inventory_host_option
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import WheelError, find_uv


def load_table(path):
    """A YAML data table, or None when the file does not exist (yet)."""
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return yaml.safe_load(fh) or {}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            python_version=dict(type="str", default=""),
            architecture=dict(type="str", default="x86_64"),
            glibc=dict(type="str", default=""),
            profile=dict(type="str", default="full", choices=["full", "light"]),
            extra_pins=dict(type="dict", default={}),
            retries=dict(type="int", default=3),
            index_url=dict(type="str", default="https://pypi.org"),
            gpu=dict(type="dict", default={}),
            args=dict(type="dict", default={}),
            host_facts=dict(type="dict", default={}),
            driver_table=dict(type="path", required=True),
            kernel_table=dict(type="path", required=True),
            ignore=dict(type="list", elements="str", default=[]),
            **inventory_host_option(),
        ),
        supports_check_mode=True,
    )
    p = module.params
    wrong = bad_ignores(p["ignore"])
    if wrong:
        module.fail_json(msg=f"{p['host']}: sglang_compat_ignore names {', '.join(wrong)}, which are not checks; "
                             "use platform, python, driver, gpu_arch, memory_fit, disk or host_ram")
    drivers = load_table(p["driver_table"])
    if drivers is None:
        module.fail_json(msg=f"the driver table {p['driver_table']} is missing (sglang_compat_driver_table)")
    kernels = load_table(p["kernel_table"])
    os.makedirs(p["dest"], exist_ok=True)
    # Hosts of one play resolve into the same wheelhouse (shared with ml_env): one at a time.
    lock_fd = os.open(os.path.join(p["dest"], ".wheelhouse.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        if not p["python_version"]:
            raise WheelError(f"the host's Python is unknown ({(p['host_facts'] or {}).get('python_error') or 'not probed'})")
        uv = find_uv()
        # run_command itself: release_facts downloads with run(argv, environ_update=...) (check_rc is False by default)
        release = release_facts(module.run_command, uv, p["dest"], p["version"],
                                p["python_version"], p["architecture"], p["glibc"], p["extra_pins"], p["profile"],
                                p["retries"], Pypi(p["dest"], p["index_url"]))
    except WheelError as exc:
        release = {"version": p["version"], "pins": {"sglang": p["version"]}, "files": {}, "size": {},
                   "error": str(exc)}
    finally:
        os.close(lock_fd)
    host = p["host_facts"] or {}
    model = host.get("model") or {}
    index_files = release.get("index_files")
    checks = [
        check_platform(release, p["python_version"], p["architecture"], p["glibc"], index_files),
        check_python(release, p["python_version"], p["architecture"], p["glibc"], index_files),
        check_driver(release, p["gpu"], drivers),
        check_gpu_arch(release, p["gpu"], p["architecture"], kernels),
        check_memory_fit(p["args"], p["gpu"], model, host),
        check_disk(release, host, p["profile"]),
        check_host_ram(p["args"], host, model),
    ]
    out = verdict(checks, p["ignore"])
    head = f"{p['host']}: sglang {p['version']}: {out['summary']}"
    if out["blocked"]:
        msg = (f"{head}. This host cannot run sglang {p['version']}; nothing on it was changed:\n"
               + "\n".join(f"  {c['check']}: {c['detail']} -> fix: {c['fix']}" for c in out["blocked"])
               + f"\nTo deploy anyway (you know better): sglang_compat_ignore: [{', '.join(c['check'] for c in out['blocked'])}]")
    else:
        msg = head
    pins = release.get("pins", {})
    cuda, cuda_from = cuda_runtime(pins)
    module.exit_json(
        changed=False, status=out["status"], summary=out["summary"], checks=out["checks"], lines=out["lines"],
        blocked=out["blocked"], msg=msg,
        release={"version": p["version"], "resolved_for": release.get("resolved_for"),
                 "resolve_error": release.get("resolve_error"), "error": release.get("error"),
                 "cuda": cuda, "cuda_from": cuda_from,
                 "pins": {n: pins[n] for n in sorted(pins) if n in KEY_PACKAGES or n.startswith("nvidia-cuda-runtime")}},
    )


if __name__ == "__main__":
    main()
