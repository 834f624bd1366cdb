"""Will this SGLang release run on this host? One pure function per check, and the verdict.

Runs on the controller (plugins/modules/sglang_compat.py is delegated to localhost), so it may use
`packaging` like sglang_wheels. Inputs are plain data: the release's facts (its full-profile pins
and the PyPI files of its compiled packages, from plugins/module_utils/compat/release_facts.py), the
host's facts (Python, architecture, glibc, disk, RAM, model; plugins/module_utils/host/check.py),
the GPU facts (plugins/module_utils/host/gpu_facts.py) and the data tables of roles/sglang_compat/files/.

Each check returns {"check", "status", "detail", "fix"}: status "ok", "blocked" (deploy stops for
that host before anything changes; `fix` says how to get past it) or "unknown" (`detail` says what
is missing; never passed silently). On a CPU host (GPU facts with source "cpu": the host model's
`device: cpu`) the GPU checks (driver, gpu_arch) are "ok" with NOT_ON_CPU as their detail (nothing
there can stop the release), and memory_fit weighs the model against the host's RAM.
"""

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import NOT_ON_CPU, find_spec, is_cpu_host
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import ARCHITECTURES, host_tags

CHECKS = ("platform", "python", "driver", "gpu_arch", "memory_fit", "disk", "host_ram")
STATUSES = ("ok", "unknown", "blocked")  # worst last
# The compiled packages whose wheels decide where a release installs (pure-Python ones install anywhere).
KEY_PACKAGES = ("sglang", "sglang-kernel", "sgl-kernel", "torch", "flashinfer-python", "flashinfer-cubin",
                "flashinfer-jit-cache", "triton")
KERNEL_PACKAGES = ("sglang-kernel", "sgl-kernel", "flashinfer-cubin", "flashinfer-jit-cache")
# glibc of the distributions people run GPU servers on (for messages only).
GLIBC_OS = {"2.28": "RHEL 8", "2.31": "Debian 11 / Ubuntu 20.04", "2.34": "RHEL 9", "2.35": "Ubuntu 22.04",
            "2.36": "Debian 12", "2.39": "Ubuntu 24.04", "2.41": "Debian 13"}
# SGLang picks mem_fraction_static itself when it is not set; this is what the memory check assumes then.
DEFAULT_MEM_FRACTION = 0.85
GIB = 1024 ** 3
# Unpacked size of a wheel whose files were not read (CUDA libraries compress about 2:1).
UNPACK_FACTOR = 2.0
PER_RANK_RAM = 4 * GIB  # a rank's own process (Python, torch, CUDA context), without weights


def result(check, status, detail, fix=""):
    return {"check": check, "status": status, "detail": detail, "fix": fix}


def gib(n):
    return f"{n / GIB:.1f} GiB" if abs(n) >= GIB / 10 else f"{n / 2 ** 20:.0f} MiB"


def _glibc_name(glibc):
    name = GLIBC_OS.get(glibc)
    return f"glibc {glibc} ({name})" if name else f"glibc {glibc}"


def _version_key(text):
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


# --- wheels and tags ---------------------------------------------------------------------------

def wheel_tags(filename):
    """The tags of a wheel file name, or None for an sdist or a name that is not a wheel."""
    try:
        return parse_wheel_filename(filename)[3]
    except InvalidWheelFilename:
        return None


def manylinux_level(tag):
    """glibc a platform tag needs as (2, minor), (0, 0) for any platform, None for non-Linux."""
    if tag.platform == "any":
        return (0, 0)
    m = re.match(r"^manylinux_(\d+)_(\d+)_", tag.platform)
    if m:
        return int(m.group(1)), int(m.group(2))
    legacy = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
    for prefix, level in legacy.items():
        if tag.platform.startswith(prefix + "_"):
            return level
    return None


_LINUX = re.compile(r"^(?:manylinux_\d+_\d+|manylinux2014|manylinux2010|manylinux1)_(.+)$")


def _arch_of(tag):
    """The CPU architecture of a wheel tag ("any" for pure Python), None for non-manylinux platforms."""
    if tag.platform == "any":
        return "any"
    m = _LINUX.match(tag.platform)
    return m.group(1) if m else None


