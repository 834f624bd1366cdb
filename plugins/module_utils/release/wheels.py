"""Controller side of ml_env: which wheels fit a host, what the sglang wheel pins, hash-locked files.

Runs on the controller only (the sglang_wheelhouse module is delegated to localhost), so it may use
`packaging`, which ansible-core depends on: wheel tags, requirements and markers are read with the
library pip and uv follow, not with regexes.
"""

import fcntl
import hashlib
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile

from packaging.markers import default_environment
from packaging.metadata import parse_email
from packaging.requirements import Requirement
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import (
    atomic_file,
    file_sha256,
    move_files,
    write_atomic,
)

# Moved in lockstep: a skew between them broke SGLang (sglang PR 28786).
LOCKSTEP = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
ARCHITECTURES = ("x86_64", "aarch64")
# manylinux levels uv's --python-platform knows (`uv pip compile --help`, uv 0.13.9).
UV_GLIBC_MIN, UV_GLIBC_MAX = 17, 40


class WheelError(SglangFleetError):
    """Bad input or a wheel that must not be installed; the message says what to do."""


def parse_glibc(glibc):
    """'2.36' -> 36 (the minor of glibc 2.x)."""
    match = re.match(r"^2\.(\d+)$", glibc or "")
    if not match:
        raise WheelError(f"glibc {glibc!r}: SGLang's wheels are manylinux wheels and need a glibc 2.x host")
    return int(match.group(1))


def host_platforms(architecture, glibc):
    """The manylinux platform tags a glibc host accepts, best first (as pip and uv rank them)."""
    if architecture not in ARCHITECTURES:
        raise WheelError(f"CPU architecture {architecture!r}: SGLang ships wheels for {', '.join(ARCHITECTURES)} only")
    minor = parse_glibc(glibc)
    if minor < UV_GLIBC_MIN:
        raise WheelError(f"glibc {glibc} is older than 2.{UV_GLIBC_MIN}, the oldest manylinux level this installs for")
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    platforms = []
    for level in range(minor, 4, -1):
        platforms.append(f"manylinux_2_{level}_{architecture}")
        if level in legacy:
            platforms.append(f"{legacy[level]}_{architecture}")
    return platforms


def host_tags(python_version, architecture, glibc):
    """Wheel tags a CPython `python_version` ('3.12') host installs, best first."""
    major, minor = (int(p) for p in python_version.split(".")[:2])
    platforms = host_platforms(architecture, glibc)
    return list(cpython_tags((major, minor), platforms=platforms)) + list(
        compatible_tags((major, minor), f"cp{major}{minor}", platforms))


def uv_platform(architecture, glibc):
    """uv's --python-platform for the host (capped at the newest manylinux level uv knows)."""
    host_platforms(architecture, glibc)  # validates both
    return f"{architecture}-manylinux_2_{min(parse_glibc(glibc), UV_GLIBC_MAX)}"


def marker_environment(python_version, architecture):
    """PEP 508 marker values of a Linux CPython host (for the Requires-Dist markers)."""
    env = default_environment()
    env.update(python_version=python_version, python_full_version=f"{python_version}.0",
               implementation_name="cpython", platform_python_implementation="CPython",
               sys_platform="linux", platform_system="Linux", os_name="posix", platform_machine=architecture,
               extra="")
    return env


def wheel_metadata(wheel):
    """The wheel's METADATA fields, parsed by packaging (requires_dist, provides_extra...)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        raw, _ = parse_email(zf.read(name))
    return raw


def metadata_requirements(wheel):
    """The wheel's Requires-Dist entries as packaging Requirements."""
    return [Requirement(r) for r in wheel_metadata(wheel).get("requires_dist", [])]


def serving_extras(wheel):
    """Extras the serving stack lives in: ("srt",) up to sglang 0.4 (sglang[srt]), none since 0.5."""
    return ("srt",) if "srt" in wheel_metadata(wheel).get("provides_extra", []) else ()


def wheel_pins(wheel, python_version="3.11", architecture="x86_64", extras=()):
    """Exact `==` pins of the install on this host with `extras`, FlashInfer's companions in lockstep.

    `flashinfer_python[cu13]==0.6.17` pins flashinfer-python (the extra is what it brings along).
    """
    envs = [marker_environment(python_version, architecture)]
    envs += [{**envs[0], "extra": extra} for extra in extras]
    pins = {}
    for req in metadata_requirements(wheel):
        if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
            continue  # another extra (diffusion, test...) or another platform
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            pins[canonicalize_name(req.name)] = specs[0].version
    if "flashinfer-python" in pins:
        for name in LOCKSTEP:
            pins.setdefault(name, pins["flashinfer-python"])
    return pins


