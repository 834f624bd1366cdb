#!/usr/bin/python
"""Controller-side wheelhouse for one sglang-router release: the same hash-locked mechanism as ml_env."""

DOCUMENTATION = r"""
module: sglang_router_wheelhouse
short_description: Lock an sglang-router release by hash for one host's Python and platform, and cache its wheels
description:
  - Runs where it is delegated (the controller). The same mechanism as ml_env's sglang_wheelhouse
    (plugins/module_utils/release/wheels.py, reused, not copied); a lock made once with C(uv pip compile
    --generate-hashes --only-binary :all:) for the host's CPython, architecture and glibc, wheels chosen
    by their tags, downloaded with pip when missing, and every wheel checked against the lock's sha256
    (a wheel altered in the wheelhouse fails with the file, the expected and actual sha256 and the fix).
  - Extracts the C(sglang_router) package of the chosen wheel (its Python files and its compiled
    extension) so the flags can be checked with the release's own argparse before a host changes.
  - Packs those wheels into one tar (named by the lock's sha256), so the host receives them in one
    transfer; the host's installer checks every wheel against the lock again (C(--require-hashes)).
  - The wheelhouse is a cache on the controller; filling it is never reported as a change.
options:
  version: {description: sglang-router release (PyPI version)., type: str, required: true}
  dest: {description: Controller folder of the wheelhouse (ml_env's)., type: path, required: true}
  python_version: {description: The host's Python as C(3.11)., type: str, required: true}
  architecture: {description: The host's CPU architecture., type: str, default: x86_64}
  glibc: {description: The host's glibc version as C(2.36)., type: str, required: true}
  retries: {description: Download and resolution attempts before failing., type: int, default: 3}
author:
  - sglang-fleet developers (@sglang-fleet)
"""

EXAMPLES = r"""
- name: Fill the wheelhouse for the router host
  sglang.fleet.sglang_router_wheelhouse:
    version: "0.3.2"
    dest: ~/.cache/sglang-fleet/wheelhouse
    python_version: "3.11"
    glibc: "2.36"
  delegate_to: localhost
"""

RETURN = r"""
wheels: {description: Every wheel the host installs from the lock., type: list, returned: always}
lock: {description: The hash-locked requirements the host installs with --require-hashes., type: str, returned: always}
lock_file: {description: Where that lock is kept on the controller., type: str, returned: always}
bundle: {description: "One tar of those wheels (checked against the lock), pushed to the host in one transfer.", type: str, returned: always}
source_dir: {description: Extracted C(sglang_router) package folder of this release (for this host's platform)., type: str, returned: always}
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
    host_tags,
    lock_wheelhouse,
    make_lock,
    parse_lock,
    pip_download,
)


def fill(module, p):
    """(lock_file, lock, {name: wheel path}, downloaded) for the router on this host's platform."""
    dest, python, arch, glibc, retries = p["dest"], p["python_version"], p["architecture"], p["glibc"], p["retries"]
    requirement = f"sglang-router=={p['version']}"
    lock_file, lock = make_lock(module.run_command, find_uv(), dest, f"sglang-router-{p['version']}", requirement,
                                python, arch, glibc, no_deps=False, retries=retries)
    entries, tags = parse_lock(lock), host_tags(python, arch, glibc)
    missing = [f"{n}=={v}" for n, (v, _) in entries.items() if not choose_wheel(dest, n, v, tags)]
    downloaded = []
    if missing:
        rc, out, err, argv = pip_download(module.run_command, dest, missing, python, arch, glibc, retries)
        if rc != 0:
            why = next((ln.strip() for ln in reversed((err or out or "").splitlines()) if ln.strip()), f"rc {rc}")
            module.fail_json(msg=f"the controller wheelhouse {dest} has no wheel of {' '.join(missing)} for CPython "
                                 f"{python} on {arch} (glibc {glibc}), and downloading it failed: {why}. Check the "
                                 "controller reaches the index, or put the wheels there yourself; nothing on the "
                                 "host was changed", cmd=argv)
        downloaded = [m.split("==")[0] for m in missing]
    chosen = {}
    for name, (version, hashes) in entries.items():
        path = choose_wheel(dest, name, version, tags)
        if not path:
            raise WheelError(f"no wheel of {name}=={version} for CPython {python} on {arch} (glibc {glibc}) in {dest}")
        check_hash(path, name, version, hashes, lock_file)
        chosen[name] = path
    return lock_file, lock, chosen, downloaded


def extract_package(wheel, version, dest):
    """dest/src/sglang-router-<version>/<wheel name>/sglang_router (made once, atomically)."""
    target = os.path.join(dest, "src", f"sglang-router-{version}", os.path.basename(wheel)[:-4])

    def unpack(tmp):
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang_router/")])
    return os.path.join(publish_dir(target, unpack), "sglang_router")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            python_version=dict(type="str", required=True),
            architecture=dict(type="str", default="x86_64"),
            glibc=dict(type="str", required=True),
            retries=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    p = module.params
    lock_wheelhouse(p["dest"])   # the same lock as sglang_wheelhouse's
    try:
        lock_file, lock, chosen, downloaded = fill(module, p)
        source_dir = extract_package(chosen["sglang-router"], p["version"], p["dest"])
        archive = bundle(chosen.values(), lock, f"sglang-router-{p['version']}", p["dest"])
    except WheelError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, wheels=sorted(chosen.values()), lock=lock, lock_file=lock_file,
                     source_dir=source_dir, bundle=archive, downloaded=downloaded)


if __name__ == "__main__":
    main()
