#!/usr/bin/python
"""Build one SGLang venv on a host from its lock, offline (plugins/module_utils/release/venv_build.py).

Its action plugin (plugins/action/sglang_venv.py) pushes the wheels and the lock first, then runs it.
"""

DOCUMENTATION = r"""
module: sglang_venv
short_description: Push an SGLang release's wheels and lock to a host and build its venv from them, offline
description:
  - One task for ml_env's install (it was one task per step). First, from the controller, the action plugin
    makes O(folders) (root, 0755) and pushes the wheels to O(wheelhouse) (O(bundle), one tar, unpacked
    there; else each of O(wheels)), with ansible.builtin.file, unarchive and copy, under --check and --diff
    as they behave.
  - "Then this module, on the host: writes O(lock_content) to O(lock) (root, 0644; its diff under --diff) and,
    unless under --check (the task says what a real run would build instead), in this order: removes a
    half-built or outdated O(venv); with uv, writes O(uv_lock_content) to O(uv_lock), refuses a uv wheel
    whose sha256 it does not lock and unpacks uv's static binary into O(uv) (once per release); creates
    the venv; installs the lock into it with C(--require-hashes --no-index --find-links <wheelhouse>)
    (C(--no-deps) for the light profile, bytecode compiled for the full one); checks every file the
    installer recorded is in the venv; marks it complete (O(marker), a copy of the lock)."
  - 'A step that fails removes the half-built venv and fails the task with C(Building <venv> with <installer>
    failed in "<step>": <its error>), the rest as it was.'
options:
  venv: {description: The venv to build (C(<root>/sglang-<version>))., type: str, required: true}
  python: {description: The host's Python the venv is built on., type: str, default: /usr/bin/python3}
  installer: {description: C(uv) (unpacked from the pushed wheel) or C(pip) (the venv's own)., type: str, choices: [uv, pip], default: uv}
  profile: {description: "C(full): the lock with its dependencies, compiled to bytecode; C(light): the sglang wheel alone
      (C(--no-deps)).", type: str, choices: [full, light], default: full}
  wheelhouse: {description: The host's folder of the pushed wheels (C(--find-links))., type: str, required: true}
  lock: {description: Where the hash-locked lock is written on the host; the venv is built from it., type: str, required: true}
  lock_content: {description: "The lock's text (action plugin: written to O(lock) before the build).", type: str, required: true}
  marker: {description: "The venv's completion marker, a copy of the lock (ml_env's is in the venv, named as the observe layer's
      VENV_MARKER that drift and the host check read).", type: str, required: true}
  folders: {description: "Folders made first, owned by root, 0755 (action plugin).", type: list, elements: str, default: []}
  wheels: {description: "Controller paths of the wheels to push one by one when there is no O(bundle) (action plugin).",
    type: list, elements: str, default: []}
  bundle: {description: "Controller path of one tar of the wheels, unpacked into O(wheelhouse) (action plugin); empty for
      O(wheels).", type: str, default: ""}
  uv: {description: "The folder uv is unpacked into (C(<uv>/bin/uv)); O(installer=uv).", type: str, default: ""}
  uv_wheel: {description: "The uv wheel's file name in O(wheelhouse); O(installer=uv).", type: str, default: ""}
  uv_lock: {description: "Where uv's hash-locked requirement is written on the host; O(installer=uv).", type: str, default: ""}
  uv_lock_content: {description: "uv's hash-locked requirement (PyPI's sha256 of each of its wheels); O(installer=uv).",
    type: str, default: ""}
  uv_version: {description: "The uv release (for the message of a refused wheel); O(installer=uv).", type: str, default: ""}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Push the wheels and the lock, and build the venv from them
  sglang.fleet.sglang_venv:
    venv: /opt/ml-env/sglang-0.5.11
    profile: light
    folders: [/opt/ml-env, /opt/ml-env/wheelhouse, /opt/ml-env/locks]
    wheels: [/root/.cache/sglang-fleet/wheelhouse/sglang-0.5.11-py3-none-any.whl]
    wheelhouse: /opt/ml-env/wheelhouse
    lock: /opt/ml-env/locks/sglang-0.5.11-light.txt
    lock_content: "sglang==0.5.11 --hash=sha256:..."
    marker: /opt/ml-env/sglang-0.5.11/.built-from-lock.txt
    uv: /opt/ml-env/.tools/uv-0.13.9
    uv_wheel: uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
    uv_lock: /opt/ml-env/locks/uv-0.13.9.txt
    uv_lock_content: "uv==0.13.9 --hash=sha256:..."
    uv_version: "0.13.9"
"""

RETURN = r"""
venv: {description: The venv built., type: str, returned: success}
step: {description: The step that failed., type: str, returned: failure}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import read_bytes
from ansible_collections.sglang.fleet.plugins.module_utils.release.venv_build import (
    StepFailed,
    build,
    failure_message,
    file_differs,
    put_file,
    remove_path,
)

ARGUMENT_SPEC = {
    "venv": {"type": "str", "required": True},
    "python": {"type": "str", "default": "/usr/bin/python3"},
    "installer": {"type": "str", "choices": ["uv", "pip"], "default": "uv"},
    "profile": {"type": "str", "choices": ["full", "light"], "default": "full"},
    "wheelhouse": {"type": "str", "required": True},
    "lock": {"type": "str", "required": True},
    "lock_content": {"type": "str", "required": True},
    "marker": {"type": "str", "required": True},
    "folders": {"type": "list", "elements": "str", "default": []},
    "wheels": {"type": "list", "elements": "str", "default": []},
    "bundle": {"type": "str", "default": ""},
    "uv": {"type": "str", "default": ""},
    "uv_wheel": {"type": "str", "default": ""},
    "uv_lock": {"type": "str", "default": ""},
    "uv_lock_content": {"type": "str", "default": ""},
    "uv_version": {"type": "str", "default": ""},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_if=[("installer", "uv", ("uv", "uv_wheel", "uv_lock", "uv_lock_content"))])
    p = module.params
    lock = p["lock_content"].encode()
    result = {"changed": file_differs(p["lock"], lock), "venv": p["venv"]}
    if module._diff and result["changed"]:
        before = read_bytes(p["lock"])
        result["diff"] = {"before_header": p["lock"], "after_header": p["lock"],
                          "before": "" if before is None else before.decode(errors="replace"), "after": p["lock_content"]}
    if module.check_mode:  # nothing is written or built
        module.exit_json(**result)
    try:
        put_file(p["lock"], lock)
    except OSError as exc:
        module.fail_json(msg=f"could not write the lock {p['lock']}: {exc}")

    def run(argv):
        rc, out, err = module.run_command(argv, handle_exceptions=False)
        return rc, out.rstrip("\r\n"), err.rstrip("\r\n")

    try:
        build(p, run)
    except StepFailed as exc:
        try:  # the rescue: the next run starts clean
            remove_path(p["venv"])
        except SglangFleetError as cleanup:
            module.fail_json(msg=str(cleanup), step=exc.step, **exc.result)
        module.fail_json(msg=failure_message(p["venv"], p["installer"], exc.step, exc.detail), step=exc.step, **exc.result)
    module.exit_json(**{**result, "changed": True})


if __name__ == "__main__":
    main()
