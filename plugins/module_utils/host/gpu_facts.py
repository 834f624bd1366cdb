"""GPU facts from `nvidia-smi` output, or from an inventory declaration (stdlib only).

`build_facts()` turns the text of `nvidia-smi --query-gpu=... --format=csv` (with or without
header, with or without units), `nvidia-smi topo -m` and the plain `nvidia-smi` banner into a
facts dict; `collect_facts()` runs those commands through a caller's runner (Ansible's
`module.run_command`) and never raises for a host without a GPU; `declared_facts()` fills the
same dict from a declaration such as {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2}.

Facts keys: source ("detected" | "declared" | "none" | "cpu"), gpu_count, gpu_model, gpus (list of
{index, name, compute_capability, memory_mib, bus_id}), compute_capability (lowest, "8.6"),
sm (86), memory_mib (smallest per-GPU memory), interconnect ("nvlink" | "pcie" | "none"),
link_matrix ({"devices": [...], "links": [[...]]} from `topo -m`, or None), nvlink_links
("NV18", the weakest NVLink bond between any two GPUs, or None), driver_version, cuda_version,
hbm_bandwidth_gbs (per GPU, from GPU_SPECS), gpu_spec (the GPU_SPECS key matched, or None).
`cpu_facts()` are a `device: cpu` host's: source "cpu", gpu_count 0, gpu_model None, gpus [] and
reason (NOT_ON_CPU); nvidia-smi is not run there.
"""
import re

QUERY_FIELDS = ("index", "name", "uuid", "pci.bus_id", "compute_cap", "memory.total", "driver_version")
QUERY_ARGV = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv")
TOPO_ARGV = ("topo", "-m")
INTERCONNECTS = ("nvlink", "pcie", "none")


class GpuFactsError(ValueError):
    """Output or declaration that cannot be turned into GPU facts."""