def lockstep_skew(pins, extra):
    """Extra pins that would move one FlashInfer package away from the others, or {}."""
    merged = {**pins, **extra}
    if len({merged[n] for n in LOCKSTEP if n in merged}) <= 1:
        return {}
    return {n: v for n, v in extra.items() if n in LOCKSTEP}


def parse_lock(text):
    """A `uv pip compile --generate-hashes` lock -> {name: (version, [sha256, ...])}."""
    entries = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        req = Requirement(re.sub(r"\s--hash=\S+", "", line).strip())
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or not hashes:
            raise WheelError(f"lock line {line!r} is not one exact pin with its sha256 hashes")
        entries[canonicalize_name(req.name)] = (specs[0].version, hashes)
    return entries


def lock_wheelhouse(dest):
    """Create `dest` and hold its exclusive lock until this process ends: the hosts of one play
    (and the router's module) fill the same controller wheelhouse, one at a time."""
    os.makedirs(dest, exist_ok=True)
    fd = os.open(os.path.join(dest, ".wheelhouse.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def choose_wheel(folder, name, version, tags):
    """The wheel of name==version in `folder` that ranks best for the host's tags, or None."""
    rank = {tag: i for i, tag in enumerate(tags)}
    best = None
    for entry in os.listdir(folder) if os.path.isdir(folder) else []:
        if not entry.endswith(".whl"):
            continue
        try:
            wname, wversion, _, wtags = parse_wheel_filename(entry)
        except InvalidWheelFilename:
            continue
        if wname != canonicalize_name(name) or wversion != Version(version):
            continue
        score = min((rank[t] for t in wtags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, os.path.join(folder, entry))
    return best[1] if best else None


def check_hash(path, name, version, hashes, lock_file):
    """Refuse a wheel whose sha256 is not one the lock holds for name==version."""
    actual = file_sha256(path)
    if actual not in hashes:
        raise WheelError(
            f"{path} has sha256 {actual}, but the lock {lock_file} expects {' or '.join(hashes)} for "
            f"{name}=={version}: the file was altered or corrupted, and nothing was installed from it. "
            f"Delete it (rm {path}) and re-run: it is downloaded again and checked against the lock.")
    return actual


def find_uv():
    """The controller's uv: next to this Python (the toolchain venv pins it) or on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "uv")
    found = here if os.access(here, os.X_OK) else shutil.which("uv")
    if not found:
        raise WheelError("uv is not installed on the controller; it resolves the locks: `make venv` "
                         "(requirements/dev.lock pins it) or `pip install uv`")
    return found


def full_requirement(wheel, version, python_version, architecture, extra_pins):
    """What the full profile is locked from, read from the sglang wheel: (pins with the extra pins and
    sglang itself, the requirement with the serving extras, constraints, overrides)."""
    extras = serving_extras(wheel)
    pins = wheel_pins(wheel, python_version, architecture, extras)
    extra = {canonicalize_name(k): str(v) for k, v in (extra_pins or {}).items()}
    skew = lockstep_skew(pins, extra)
    if skew:
        raise WheelError(
            f"ml_env_extra_pins {skew} would skew FlashInfer against sglang {version}, which "
            f"pins flashinfer-python=={pins.get('flashinfer-python')}; flashinfer-python, flashinfer-cubin "
            "and flashinfer-jit-cache must move in lockstep (sglang PR 28786): remove the pin or pin "
            "all three to the same version")
    pins.update(extra)
    pins["sglang"] = version
    constraints, overrides = full_lock_inputs(pins, extra)
    requirement = f"sglang[{','.join(extras)}]=={version}" if extras else f"sglang=={version}"
    return pins, requirement, constraints, overrides


def pip_download(run, dest, requirements, python_version, architecture, glibc, retries):
    """pip download the wheels of `requirements` for one host's CPython and platform into a private
    folder, then move each into `dest` whole (no partial files). `run(argv, environ_update=...)`
    -> (rc, out, err), as AnsibleModule.run_command. Returns (rc, out, err, argv) of the last
    attempt; rc 0: every wheel is in `dest`.

    The controller's own pip constraint files (pip.conf `constraint`) are set aside: the lock's
    exact pins are the constraint, made for another host, and a cap meant for the controller's
    installs (e.g. `torchvision<=0.29.1`) would only make its pinned wheel impossible to fetch.
    Index settings (pip.conf's index-url, a mirror) still apply."""
    minor = python_version.split(".")[1]
    tmp = tempfile.mkdtemp(prefix=".download-", dir=dest)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--implementation", "cp", "--python-version", python_version,
            "--abi", f"cp3{minor}", "--abi", "abi3", "--abi", "none", "--dest", tmp]
    for platform in host_platforms(architecture, glibc):
        argv += ["--platform", platform]
    argv += list(requirements)
    try:
        for attempt in range(1, max(retries, 1) + 1):
            rc, out, err = run(argv, environ_update={"PIP_CONSTRAINT": os.devnull})
            if rc == 0:
                move_files(tmp, dest)
                break
            if attempt < retries:
                time.sleep(min(2 ** attempt, 10))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rc, out, err, argv


def full_lock_inputs(pins, extra):
    """Constraints (FlashInfer's three packages at one version) and overrides (extra pins) of a full lock."""
    merged = {**pins, **extra}
    version = merged.get("flashinfer-python")
    constraints = [f"{n}=={version}" for n in LOCKSTEP] if version else []
    return constraints, [f"{n}=={v}" for n, v in sorted(extra.items())]


def make_lock(run, uv, dest, key, requirement, python_version, architecture, glibc, no_deps,
              constraints=(), overrides=(), retries=3):
    """Lock `requirement` by hash for one host's CPython and platform: (path, text).

    `uv pip compile --generate-hashes --only-binary :all:` against the index (wheels only: hosts
    install offline). Kept under dest/locks and reused while its inputs are the same, so a host
    gets the same bytes on every run; delete the file to re-resolve. `run(argv)` -> (rc, out, err).
    """
    platform = uv_platform(architecture, glibc)
    inputs = "\n".join([requirement, str(no_deps), *constraints, "--", *overrides])
    header = (f"# sglang-fleet lock: {requirement}, CPython {python_version}, {platform}; inputs "
              f"{hashlib.sha256(inputs.encode()).hexdigest()[:16]}\n"
              "# made by uv pip compile --generate-hashes --only-binary :all:; delete to re-resolve\n")
    path = os.path.join(dest, "locks", f"{key}-cp{python_version.replace('.', '')}-{platform}.txt")
    if os.path.exists(path):
        with open(path) as fh:
            text = fh.read()
        if text.startswith(header):
            return path, text
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        files = {}
        for name, lines in (("in", [requirement]), ("constraints", constraints), ("overrides", overrides)):
            files[name] = os.path.join(tmp, f"{name}.txt")
            with open(files[name], "w") as fh:
                fh.write("".join(f"{line}\n" for line in lines))
        out = os.path.join(tmp, "lock.txt")
        argv = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header", "--no-annotate",
                "--only-binary", ":all:", "--python-version", python_version, "--python-platform", platform,
                "-c", files["constraints"], "--overrides", files["overrides"], files["in"], "-o", out]
        argv += ["--no-deps"] if no_deps else []
        for attempt in range(1, retries + 1):
            rc, _, stderr = run(argv)
            if rc == 0 or "No solution found" in stderr or attempt == retries:
                break
            time.sleep(min(2 ** attempt, 10))
        if rc != 0:
            raise WheelError(
                f"could not lock {requirement} for CPython {python_version} on {platform}: {stderr.strip()[-1500:]} "
                "-- hosts install offline from wheels only: when a package has no wheel for this host, pin one "
                "that has in ml_env_extra_pins, or pick another sglang_version or Python")
        with open(out) as fh:
            text = header + fh.read()
        write_atomic(path, text, mode=None, fsync=False)
    return path, text


def bundle(wheels, lock, name, dest):
    """One uncompressed tar of the chosen wheels (dest/bundles/<name>-<digest>.tar, the digest of the
    lock and the wheel names: one per lock and host platform), so the host gets them in one transfer
    rather than one SSH copy per wheel (a full SGLang profile has ~200: minutes of round trips).
    Made once, atomically; the host's installer checks every wheel against the lock again."""
    wheels = sorted(wheels)
    names = "\n".join(os.path.basename(w) for w in wheels)
    digest = hashlib.sha256(f"{lock}\n{names}".encode()).hexdigest()[:16]
    path = os.path.join(dest, "bundles", f"{name}-{digest}.tar")
    if not os.path.exists(path):
        with atomic_file(path, None, binary=True, fsync=False, makedirs=True) as fh, \
                tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for wheel in wheels:
                info = tar.gettarinfo(wheel, arcname=os.path.basename(wheel))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode, info.mtime = 0o644, 0
                with open(wheel, "rb") as f:
                    tar.addfile(info, f)
    return path
