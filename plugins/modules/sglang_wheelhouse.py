#!/usr/bin/python
"""Controller-side wheelhouse for one SGLang release: download once, read its pins."""

DOCUMENTATION = r"""
module: sglang_wheelhouse
short_description: Lock an SGLang release by hash for one host's Python and platform, and cache its wheels
description:
  - Runs where it is delegated (the controller). Resolves a hash-locked lock for (SGLang version,
    profile, the host's CPython version, CPU architecture and glibc) with C(uv pip compile
    --generate-hashes --only-binary :all:), once; the lock is kept under O(dest)/locks and reused
    while its inputs are the same (delete it to re-resolve).
  - I(light) locks the C(sglang) wheel alone; I(full) locks sglang with its whole CUDA stack,
    constrained so that C(flashinfer-python), C(flashinfer-cubin) and C(flashinfer-jit-cache) move
    in lockstep (a skew broke SGLang, sglang PR 28786); O(extra_pins) override the wheel's own pins.
  - Picks each wheel in O(dest) by its tags for the host (C(packaging.tags)), downloads the missing
    ones with pip, and checks every wheel's sha256 against the lock. A wheel whose sha256 is not in
    the lock fails the task with the file, the expected and actual sha256 and the fix.
  - Reads the sglang wheel's pins with C(packaging) (markers evaluated for the host, extras left
    out) and extracts its source next to the wheels, so flags can be checked against the exact
    release before anything changes on a host.
  - The wheelhouse is a cache on the controller, so filling it is never reported as a change.
options:
  version: {description: SGLang release (PyPI version)., type: str, required: true}
  dest: {description: Controller folder of the wheelhouse., type: path, required: true}
  python_version: {description: The host's Python as C(3.11)., type: str, required: true}
  architecture: {description: The host's CPU architecture (x86_64 or aarch64)., type: str, default: x86_64}
  glibc: {description: The host's glibc version as C(2.36)., type: str, required: true}
  profile: {description: C(full) (sglang and its CUDA stack) or C(light) (the sglang wheel alone)., type: str, default: full}
  uv_version: {description: Also lock and fetch this uv release for the host (empty to skip)., type: str, default: ""}
  extra_pins: {description: Extra pins (name -> version) that override the wheel's (full profile)., type: dict, default: {}}
  retries: {description: Download and resolution attempts before failing., type: int, default: 3}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Fill the wheelhouse for this host's release
  sglang.fleet.sglang_wheelhouse:
    version: "0.5.11"
    dest: ~/.cache/sglang-fleet/wheelhouse
    python_version: "3.11"
    architecture: x86_64
    glibc: "2.36"
    profile: light
  delegate_to: localhost
"""

RETURN = r"""
wheel: {description: Path of the sglang wheel chosen for the host., type: str, returned: always}
wheel_sha256: {description: SHA-256 of that wheel (one of the lock's)., type: str, returned: always}
wheels: {description: Every wheel the host installs from the lock (sglang alone for light)., type: list, returned: always}
lock: {description: The hash-locked requirements the host installs with --require-hashes., type: str, returned: always}
lock_file: {description: Where that lock is kept on the controller., type: str, returned: always}
uv_wheel: {description: "Path of the uv wheel for the host, or empty.", type: str, returned: always}
bundle: {description: "Full profile: one uncompressed tar of I(wheels) and the uv wheel (made once per lock in
    the wheelhouse's bundles/), pushed to the host in one transfer; empty for light.", type: str, returned: always}
uv_lock: {description: "The hash-locked uv requirement (PyPI's sha256 of that wheel), or empty.", type: str, returned: always}
source_dir: {description: Extracted C(sglang) package folder of this release., type: str, returned: always}
pins: {description: "The sglang wheel's exact pins on this host (name -> version) plus extra_pins, sorted.", type: dict, returned: always}
downloaded: {description: Wheels downloaded by this run., type: list, returned: always}
"""

import os
import zipfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sglang.fleet.plugins.module_utils.files import publish_dir
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import (
    WheelError,
    bundle,
    check_hash,
    choose_wheel,
    find_uv,
    full_requirement,
    host_tags,
    lock_wheelhouse,
    make_lock,
    parse_lock,
    pip_download,
)