def glibc_need(files, architecture):
    """The lowest glibc (2, minor) any wheel of `files` for `architecture` needs, or None without one."""
    levels = [manylinux_level(t) for f in files for t in (wheel_tags(f["filename"]) or ())
              if _arch_of(t) in (architecture, "any")]
    levels = [lvl for lvl in levels if lvl]
    return min(levels) if levels else None


def _fits(files, tags):
    tags = set(tags)
    return [f for f in files if (wheel_tags(f["filename"]) or frozenset()) & tags]


def package_fit(name, version, files, python_version, architecture, glibc):
    """How name==version's wheels fit a host: {"fits", "reason": python|platform|arch|none|None, ...}.

    `files` are PyPI's files of that version (filename, size, requires_python).
    """
    wheels = [f for f in files if wheel_tags(f["filename"])]
    if not wheels:
        return {"fits": False, "reason": "none", "text": f"{name} {version} has no wheel on the index"}
    requires = next((f.get("requires_python") for f in wheels if f.get("requires_python")), None)
    if requires:
        try:
            if not SpecifierSet(requires).contains(f"{python_version}.0", prereleases=True):
                return {"fits": False, "reason": "python", "requires_python": requires,
                        "text": f"{name} {version} requires Python {requires}"}
        except InvalidSpecifier:
            pass
    if _fits(wheels, host_tags(python_version, architecture, glibc)):
        levels = [lvl for f in _fits(wheels, host_tags(python_version, architecture, glibc))
                  for lvl in map(manylinux_level, wheel_tags(f["filename"])) if lvl]
        return {"fits": True, "reason": None, "glibc_min": min(levels) if levels else None, "requires_python": requires,
                "text": ""}
    on_arch = [f for f in wheels if any(_arch_of(t) in (architecture, "any") for t in wheel_tags(f["filename"]))]
    if not on_arch:
        arches = sorted({a for f in wheels for a in map(_arch_of, wheel_tags(f["filename"])) if a})
        return {"fits": False, "reason": "arch", "text": f"{name} {version} has wheels for {', '.join(arches) or 'no Linux platform'} only"}
    fits_python = _fits(on_arch, host_tags(python_version, architecture, "2.40"))
    if fits_python:
        need = min(lvl for f in fits_python for lvl in map(manylinux_level, wheel_tags(f["filename"])) if lvl)
        return {"fits": False, "reason": "platform", "glibc_min": need,
                "text": f"{name} {version} has wheels for glibc >= {need[0]}.{need[1]} (manylinux_{need[0]}_{need[1]}) only"}
    interpreters = sorted({t.interpreter for f in on_arch for t in wheel_tags(f["filename"])},
                          key=lambda s: (len(s), s))
    return {"fits": False, "reason": "python",
            "text": f"{name} {version} has {architecture} wheels for {', '.join(interpreters)} only"}


def key_fits(release, python_version, architecture, glibc):
    """package_fit for every key package the release pins whose files are known: {name: fit}."""
    fits = {}
    for name in KEY_PACKAGES:
        version = release.get("pins", {}).get(name)
        files = release.get("files", {}).get(name)
        if version and files is not None:
            fits[name] = package_fit(name, version, files, python_version, architecture, glibc)
    return fits


def newest_release(index_files, python_version, architecture, glibc):
    """The newest sglang release with a wheel for this host (from the sglang index's files), or None."""
    versions = {}
    for f in index_files or ():
        try:
            _, version, _, tags = parse_wheel_filename(f["filename"])
        except InvalidWheelFilename:
            continue
        if version.is_prerelease or f.get("yanked"):
            continue
        versions.setdefault(str(version), []).append(f)
    for version in sorted(versions, key=Version, reverse=True):
        if package_fit("sglang", version, versions[version], python_version, architecture, glibc)["fits"]:
            return version
    return None


def _release_known(release):
    if release.get("error"):
        return release["error"]
    return None


def _partial(release):
    """Why the release's dependencies are not all known ('' when the full profile resolved)."""
    if release.get("resolve_error"):
        return (f"the full profile (sglang with its CUDA stack) of sglang {release['version']} does not resolve "
                f"for this host: {release['resolve_error']}")
    return ""