# (key, name regex, memory bandwidth GB/s per GPU, SM version, memory GB, default interconnect
# for several GPUs). First match wins: specific names before general ones. Bandwidth and memory
# are the vendor datasheet figures (decimal GB/s, GB), cited per row. SM None: not an NVIDIA GPU.
GPU_SPECS = (
    # NVIDIA H200 datasheet (SXM and NVL): 141 GB HBM3e, 4.8 TB/s.
    ("H200", r"\bH200\b", 4800, 90, 141, "nvlink"),
    # NVIDIA H100 datasheet, H100 NVL column: 94 GB HBM3, 3.9 TB/s.
    ("H100 NVL", r"\bH100 NVL\b", 3900, 90, 94, "nvlink"),
    # NVIDIA H100 datasheet, H100 PCIe column: 80 GB HBM2e, 2 TB/s.
    ("H100 PCIe", r"\bH100 PCIe\b", 2000, 90, 80, "pcie"),
    # NVIDIA H100 datasheet, H100 SXM column: 80 GB HBM3, 3.35 TB/s (nvidia-smi: "H100 80GB HBM3").
    ("H100 SXM", r"\bH100\b", 3350, 90, 80, "nvlink"),
    # NVIDIA H800 SXM product brief: 80 GB HBM3, 3.35 TB/s.
    ("H800", r"\bH800\b", 3350, 90, 80, "nvlink"),
    # NVIDIA H20 product brief: 96 GB HBM3, 4.0 TB/s.
    ("H20", r"\bH20\b", 4000, 90, 96, "nvlink"),
    # NVIDIA HGX B200 datasheet: 8 TB/s and 180 GB HBM3e per GPU (1,440 GB per 8 GPUs).
    ("B200", r"\bB200\b", 8000, 100, 180, "nvlink"),
    # NVIDIA A100 datasheet, 80GB PCIe column: 1,935 GB/s (nvidia-smi: "A100 80GB PCIe").
    ("A100 80GB PCIe", r"\bA100 80GB PCIe\b", 1935, 80, 80, "pcie"),
    # NVIDIA A100 datasheet, 80GB SXM column: 2,039 GB/s (nvidia-smi: "A100-SXM4-80GB").
    ("A100 80GB SXM", r"\bA100-SXM4?-80GB\b", 2039, 80, 80, "nvlink"),
    # NVIDIA A100 datasheet, 40GB columns (PCIe and SXM): 1,555 GB/s.
    ("A100 40GB", r"\bA100\b", 1555, 80, 40, "pcie"),
    # NVIDIA A30 datasheet: 24 GB HBM2, 933 GB/s.
    ("A30", r"\bA30\b", 933, 80, 24, "pcie"),
    # NVIDIA RTX 6000 Ada Generation datasheet: 48 GB GDDR6, 960 GB/s.
    ("RTX 6000 Ada", r"\bRTX 6000 Ada\b", 960, 89, 48, "pcie"),
    # NVIDIA RTX PRO 6000 Blackwell datasheet: 96 GB GDDR7, 1,792 GB/s.
    ("RTX PRO 6000 Blackwell", r"\bRTX PRO 6000\b", 1792, 120, 96, "pcie"),
    # NVIDIA RTX A6000 datasheet: 48 GB GDDR6, 768 GB/s (NVLink bridge optional: NV4).
    ("RTX A6000", r"\bRTX A6000\b", 768, 86, 48, "pcie"),
    # NVIDIA RTX A5000 datasheet: 24 GB GDDR6, 768 GB/s.
    ("RTX A5000", r"\bRTX A5000\b", 768, 86, 24, "pcie"),
    # NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s.
    ("L40S", r"\bL40S\b", 864, 89, 48, "pcie"),
    # NVIDIA L40 datasheet: 48 GB GDDR6, 864 GB/s.
    ("L40", r"\bL40\b", 864, 89, 48, "pcie"),
    # NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s.
    ("L4", r"\bL4\b", 300, 89, 24, "pcie"),
    # NVIDIA A40 datasheet: 48 GB GDDR6, 696 GB/s.
    ("A40", r"\bA40\b", 696, 86, 48, "pcie"),
    # NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s (AWS's A10G variant reports the same memory).
    ("A10", r"\bA10G?\b", 600, 86, 24, "pcie"),
    # NVIDIA GeForce RTX 5090 specifications: 32 GB GDDR7, 1,792 GB/s.
    ("RTX 5090", r"\bRTX 5090\b", 1792, 120, 32, "pcie"),
    # NVIDIA GeForce RTX 4090 specifications: 24 GB GDDR6X, 1,008 GB/s.
    ("RTX 4090", r"\bRTX 4090\b", 1008, 89, 24, "pcie"),
    # NVIDIA GeForce RTX 3090 specifications: 24 GB GDDR6X, 936 GB/s.
    ("RTX 3090", r"\bRTX 3090\b", 936, 86, 24, "pcie"),
    # NVIDIA V100 datasheet, SXM2 column: 900 GB/s, 16/32 GB HBM2.
    ("V100", r"\bV100\b", 900, 70, 32, "nvlink"),
    # NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s.
    ("T4", r"\bT4\b", 320, 75, 16, "pcie"),
    # AMD Instinct MI325X datasheet: 256 GB HBM3E, 6 TB/s.
    ("MI325X", r"\bMI325X\b", 6000, None, 256, "nvlink"),
    # AMD Instinct MI300X datasheet: 192 GB HBM3, 5.3 TB/s (Infinity Fabric, reported as "nvlink").
    ("MI300X", r"\bMI300X\b", 5300, None, 192, "nvlink"),
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CC = re.compile(r"^(\d+)\.(\d+)$")
_NV = re.compile(r"^NV(\d+)$")
_GPU_COL = re.compile(r"^GPU(\d+)$")
_HEADER_CELL = re.compile(r"^[a-z][a-z0-9_.]*(\s*\[[^\]]*\])?$")
_CUDA = re.compile(r"CUDA Version\s*:?\s*([0-9][0-9.]*)|<cuda_version>([0-9.]+)</cuda_version>")


def find_spec(name):
    """Return the GPU_SPECS row whose pattern matches a GPU name (case-insensitive), or None."""
    for row in GPU_SPECS:
        if re.search(row[1], name, re.IGNORECASE):
            return row
    return None


def _value(cell):
    cell = cell.strip()
    return None if cell in ("", "N/A", "[N/A]", "[Not Supported]") else cell


def _int(cell, what, line_no):
    text = _value(cell)
    if text is None:
        return None
    m = re.match(r"^(\d+)(?:\s*MiB)?$", text)
    if not m:
        raise GpuFactsError(f"nvidia-smi query line {line_no}: {what} {text!r} is not a number")
    return int(m.group(1))


def parse_query_csv(text, fields=QUERY_FIELDS):
    """Parse `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` output.

    A header line names the columns; without one, `fields` must list them in query order.
    Returns one dict per GPU: index, name, compute_capability, memory_mib, bus_id, driver_version.
    """
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    if not lines:
        raise GpuFactsError("nvidia-smi query returned no GPU lines")
    first = [c.strip() for c in lines[0].split(",")]
    if all(_HEADER_CELL.match(c) for c in first):
        fields = [re.sub(r"\s*\[.*\]$", "", c) for c in first]
        lines = lines[1:]
        start = 2
    else:
        fields = list(fields)
        start = 1
    for need in ("index", "name"):
        if need not in fields:
            raise GpuFactsError(f"nvidia-smi query has no {need!r} column (columns: {', '.join(fields)})")
    gpus = []
    for line_no, line in enumerate(lines, start):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            raise GpuFactsError(
                f"nvidia-smi query line {line_no}: {len(cells)} values for {len(fields)} columns "
                f"({', '.join(fields)}): {line.strip()!r}"
            )
        row = dict(zip(fields, cells))
        cc = _value(row.get("compute_cap", ""))
        if cc is not None and not _CC.match(cc):
            raise GpuFactsError(f"nvidia-smi query line {line_no}: compute_cap {cc!r} is not like '8.6'")
        gpus.append({
            "index": _int(row["index"], "index", line_no),
            "name": row["name"],
            "compute_capability": cc,
            "memory_mib": _int(row.get("memory.total", ""), "memory.total", line_no),
            "bus_id": _value(row.get("pci.bus_id", "")),
            "driver_version": _value(row.get("driver_version", "")),
        })
    if not gpus:
        raise GpuFactsError("nvidia-smi query returned no GPU lines")
    return gpus


def parse_topo(text):
    """Parse `nvidia-smi topo -m` into {"devices": ["GPU0", ...], "links": [[cell, ...], ...]}.

    Only GPU-to-GPU cells are kept ("X", "NV18", "PHB", "SYS", ...); NIC rows and the
    affinity columns are dropped.
    """
    lines = _ANSI.sub("", text).splitlines()
    # The header is the indented line (or the one naming "CPU Affinity") that starts with GPU0.
    header = next((ln.split() for ln in lines if ln.split() and _GPU_COL.match(ln.split()[0])
                   and (ln[0].isspace() or "CPU Affinity" in ln)), None)
    if header is None:
        raise GpuFactsError("nvidia-smi topo -m: no header line with GPU columns")
    devices = []
    for tok in header:
        if not _GPU_COL.match(tok):
            break
        devices.append(tok)
    rows = {}
    for ln in lines:
        toks = ln.split()
        if toks and toks[0] in devices:
            if len(toks) < 1 + len(devices):
                raise GpuFactsError(f"nvidia-smi topo -m: row {toks[0]} has fewer cells than GPU columns")
            rows[toks[0]] = toks[1:1 + len(devices)]
    missing = [d for d in devices if d not in rows]
    if missing:
        raise GpuFactsError(f"nvidia-smi topo -m: no row for {', '.join(missing)}")
    return {"devices": devices, "links": [rows[d] for d in devices]}


def summarize_links(matrix):
    """Return (interconnect, nvlink_links) for a parsed topology.

    "nvlink" only when every pair of GPUs is joined by NVLink (nvlink_links is then the weakest
    bond, e.g. "NV4"); "pcie" when two or more GPUs have any pair without NVLink; "none" for one.
    """
    links = matrix["links"]
    pairs = [links[i][j] for i in range(len(links)) for j in range(i + 1, len(links))]
    if not pairs:
        return "none", None
    bonds = [int(m.group(1)) for m in (_NV.match(p) for p in pairs) if m]
    if len(bonds) == len(pairs):
        return "nvlink", f"NV{min(bonds)}"
    return "pcie", None


def parse_cuda_version(text):
    """CUDA version from the `nvidia-smi` banner, `nvidia-smi -q` or `-q -x` output, or None."""
    m = _CUDA.search(text or "")
    return (m.group(1) or m.group(2)) if m else None


def _cc_key(cc):
    major, minor = _CC.match(cc).groups()
    return int(major), int(minor)


def build_facts(query_text, topo_text=None, banner_text=None, fields=QUERY_FIELDS):
    """Facts ("source": "detected") from nvidia-smi query CSV, `topo -m` and banner texts."""
    gpus = parse_query_csv(query_text, fields)
    names = sorted({g["name"] for g in gpus})
    specs = [find_spec(g["name"]) for g in gpus]
    ccs = [g["compute_capability"] for g in gpus if g["compute_capability"]]
    cc = min(ccs, key=_cc_key) if ccs else None
    mems = [g["memory_mib"] for g in gpus if g["memory_mib"] is not None]
    drivers = sorted({g["driver_version"] for g in gpus if g["driver_version"]})
    if len(gpus) == 1:
        matrix = parse_topo(topo_text) if topo_text else None
        interconnect, nvlink = "none", None
    elif topo_text:
        matrix = parse_topo(topo_text)
        if len(matrix["devices"]) != len(gpus):
            raise GpuFactsError(
                f"nvidia-smi topo -m lists {len(matrix['devices'])} GPUs, the query {len(gpus)}"
            )
        interconnect, nvlink = summarize_links(matrix)
    else:
        matrix, interconnect, nvlink = None, None, None
    known = [s for s in specs if s]
    return {
        "source": "detected",
        "gpu_count": len(gpus),
        "gpu_model": " + ".join(names),
        "gpus": [{k: g[k] for k in ("index", "name", "compute_capability", "memory_mib", "bus_id")}
                 for g in gpus],
        "compute_capability": cc,
        "sm": int("".join(map(str, _cc_key(cc)))) if cc else None,
        "memory_mib": min(mems) if mems else None,
        "interconnect": interconnect,
        "link_matrix": matrix,
        "nvlink_links": nvlink,
        "driver_version": drivers[0] if len(drivers) == 1 else (", ".join(drivers) or None),
        "cuda_version": parse_cuda_version(banner_text),
        # Unknown models: None (the roofline then needs a declared bandwidth).
        "hbm_bandwidth_gbs": min(s[2] for s in known) if len(known) == len(specs) else None,
        "gpu_spec": " + ".join(sorted({s[0] for s in known})) if len(known) == len(specs) else None,
    }


def none_facts(error):
    """Facts for a host without a usable GPU: source "none", gpu_count 0 and the reason."""
    return {"source": "none", "gpu_count": 0, "error": error}


# A host whose server runs with `device: cpu` (the host model's sglang_host.device): it has no GPU
# facts to read, and every GPU check or figure (compute capability, driver, GPU memory, roofline)
# says this, in these words, instead of "unknown".
CPU_SOURCE = "cpu"
NOT_ON_CPU = "not applicable on a CPU host (sglang_args.device: cpu)"


def is_cpu_host(facts):
    """True for the facts of a CPU host (cpu_facts)."""
    return (facts or {}).get("source") == CPU_SOURCE


def cpu_facts(decl=None):
    """Facts ("source": "cpu", gpu_count 0) of a host whose server runs with `device: cpu`; nvidia-smi
    is not run. A declaration of GPUs there (sglang_hardware with a gpu_count other than 0, or a
    gpu_model without one) contradicts the device: GpuFactsError says what to remove."""
    decl = decl or {}
    if not isinstance(decl, dict):
        raise GpuFactsError(f"GPU declaration must be a mapping, got {type(decl).__name__}")
    count = decl.get("gpu_count")
    if decl and count != 0:
        what = ", ".join(f"{key}: {decl[key]}" for key in ("gpu_count", "gpu_model") if key in decl) or \
            ", ".join(sorted(map(str, decl)))
        raise GpuFactsError(
            f"the host's server runs with device: cpu (sglang_args or sglang_args_common), so it uses no GPU, "
            f"but sglang_hardware declares GPUs ({what}): remove sglang_hardware from the host (or set "
            "gpu_count: 0), or drop device: cpu from its sglang_args to run it on the GPUs")
    return {"source": CPU_SOURCE, "gpu_count": 0, "gpu_model": None, "gpus": [], "reason": NOT_ON_CPU}


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()
    return "no output"


def collect_facts(run, nvidia_smi):
    """Run nvidia-smi through `run(argv) -> (rc, stdout, stderr)` and return facts.

    `nvidia_smi` is the binary's path, or None when it is not installed. Never raises for a
    host without a GPU or driver: that yields `none_facts(...)` with the reason.
    """
    if not nvidia_smi:
        return none_facts("nvidia-smi not found (no NVIDIA driver installed)")
    rc, out, err = run([nvidia_smi, *QUERY_ARGV])
    if rc != 0:
        return none_facts(f"nvidia-smi --query-gpu failed (rc={rc}): {_first_line(out, err)}")
    try:
        gpus = parse_query_csv(out)
    except GpuFactsError as exc:
        return none_facts(str(exc))
    topo = None
    if len(gpus) > 1:
        rc, topo, err = run([nvidia_smi, *TOPO_ARGV])
        if rc != 0:
            topo = None
    rc, banner, _err = run([nvidia_smi])
    try:
        return build_facts(out, topo, banner if rc == 0 else None)
    except GpuFactsError as exc:
        return none_facts(str(exc))


_DECL_KEYS = ("gpu_model", "gpu_count", "hbm_bandwidth_gbs", "compute_capability", "interconnect",
              "memory_mib", "nvlink_links", "driver_version")
_DRIVER = re.compile(r"^\d+(\.\d+){1,2}$")


def declared_facts(decl):
    """Facts ("source": "declared") from an inventory declaration.

    Needs gpu_model and gpu_count; compute capability, bandwidth and the interconnect default
    come from GPU_SPECS. A model not in GPU_SPECS needs hbm_bandwidth_gbs and compute_capability.
    driver_version ("580.95.05", what nvidia-smi reports) is for hosts whose nvidia-smi is not reachable:
    the compatibility check compares it with the release's CUDA runtime.
    """
    if not isinstance(decl, dict):
        raise GpuFactsError(f"GPU declaration must be a mapping, got {type(decl).__name__}")
    unknown = sorted(set(decl) - set(_DECL_KEYS))
    if unknown:
        raise GpuFactsError(f"GPU declaration: unknown keys {', '.join(unknown)} (allowed: {', '.join(_DECL_KEYS)})")
    model = decl.get("gpu_model")
    if not isinstance(model, str) or not model.strip():
        raise GpuFactsError("GPU declaration needs gpu_model, e.g. 'NVIDIA RTX A6000'")
    count = decl.get("gpu_count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise GpuFactsError(f"GPU declaration: gpu_count must be a positive integer, got {count!r}")
    spec = find_spec(model)
    bw = decl.get("hbm_bandwidth_gbs")
    cc = decl.get("compute_capability")
    if spec is None and (bw is None or cc is None):
        raise GpuFactsError(
            f"GPU declaration: unknown gpu_model {model!r}; known models: "
            f"{', '.join(row[0] for row in GPU_SPECS)}; or give hbm_bandwidth_gbs and compute_capability"
        )
    if bw is not None and (isinstance(bw, bool) or not isinstance(bw, (int, float)) or bw <= 0):
        raise GpuFactsError(f"GPU declaration: hbm_bandwidth_gbs must be a positive number, got {bw!r}")
    if cc is not None:
        cc = str(cc)
        if not _CC.match(cc):
            raise GpuFactsError(f"GPU declaration: compute_capability {cc!r} is not like '8.6'")
    elif spec and spec[3]:
        cc = f"{spec[3] // 10}.{spec[3] % 10}"
    default_ic = "none" if count == 1 else (spec[5] if spec else "pcie")
    interconnect = decl.get("interconnect", default_ic)
    if interconnect not in INTERCONNECTS:
        raise GpuFactsError(
            f"GPU declaration: interconnect {interconnect!r} is not one of {', '.join(INTERCONNECTS)}"
        )
    mem = decl.get("memory_mib")
    driver = decl.get("driver_version")
    if driver is not None and (isinstance(driver, bool) or not _DRIVER.match(str(driver))):
        raise GpuFactsError(f"GPU declaration: driver_version {driver!r} is not like '580.95.05'")
    return {
        "source": "declared",
        "gpu_count": count,
        "gpu_model": model,
        "gpus": [{"index": i, "name": model, "compute_capability": cc, "memory_mib": mem, "bus_id": None}
                 for i in range(count)],
        "compute_capability": cc,
        "sm": int("".join(map(str, _cc_key(cc)))) if cc else None,
        "memory_mib": mem,
        "interconnect": interconnect,
        "link_matrix": None,
        "nvlink_links": decl.get("nvlink_links") if interconnect == "nvlink" else None,
        "driver_version": str(driver) if driver is not None else None,
        "cuda_version": None,
        "hbm_bandwidth_gbs": bw if bw is not None else spec[2],
        "gpu_spec": spec[0] if spec else None,
    }


def declared_mismatch(declared, detected):
    """Why a declaration contradicts what nvidia-smi detected (count or model), or None.

    Models are the same when both names match the same GPU_SPECS row, or are equal ignoring case.
    """
    if detected.get("source") != "detected":
        return None
    spec_d, spec_n = find_spec(declared["gpu_model"]), find_spec(detected["gpu_model"])
    same_model = (spec_d is spec_n) if (spec_d or spec_n) else (
        declared["gpu_model"].strip().lower() == detected["gpu_model"].strip().lower())
    if same_model and declared["gpu_count"] == detected["gpu_count"]:
        return None
    return (f"sglang_hardware declares {declared['gpu_count']}x {declared['gpu_model']}, but nvidia-smi on the "
            f"host reports {detected['gpu_count']}x {detected['gpu_model']}: fix sglang_hardware (gpu_model, "
            "gpu_count) to match the host, or leave sglang_hardware out to use what nvidia-smi detects")