class Wheelhouse:
    """One host's view of the controller wheelhouse: its tags, platform and locks."""

    def __init__(self, module):
        p = module.params
        self.module, self.dest, self.retries = module, p["dest"], p["retries"]
        self.python, self.arch, self.glibc = p["python_version"], p["architecture"], p["glibc"]
        self.tags = host_tags(self.python, self.arch, self.glibc)
        self.host = f"CPython {self.python} on {self.arch} (glibc {self.glibc})"
        self.downloaded = []
        self.uv = find_uv()

    def lock(self, key, requirement, no_deps, constraints=(), overrides=()):
        """The lock for `requirement` on this host's platform (made once, then reused)."""
        return make_lock(self.module.run_command, self.uv, self.dest, key, requirement, self.python, self.arch,
                         self.glibc, no_deps, constraints, overrides, self.retries)

    def wheels(self, lock_file, text):
        """The host's wheel for every pin of the lock, each checked against the lock's sha256."""
        entries = parse_lock(text)
        chosen, missing = {}, []
        for name, (version, hashes) in entries.items():
            path = choose_wheel(self.dest, name, version, self.tags)
            if path:
                check_hash(path, name, version, hashes, lock_file)
                chosen[name] = path
            else:
                missing.append(f"{name}=={version}")
        if missing:
            self.download(missing)
            for requirement in missing:
                name, version = requirement.split("==")
                path = choose_wheel(self.dest, name, version, self.tags)
                if not path:
                    raise WheelError(f"no wheel of {requirement} for {self.host} in {self.dest} after downloading it "
                                     "(pip picked none that fits this host); pick another release or Python")
                check_hash(path, name, version, entries[name][1], lock_file)
                self.downloaded.append(os.path.basename(path))
                chosen[name] = path
        return chosen

    def download(self, requirements):
        """pip download the missing wheels into the wheelhouse (sglang_wheels.pip_download)."""
        rc, out, err, argv = pip_download(self.module.run_command, self.dest, requirements, self.python, self.arch,
                                          self.glibc, self.retries)
        if rc == 0:
            return
        why = next((line.strip() for line in reversed((err or out or "").splitlines()) if line.strip()), f"rc {rc}")
        self.module.fail_json(
            msg=f"the controller wheelhouse {self.dest} (ml_env_controller_wheelhouse) has no wheel of "
                f"{' '.join(requirements)} for {self.host}, and downloading it failed after {self.retries} "
                f"attempt(s): {why}. Check the versions exist on the index (pip index versions <name>) and that the "
                f"controller reaches it, or put the wheel in {self.dest} yourself; then re-run (nothing on the host "
                "was changed)",
            rc=rc, stdout=out, stderr=err, cmd=argv)


def extract_source(wheel, version, dest):
    target = os.path.join(dest, "src", f"sglang-{version}")

    def unpack(tmp):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")])
    return os.path.join(publish_dir(target, unpack), "sglang")  # another host's task may extract it first


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            python_version=dict(type="str", required=True),
            architecture=dict(type="str", default="x86_64"),
            glibc=dict(type="str", required=True),
            profile=dict(type="str", default="full", choices=["full", "light"]),
            uv_version=dict(type="str", default=""),
            extra_pins=dict(type="dict", default={}),
            retries=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    p = module.params
    lock_wheelhouse(p["dest"])
    try:
        house = Wheelhouse(module)
        # The sglang wheel alone first: its metadata gives the pins the full lock is constrained by.
        sglang = f"sglang=={p['version']}"
        light_file, light_lock = house.lock(f"sglang-{p['version']}-light", sglang, no_deps=True)
        wheel = house.wheels(light_file, light_lock)["sglang"]
        pins, full, constraints, overrides = full_requirement(wheel, p["version"], house.python, house.arch,
                                                              p["extra_pins"])
        if p["profile"] == "light":
            lock_file, lock, wheels = light_file, light_lock, [wheel]
        else:
            lock_file, lock = house.lock(f"sglang-{p['version']}-full", full, False, constraints, overrides)
            chosen = house.wheels(lock_file, lock)
            wheel, wheels = chosen["sglang"], sorted(chosen.values())
        uv_wheel = uv_lock = ""
        if p["uv_version"]:
            uv_file, uv_lock = house.lock(f"uv-{p['uv_version']}", f"uv=={p['uv_version']}", no_deps=True)
            uv_wheel = house.wheels(uv_file, uv_lock)["uv"]
        source_dir = extract_source(wheel, p["version"], p["dest"])
        archive = "" if p["profile"] == "light" or module.check_mode else \
            bundle([*wheels, *([uv_wheel] if uv_wheel else [])], lock + uv_lock,
                   os.path.basename(lock_file)[:-len(".txt")], p["dest"])
    except WheelError as exc:
        module.fail_json(msg=str(exc))

    module.exit_json(
        changed=False,
        wheel=wheel,
        wheel_sha256=check_hash(wheel, "sglang", p["version"], parse_lock(lock)["sglang"][1], lock_file),
        wheels=wheels,
        lock=lock,
        lock_file=lock_file,
        uv_wheel=uv_wheel,
        uv_lock=uv_lock,
        bundle=archive,
        source_dir=source_dir,
        pins=dict(sorted(pins.items())),
        downloaded=house.downloaded,
    )


if __name__ == "__main__":
    main()