def check_platform(release, python_version, architecture, glibc, index_files=None):
    """glibc and CPU architecture against the wheels of sglang and its compiled dependencies."""
    name = "platform"
    why = _release_known(release)
    if why:
        return result(name, "unknown", why)
    if architecture not in ARCHITECTURES:
        return result(name, "blocked", f"the host's CPU is {architecture}: SGLang and torch ship Linux wheels for "
                      f"{' and '.join(ARCHITECTURES)} only", "run SGLang on an x86_64 or aarch64 host")
    if not glibc:
        return result(name, "blocked", "the host's C library is not glibc (musl?): SGLang ships manylinux wheels only",
                      "use a glibc distribution (Debian, Ubuntu, RHEL)")
    fits = key_fits(release, python_version, architecture, glibc)
    host = f"{architecture}, {_glibc_name(glibc)}"
    bad = {n: f for n, f in fits.items() if not f["fits"] and f["reason"] in ("platform", "arch", "none")}
    for n, f in fits.items():
        if not f["fits"] and f["reason"] == "python":  # the python check says why; glibc may be short too
            need = glibc_need(release["files"][n], architecture)
            f["glibc_min"] = need
            if need and need > tuple(int(x) for x in glibc.split(".")[:2]):
                bad[n] = {**f, "text": f"{n} {release['pins'][n]} has wheels for glibc >= {need[0]}.{need[1]} only"}
    if bad:
        need = max((f["glibc_min"] for f in bad.values() if f.get("glibc_min")), default=None)
        newest = newest_release(index_files, python_version, architecture, glibc)
        fix = []
        if need:
            dists = [d for g, d in GLIBC_OS.items() if _version_key(g) >= Version(f"{need[0]}.{need[1]}")]
            fix.append(f"move the host to glibc >= {need[0]}.{need[1]} ({', '.join(dists)} or newer)")
        if newest and newest != release["version"]:
            fix.append(f"or stay on a release with wheels for this host: sglang {newest} is the newest whose "
                       "sglang wheel installs here")
        return result(name, "blocked", f"{'; '.join(f['text'] for f in bad.values())}; the host is {host}",
                      " ".join(fix) or "pick another sglang_version")
    partial = _partial(release)
    if partial and not fits:
        return result(name, "unknown", partial)
    levels = [(n, f["glibc_min"]) for n, f in fits.items() if f.get("glibc_min")]
    need = max((lvl for _, lvl in levels), default=None)
    names = ", ".join(n for n, lvl in levels if lvl == need)
    detail = (f"needs glibc >= {need[0]}.{need[1]} ({names}), the host has {glibc} on {architecture}" if need
              else f"wheels for {architecture} with {_glibc_name(glibc)}")
    if partial:
        return result(name, "unknown", f"{detail} for {', '.join(fits)}; the rest is unknown: {partial}",
                      "pin a package that has a wheel in ml_env_extra_pins (the message says which)")
    return result(name, "ok", detail + " (every wheel of the full profile resolved for it)")


def check_python(release, python_version, architecture, glibc, index_files=None):
    """The host's Python against the release's Requires-Python and the cp tags of its compiled packages."""
    name = "python"
    why = _release_known(release)
    if why:
        return result(name, "unknown", why)
    if architecture not in ARCHITECTURES:
        return result(name, "unknown", f"no wheels for {architecture} to compare Python {python_version} with")
    fits = key_fits(release, python_version, architecture, glibc or "2.40")
    bad = {n: f for n, f in fits.items() if not f["fits"] and f["reason"] == "python"}
    if bad:
        newest = newest_release(index_files, python_version, architecture, glibc or "2.40")
        fix = "point ml_env_python at a Python the release supports (install it on the host)"
        if newest and newest != release["version"]:
            fix += f", or stay on sglang {newest}, the newest whose sglang wheel installs on Python {python_version}"
        return result(name, "blocked", f"{'; '.join(f['text'] for f in bad.values())}; the host's Python is "
                      f"{python_version}", fix)
    partial = _partial(release)
    requires = fits.get("sglang", {}).get("requires_python")
    detail = f"Python {python_version}" + (f" meets sglang's Requires-Python {requires}" if requires else "")
    if fits:
        detail += f"; {', '.join(fits)} have wheels for it"
    if partial:
        return result(name, "unknown", f"{detail}; the rest is unknown: {partial}",
                      "pin a package that has a wheel in ml_env_extra_pins (the message says which)")
    return result(name, "ok", detail)


# --- NVIDIA driver -------------------------------------------------------------------------------

