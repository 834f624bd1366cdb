#!/usr/bin/python
"""Controller-side wheelhouse for one SGLang release: download once, read its pins."""

DOCUMENTATION = r"""
module: sglang_wheelhouse
short_description: Download an SGLang release's wheel once on the controller and read its pins
description:
  - Runs where it is delegated (the controller). Downloads the C(sglang) wheel for the host's
    Python and platform into O(dest) with pip, unless it is there already, and optionally the
    C(uv) wheel for the host.
  - Reads the wheel's metadata and returns the exact pins SGLang ships with (torch,
    flashinfer-python, sglang-kernel...), adding C(flashinfer-jit-cache) in lockstep with
    C(flashinfer-python): a skew between the two broke SGLang (sglang PR 28786).
  - Extracts the C(sglang) package's source next to the wheel, so flags can be checked
    against the exact release before anything changes on a host.
  - The wheelhouse is a cache on the controller, so filling it is never reported as a change.
options:
  version: {description: SGLang release (PyPI version)., type: str, required: true}
  dest: {description: Controller folder of the wheelhouse., type: path, required: true}
  python_version: {description: The host's Python as C(3.11)., type: str, required: true}
  architecture: {description: The host's CPU architecture., type: str, default: x86_64}
  uv_version: {description: Also fetch this uv release for the host (empty to skip)., type: str, default: ""}
  extra_pins: {description: Extra pins (name -> version) that win over the wheel's., type: dict, default: {}}
  retries: {description: Download attempts before failing., type: int, default: 3}
"""

EXAMPLES = r"""
- name: Fill the wheelhouse for this host's release
  sglang_wheelhouse:
    version: "0.5.11"
    dest: ~/.cache/sglang-fleet/wheelhouse
    python_version: "3.11"
  delegate_to: localhost
"""

RETURN = r"""
wheel: {description: Path of the sglang wheel on the controller., type: str, returned: always}
wheel_sha256: {description: SHA-256 of the sglang wheel., type: str, returned: always}
uv_wheel: {description: Path of the uv wheel, or empty., type: str, returned: always}
source_dir: {description: Extracted C(sglang) package folder of this release., type: str, returned: always}
pins: {description: Exact pins for the full profile (name -> version), sorted., type: dict, returned: always}
downloaded: {description: Wheels downloaded by this run., type: list, returned: always}
"""

import glob
import hashlib
import os
import re
import shutil
import sys
import time
import zipfile

from ansible.module_utils.basic import AnsibleModule

# glibc levels pip may pick for a manylinux wheel (pip matches each tag exactly).
MANYLINUX = ("2_17", "2_24", "2_27", "2_28", "2_31", "2_34", "2_35")
LOCKSTEP = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def find_wheel(dest, name, version):
    pattern = os.path.join(dest, f"{name}-{version}-*.whl")
    found = sorted(glob.glob(pattern))
    return found[0] if found else ""


def download(module, dest, requirement, python_version, architecture, retries):
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--implementation", "cp", "--python-version", python_version, "--dest", dest]
    for level in MANYLINUX:
        argv += ["--platform", f"manylinux_{level}_{architecture}"]
    argv += ["--platform", f"manylinux2014_{architecture}", "--platform", "any", requirement]
    for attempt in range(1, retries + 1):
        rc, out, err = module.run_command(argv)
        if rc == 0:
            return
        if attempt < retries:
            time.sleep(min(2 ** attempt, 10))
    module.fail_json(
        msg=f"could not download {requirement} for Python {python_version} on {architecture} after "
            f"{retries} attempts; check the version exists on the index (pip index versions "
            f"{requirement.split('==')[0]}) and that the controller reaches it",
        rc=rc, stdout=out, stderr=err, cmd=argv)


def wheel_pins(wheel):
    """Exact `name==version` requirements that apply whatever the extras and platform."""
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(meta_name).decode("utf-8")
    pins = {}
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if ";" in req:  # extras and platform markers: not part of the base install
            continue
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^,\s]+)$", req)
        if match:
            pins[canonical(match.group(1))] = match.group(2)
    if "flashinfer-python" in pins:
        for name in LOCKSTEP:
            pins.setdefault(name, pins["flashinfer-python"])
    return pins


def extract_source(wheel, version, dest):
    target = os.path.join(dest, "src", f"sglang-{version}")
    marker = os.path.join(target, ".complete")
    if not os.path.exists(marker):
        tmp = f"{target}.tmp{os.getpid()}"
        with zipfile.ZipFile(wheel) as zf:
            members = [n for n in zf.namelist() if n.startswith("sglang/") and n.endswith(".py")]
            zf.extractall(tmp, members)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.isdir(target) and not os.path.exists(marker):  # a previous run died half-way
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
            open(marker, "w").close()
        except OSError:  # another host's task extracted the same release first
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.exists(marker):
                raise
    return os.path.join(target, "sglang")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            python_version=dict(type="str", required=True),
            architecture=dict(type="str", default="x86_64"),
            uv_version=dict(type="str", default=""),
            extra_pins=dict(type="dict", default={}),
            retries=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    p = module.params
    os.makedirs(p["dest"], exist_ok=True)
    downloaded = []
    wheels = {}
    wanted = [("sglang", p["version"])] + ([("uv", p["uv_version"])] if p["uv_version"] else [])
    for name, version in wanted:
        wheel = find_wheel(p["dest"], name, version)
        if not wheel:
            download(module, p["dest"], f"{name}=={version}", p["python_version"], p["architecture"], p["retries"])
            wheel = find_wheel(p["dest"], name, version)
            downloaded.append(os.path.basename(wheel))
        wheels[name] = wheel

    pins = wheel_pins(wheels["sglang"])
    extra = {canonical(k): str(v) for k, v in p["extra_pins"].items()}
    skew = {n: v for n, v in extra.items() if n in LOCKSTEP and pins.get(n) not in (None, v)}
    if skew:
        module.fail_json(
            msg=f"ml_env_extra_pins {skew} would skew FlashInfer against sglang {p['version']}, which "
                f"pins flashinfer-python=={pins['flashinfer-python']}; flashinfer-python, flashinfer-cubin "
                "and flashinfer-jit-cache must move in lockstep (sglang PR 28786): remove the pin or pin "
                "all three to the same version")
    pins.update(extra)
    pins["sglang"] = p["version"]

    with open(wheels["sglang"], "rb") as fh:
        sha256 = hashlib.sha256(fh.read()).hexdigest()
    module.exit_json(
        changed=False,
        wheel=wheels["sglang"],
        wheel_sha256=sha256,
        uv_wheel=wheels.get("uv", ""),
        source_dir=extract_source(wheels["sglang"], p["version"], p["dest"]),
        pins=dict(sorted(pins.items())),
        downloaded=downloaded,
    )


if __name__ == "__main__":
    main()