def cuda_runtime(pins):
    """(major.minor, where it comes from) of the CUDA runtime the release installs, or (None, why)."""
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12",
                 "nvidia-cuda-runtime-cu11"):
        if name in pins:
            parts = pins[name].split(".")
            return f"{parts[0]}.{parts[1]}", f"{name} {pins[name]}"
    torch = pins.get("torch", "")
    m = re.search(r"\+cu(\d+)(\d)$", torch)
    if m:
        return f"{m.group(1)}.{m.group(2)}", f"torch {torch}"
    if not torch:
        return None, "the release pins no torch"
    return None, f"torch {torch} pins no nvidia-cuda-runtime (a CPU or ROCm build?)"


def _driver_key(text):
    return tuple(int(p) for p in re.findall(r"\d+", str(text)))


def check_driver(release, gpu, table):
    """The NVIDIA driver (nvidia-smi, else sglang_hardware.driver_version) against the release's CUDA runtime.

    `table`: {"toolkit": {"13.0": "580.65.06", ...}, "minor_version_compatibility": {"13": "580.65.06", ...}}.
    """
    name = "driver"
    if is_cpu_host(gpu):
        return result(name, "ok", f"{NOT_ON_CPU}: no NVIDIA driver is needed")
    why = _release_known(release)
    if why:
        return result(name, "unknown", why)
    cuda, source = cuda_runtime(release.get("pins", {}))
    if cuda is None:
        partial = _partial(release)
        return result(name, "unknown", f"the release's CUDA runtime is unknown: {partial or source}")
    driver = (gpu or {}).get("driver_version")
    if not driver:
        where = ("sglang_hardware declares none (add driver_version: the output of nvidia-smi "
                 "--query-gpu=driver_version --format=csv,noheader)" if (gpu or {}).get("source") == "declared"
                 else "nvidia-smi found no driver on the host")
        return result(name, "unknown", f"CUDA {cuda} ({source}) needs a driver the table knows, but the host's "
                      f"driver is unknown: {where}")
    if "," in str(driver):
        return result(name, "unknown", f"the host's GPUs run different drivers ({driver})",
                      "one driver per host: reinstall it")
    major = cuda.split(".", maxsplit=1)[0]
    full = (table.get("toolkit") or {}).get(cuda)
    floor = (table.get("minor_version_compatibility") or {}).get(major)
    smi_cuda = (gpu or {}).get("cuda_version")
    if floor is None and full is None:
        return result(name, "unknown", f"CUDA {cuda} ({source}) is not in the driver table "
                      "(roles/sglang_compat/files/cuda_min_driver.yml): add its minimum driver from NVIDIA's "
                      "release notes")
    if _driver_key(driver) < _driver_key(floor or full):
        return result(name, "blocked",
                      f"NVIDIA driver {driver} is older than CUDA {cuda} needs (>= {floor or full}; {source}, "
                      f"pinned by sglang {release['version']}'s torch)"
                      + (f"; the driver supports CUDA {smi_cuda} at most" if smi_cuda else ""),
                      f"upgrade the host's NVIDIA driver to {full or floor} or newer (the {str(full or floor).split('.', maxsplit=1)[0]} "
                      "branch or a later one), or pick a release whose torch is built for a CUDA this driver runs")
    if full and _driver_key(driver) < _driver_key(full):
        return result(name, "ok", f"driver {driver} runs CUDA {cuda} ({source}) through CUDA minor version "
                      f"compatibility (>= {floor}); NVIDIA lists {full} for CUDA {cuda} itself: code that needs a "
                      "newer driver (PTX JIT of newer PTX) may fail, so upgrade when convenient")
    return result(name, "ok", f"driver {driver} >= {full or floor}, the minimum for CUDA {cuda} ({source})")


# --- GPU architecture -------------------------------------------------------------------------------

def _cc(text):
    m = re.match(r"^(\d+)\.(\d+)$", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _target(text):
    m = re.match(r"^(?:sm_|compute_)?(\d+?)(\d)([af]?)$", str(text))
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def runs_on(entry, cc):
    """How an {"sm": [...], "ptx": [...]} entry runs on compute capability cc: "cubin", "ptx" or None.

    A plain sm_XY cubin runs on CC X.y with y >= Y, and so does a family-specific sm_XYf (the later
    members of its family: sm_100f on 10.0 and 10.3); an arch-specific sm_XYa only on X.Y itself; PTX
    compute_XY is JIT-compiled by the driver for any CC >= X.Y.
    """
    for t in map(_target, entry.get("sm") or ()):
        if t and ((t[2] in ("", "f") and t[0] == cc[0] and t[1] <= cc[1]) or (t[2] == "a" and (t[0], t[1]) == cc)):
            return "cubin"
    for t in map(_target, entry.get("ptx") or ()):
        if t and (t[0], t[1]) <= cc:
            return "ptx"
    return None


def newest_sglang_for(table, packages, architecture, cc):
    """(sglang version, "kernel==version") of the newest release in the table's sglang_pins whose
    kernel runs on compute capability `cc` on this architecture, or None."""
    fits = []
    for version, pin in (table.get("sglang_pins") or {}).items():
        dist, _, kernel = str(pin).partition("==")
        entry = ((packages.get(canonicalize_name(dist)) or {}).get(kernel) or {}).get(architecture)
        if entry and runs_on(entry, cc):
            fits.append((str(version), f"{canonicalize_name(dist)} {kernel}"))
    return max(fits, key=lambda fit: _version_key(fit[0])) if fits else None


def check_gpu_arch(release, gpu, architecture, table):
    """The GPUs' compute capability against the SM targets compiled into the release's kernels.

    `table`: kernel_sm_targets.yml ({"packages": {dist: {version: {arch: {"sm": [...], "ptx": [...]}}}}}),
    or None when the file does not exist yet.
    """
    name = "gpu_arch"
    if is_cpu_host(gpu):
        return result(name, "ok", f"{NOT_ON_CPU}: no GPU kernel runs there")
    why = _release_known(release)
    if why:
        return result(name, "unknown", why)
    gpu = gpu or {}
    cc = _cc(gpu.get("compute_capability"))
    if gpu.get("source") == "none" or not cc:
        return result(name, "unknown", "the GPUs' compute capability is unknown ("
                      + (gpu.get("error") or "sglang_hardware gives none and its gpu_model is not in GPU_SPECS") + ")")
    sm = f"sm_{cc[0]}{cc[1]}"
    if not table:
        return result(name, "unknown", f"no table of the kernels' SM targets yet "
                      "(roles/sglang_compat/files/kernel_sm_targets.yml): cannot tell whether the release's kernels "
                      f"include {sm}")
    packages = {canonicalize_name(k): v for k, v in (table.get("packages") or {}).items()}
    pins = release.get("pins", {})
    seen, bad, notes = [], [], []
    for dist in KERNEL_PACKAGES:
        version = pins.get(dist)
        if not version or dist not in packages:
            continue
        entry = (packages[dist].get(version) or packages[dist].get(str(version)) or {}).get(architecture)
        if entry is None:
            notes.append(f"{dist} {version} ({architecture}) is not in the table")
            continue
        how = runs_on(entry, cc)
        seen.append(f"{dist} {version}" + (" (PTX, JIT-compiled at first start)" if how == "ptx" else ""))
        if how is None:
            last = [v for v, arches in packages[dist].items()
                    if (arches or {}).get(architecture) and runs_on(arches[architecture], cc)]
            newest = max(last, key=_version_key) if last else None
            bad.append((dist, version, entry, newest))
    if bad:
        texts = [f"{d} {v} has no kernels for {sm} ({gpu.get('gpu_model', 'the GPU')}): cubins "
                 f"{', '.join(e.get('sm') or ['none'])}, PTX {', '.join(e.get('ptx') or ['none'])}"
                 for d, v, e, _ in bad]
        runs = newest_sglang_for(table, packages, architecture, cc)
        if runs:
            fix = (f"sglang {runs[0]} is the newest release known to run on {sm} (it pins {runs[1]}): set "
                   f"sglang_version to it, or run this release on GPUs it has kernels for")
        else:
            fix = "; ".join(f"{d} {n} is the newest in the table with {sm} kernels (pin it in ml_env_extra_pins)"
                            if n else f"no {d} in the table supports {sm}" for d, _, _, n in bad)
        return result(name, "blocked", "; ".join(texts), fix)
    if not seen and not notes and not any(d in pins for d in KERNEL_PACKAGES) and _partial(release):
        return result(name, "unknown", f"cannot tell whether the release's kernels include {sm}: {_partial(release)}")
    if not seen:
        missing = "; ".join(notes) or "none of its kernel packages (" + ", ".join(
            f"{d} {pins[d]}" for d in KERNEL_PACKAGES if d in pins) + ") is in the table"
        return result(name, "unknown", f"cannot tell whether the release's kernels include {sm}: {missing}")
    detail = f"{sm} kernels in {', '.join(seen)}"
    if notes:
        return result(name, "unknown", f"{detail}; {'; '.join(notes)}")
    return result(name, "ok", detail)


# --- memory ---------------------------------------------------------------------------------------

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "bf16": 2, "fp16": 2, "float32": 4, "float": 4,
               "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1}


def text_config(config):
    """The language model's part of a config.json (text_config / llm_config of multimodal models)."""
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict) and config[key].get("num_hidden_layers"):
            merged = dict(config)
            merged.update(config[key])
            return merged
    return config


def kv_bytes_per_token(config, tp, kv_dtype="auto", unit="GPU"):
    """KV-cache bytes per token on one GPU (`unit`: one rank on a CPU host; TP splits the KV heads;
    MLA stores one latent per layer)."""
    cfg = text_config(config)
    layers = cfg.get("num_hidden_layers")
    if not layers:
        return None, "config.json has no num_hidden_layers"
    types = cfg.get("layer_types")
    note = ""
    if isinstance(types, list) and types:
        full = sum(1 for t in types if "full" in str(t) or t == "attention")
        if full and full < len(types):
            layers, note = full, f" ({full} of {len(types)} layers hold a KV cache)"
    elif cfg.get("full_attention_interval"):
        layers = max(1, layers // int(cfg["full_attention_interval"]))
        note = f" ({layers} full-attention layers hold a KV cache)"
    dtype = cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    size = DTYPE_BYTES.get(str(kv_dtype)) if kv_dtype not in (None, "", "auto") else DTYPE_BYTES.get(str(dtype))
    if size is None:
        return None, f"unknown dtype {kv_dtype if kv_dtype not in (None, '', 'auto') else dtype}"
    if cfg.get("kv_lora_rank"):
        per_layer = int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)
        return layers * per_layer * size, f"MLA, {layers} layers{note}"
    heads = cfg.get("num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or (cfg.get("hidden_size") // heads if heads and cfg.get("hidden_size") else None)
    if not kv_heads or not head_dim:
        return None, "config.json has no num_key_value_heads/head_dim (or hidden_size and num_attention_heads)"
    per_gpu_heads = max(1, -(-int(kv_heads) // int(tp)))
    return 2 * layers * per_gpu_heads * int(head_dim) * size, f"{layers} layers{note}, {per_gpu_heads} KV heads x {head_dim} per {unit}, {size}-byte"


def gpu_memory(gpu):
    """(bytes per GPU, where it comes from), or (None, why)."""
    gpu = gpu or {}
    if gpu.get("memory_mib"):
        return gpu["memory_mib"] * 1024 * 1024, ("nvidia-smi" if gpu.get("source") == "detected" else "sglang_hardware.memory_mib")
    spec = find_spec(gpu.get("gpu_model") or "")
    if spec and spec[4]:
        return spec[4] * GIB, f"{spec[0]} datasheet, {spec[4]} GB"
    if gpu.get("source") == "none":
        return None, f"no GPU found ({gpu.get('error', 'nvidia-smi')})"
    return None, f"the memory of {gpu.get('gpu_model')!r} is unknown: set sglang_hardware.memory_mib"


def cpu_rank_memory(host, ranks):
    """(bytes per rank, where it comes from) of a CPU host's RAM shared by `ranks` ranks, or (None, why).

    SGLang 0.5.23 gives each CPU rank the RAM of one NUMA node (srt/utils/common.py:917-927, total
    RAM or the cgroup's limit / NUMA nodes) and checks at start that the ranks fit the nodes
    (srt/utils/numa_utils.py:459-472): RAM / ranks is the most a rank can have, so what does not
    fit it does not fit SGLang either; with fewer ranks than NUMA nodes each rank has less."""
    total = (host or {}).get("mem_total_bytes")
    if not total:
        return None, "the host's RAM is unknown (no /proc/meminfo)"
    return total / ranks, (f"the host's RAM {gib(total)} / {ranks} rank{'s' if ranks != 1 else ''} "
                           "(at most: SGLang gives each rank one NUMA node's share)")


def check_memory_fit(args, gpu, model, host=None):
    """Model weights / (TP x PP) against each GPU's memory x mem_fraction_static, with KV-cache room;
    on a CPU host (`device: cpu`) against the host's RAM (`host`: its facts) per rank."""
    name = "memory_fit"
    model = model or {}
    path = args.get("model_path", "")
    if not str(path).startswith("/"):
        return result(name, "unknown", f"model {path or '(none)'} is a Hugging Face repo id, downloaded by SGLang at "
                      "start: its size is unknown before")
    weights = model.get("weight_bytes")
    if not weights:
        return result(name, "unknown", f"no weights found in {path} ({model.get('error') or 'no *.safetensors'})")
    tp = int(args.get("tp_size") or 1)
    pp = int(args.get("pp_size") or 1)
    if is_cpu_host(gpu):
        total, source = cpu_rank_memory(host, tp * pp)
        if not total:
            return result(name, "unknown", f"RAM unknown: {source}")
        unit, ways = "rank", "add RAM"
    else:
        total, source = gpu_memory(gpu)
        if not total:
            return result(name, "unknown", f"GPU memory unknown: {source}")
        unit, ways = "GPU", f"raise tp_size (the host has {gpu.get('gpu_count', '?')} GPUs)"
    per_gpu = weights / (tp * pp)
    frac = args.get("mem_fraction_static")
    assumed = frac is None
    frac = float(DEFAULT_MEM_FRACTION if assumed else frac)
    budget = total * frac
    frac_text = (f"mem_fraction_static not set, {frac} assumed (SGLang picks it at start)" if assumed
                 else f"mem_fraction_static {frac}")
    room = budget - per_gpu
    head = (f"weights {gib(weights)} / TP {tp}" + (f" x PP {pp}" if pp > 1 else "") + f" = {gib(per_gpu)} per {unit}; "
            f"{gib(total)} per {unit} ({source}) x {frac_text} = {gib(budget)}")
    if room <= 0:
        return result(name, "blocked", f"{head}: the weights do not fit ({gib(-room)} short)",
                      f"{ways}, raise sglang_args.mem_fraction_static, or use a smaller or quantized model")
    config = model.get("config") or {}
    per_token, how = kv_bytes_per_token(config, tp, args.get("kv_cache_dtype", "auto"), unit)
    if per_token is None:
        return result(name, "unknown", f"{head}, {gib(room)} left for the KV cache; its size per token is unknown: {how}")
    tokens = int(room // per_token)
    ctx = args.get("context_length")
    model_max = text_config(config).get("max_position_embeddings")
    detail = (f"{head}, {gib(room)} left for the KV cache = {tokens} tokens at {per_token // 1024} KiB/token "
              f"({how})")
    if ctx and tokens < int(ctx):
        return result(name, "blocked", f"{detail}: less than one request of context_length {ctx} "
                      f"({gib(int(ctx) * per_token)} of KV cache)",
                      f"lower sglang_args.context_length to {tokens} or less, {ways}, raise mem_fraction_static, "
                      "or use kv_cache_dtype fp8_e4m3")
    if ctx:
        return result(name, "ok", f"{detail}: {tokens / int(ctx):.1f} requests of context_length {ctx}")
    if model_max and tokens < int(model_max):
        return result(name, "ok", f"{detail}; context_length not set: the model's {model_max} tokens do not fit one "
                      "request, SGLang caps it (set context_length to be sure)")
    return result(name, "ok", detail)


# --- disk and RAM ----------------------------------------------------------------------------------

def check_disk(release, host, profile):
    """Free space on the venv's filesystem against the release's installed size; the model's filesystem too."""
    name = "disk"
    host = host or {}
    free = host.get("env_free_bytes")
    model_free = host.get("model_free_bytes")
    model_note = ""
    if model_free is not None:
        model_note = f"; model filesystem {host.get('model_mount', '')}: {gib(model_free)} free"
    if host.get("venv_ready"):
        return result(name, "ok", f"sglang {release.get('version')} is already installed in {host.get('venv')}"
                      + model_note)
    if free is None:
        return result(name, "unknown", f"free space of {host.get('env_root') or 'the venv folder'} unknown"
                      + (f" ({host['env_error']})" if host.get("env_error") else ""))
    size = (release.get("size") or {}).get(profile)
    if model_free == 0:
        return result(name, "blocked", f"the model's filesystem ({host.get('model_mount')}) has no space left",
                      "free space there (SGLang and Triton write caches next to it)")
    if not size or size.get("error"):
        return result(name, "unknown", f"{gib(free)} free on {host.get('env_mount')}; the {profile} profile's size "
                      f"is unknown ({(size or {}).get('error') or release.get('error') or 'not resolved'})"
                      + model_note)
    need = size["wheel_bytes"] + size["installed_bytes"]
    how = (f"{profile} profile: {size['wheels']} wheel{'s' if size['wheels'] != 1 else ''}, {gib(size['wheel_bytes'])} pushed to the host + "
           f"~{gib(size['installed_bytes'])} unpacked ({size['method']}"
           + ("; an estimate)" if "PyPI" in size["method"] else ")"))
    if free < need:
        return result(name, "blocked", f"{gib(free)} free on {host.get('env_mount')} (holds {host.get('env_root')}), "
                      f"about {gib(need)} needed: {how}",
                      f"free {gib(need - free)} or more there (older venvs: sglang_release_keep), or set "
                      "sglang_env_root to a larger filesystem")
    return result(name, "ok", f"{gib(free)} free on {host.get('env_mount')}, about {gib(need)} needed: {how}"
                  + model_note)


def check_host_ram(args, host, model):
    """Host RAM, where a need is knowable: CPU offload (cpu_offload_gb per rank) must fit; weights load by mmap."""
    name = "host_ram"
    host, model = host or {}, model or {}
    total, available = host.get("mem_total_bytes"), host.get("mem_available_bytes")
    if not total:
        return result(name, "unknown", "the host's memory is unknown (no /proc/meminfo)")
    tp = int(args.get("tp_size") or 1) * int(args.get("pp_size") or 1)
    offload = float(args.get("cpu_offload_gb") or 0) * 1e9 * tp
    need = tp * PER_RANK_RAM + offload
    detail = f"{gib(total)} RAM, {gib(available or 0)} available; {tp} rank(s) x ~{gib(PER_RANK_RAM)} (an estimate)"
    if offload:
        detail += f" + cpu_offload_gb {args.get('cpu_offload_gb')} x {tp} = {gib(offload)}"
    if need > total:
        return result(name, "blocked", f"{detail}: about {gib(need)} needed, more than the host has",
                      "lower cpu_offload_gb or tp_size, or add memory")
    weights = model.get("weight_bytes")
    if weights and available and weights / tp > available:
        detail += (f"; the weights ({gib(weights / tp)} per rank) exceed the available RAM: they load through the page "
                   "cache (mmap), which works but loads slower")
    return result(name, "ok", detail)


# --- the verdict -----------------------------------------------------------------------------------

def verdict(checks, ignore=()):
    """{"status", "summary", "checks", "blocked", "lines"}: the worst status not ignored, one line per check."""
    ignore = set(ignore or ())
    lines, blocked = [], []
    for c in checks:
        c["ignored"] = c["status"] == "blocked" and c["check"] in ignore
        tail = ""
        if c["status"] == "blocked":
            tail = (" [ignored: sglang_compat_ignore]" if c["ignored"] else "") + (f" -> fix: {c['fix']}" if c["fix"] else "")
            if not c["ignored"]:
                blocked.append(c)
        lines.append(f"{c['check']}: {c['status']}: {c['detail']}{tail}")
    counted = [c["status"] for c in checks if not c["ignored"]]
    worst = max(counted, key=STATUSES.index) if counted else "ok"
    summary = ", ".join(f"{counted.count(s)} {s}" for s in STATUSES if counted.count(s))
    ignored = len(checks) - len(counted)
    if ignored:
        summary += f", {ignored} blocked but ignored"
    return {"status": worst, "summary": summary, "checks": checks, "blocked": blocked, "lines": lines}


def bad_ignores(ignore):
    """Names in sglang_compat_ignore that are not checks (a misspelling ignores nothing)."""
    return sorted(set(ignore or ()) - set(CHECKS))
