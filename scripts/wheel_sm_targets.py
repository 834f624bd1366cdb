"""Which GPU architectures (SM targets) a wheel's compiled CUDA kernels are built for.

    .venv/bin/python scripts/wheel_sm_targets.py path/to/sglang_kernel-0.4.10-...-x86_64.whl
    .venv/bin/python scripts/wheel_sm_targets.py --pypi sglang-kernel==0.4.10 --platform x86_64 --update
    .venv/bin/python scripts/wheel_sm_targets.py --pypi torch==2.14.1 --platform x86_64 --python cp311
    .venv/bin/python scripts/wheel_sm_targets.py --sglang-pins .cache/sglang-wheels/sglang-*.whl

`--sglang-pins` records which kernel each sglang wheel pins (its Requires-Dist) in the table's
`sglang_pins`, so a GPU the kernels dropped is told the newest sglang release that still runs on it.

Reads every ELF shared object inside the wheel straight from the zip (no extraction), parses the
CUDA fatbin of each (plugins/module_utils/compat/fatbin.py), and prints the wheel's YAML fragment: cubin targets
(`sm`) and embedded PTX (`ptx`). `--update` merges it into roles/sglang_compat/files/kernel_sm_targets.yml.
Per-library targets, the sm90/ sm100/ folder cross-check and the payload cross-check go to stderr.

With --pypi the wheel comes from PyPI's JSON API into .cache/sm-targets/ and is checked against
PyPI's sha256 (a cached copy with the right digest is reused; --delete removes it afterwards).
"""

from __future__ import annotations

import argparse
import datetime
import email.parser
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

import yaml
from packaging.requirements import Requirement

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / ".collections")]  # the collection imports as Ansible imports it
from ansible_collections.sglang.fleet.plugins.module_utils.compat import fatbin  # noqa: E402

CACHE = REPO / ".cache" / "sm-targets"
TABLE = REPO / "roles" / "sglang_compat" / "files" / "kernel_sm_targets.yml"
PYPI = "https://pypi.org/pypi"
ARCHS = ("x86_64", "aarch64")
_SOURCE_LINE = re.compile(r"^#   - (\S+\.whl) sha256:([0-9a-f]{64}) (\S+)$")
_FAMILY_DIR = re.compile(r"/sm(\d+)/")
KERNEL_DISTS = ("sglang-kernel", "sgl-kernel")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_identity(path: pathlib.Path):
    """(distribution, version, arch) from a wheel file name."""
    parts = path.name[:-len(".whl")].split("-")
    arch = next((a for a in ARCHS if parts[-1].endswith(a)), None)
    if len(parts) < 5 or arch is None:
        raise SystemExit(f"{path.name}: not a linux x86_64/aarch64 wheel file name")
    return normalise(parts[0]), parts[1], arch


# ---------------------------------------------------------------------------- PyPI download

def release_files(name: str, version: str) -> tuple[list, str]:
    """PyPI's file list of name==version, from the release's JSON (or the project's, where the
    per-release endpoint is not served), with absolute URLs."""
    for url in (f"{PYPI}/{name}/{version}/json", f"{PYPI}/{name}/json"):
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                doc = json.load(resp)
        except urllib.error.HTTPError as err:
            if err.code == 404:
                continue
            raise
        files = doc["urls"] if url.endswith(f"/{version}/json") else doc["releases"].get(version, [])
        if files:
            return [dict(f, url=urllib.parse.urljoin(url, f["url"])) for f in files], url
    raise SystemExit(f"PyPI has no files for {name}=={version}")


def pick_wheel(files: list, platform: str, python: str | None) -> dict:
    wheels = [f for f in files if f["filename"].endswith(".whl") and "linux" in f["filename"]
              and f["filename"][:-4].endswith(platform)]
    if python and len(wheels) > 1:
        wheels = [f for f in wheels if f"-{python}-" in f["filename"]] or \
                 [f for f in wheels if "-abi3-" in f["filename"]]
    if len(wheels) != 1:
        names = ", ".join(f["filename"] for f in wheels) or "none"
        raise SystemExit(f"want exactly one linux {platform} wheel, found: {names} (narrow with --python cpXY)")
    return wheels[0]


def sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(spec: str, platform: str, python: str | None) -> tuple[pathlib.Path, dict]:
    name, _, version = spec.partition("==")
    if not version:
        raise SystemExit(f"--pypi wants name==version, got {spec!r}")
    files, _ = release_files(name, version)
    wheel = pick_wheel(files, platform, python)
    want = wheel["digests"]["sha256"]
    dest = CACHE / wheel["filename"]
    info = {"url": wheel["url"], "sha256": want, "bytes": wheel["size"], "seconds": 0.0}
    if dest.exists() and sha256_of(dest) == want:
        print(f"cached {dest.name} ({wheel['size'] / 1e6:.1f} MB), sha256 ok", file=sys.stderr)
        return dest, info
    CACHE.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    digest, start = hashlib.sha256(), time.monotonic()
    with urllib.request.urlopen(wheel["url"], timeout=120) as resp, part.open("wb") as out:
        for block in iter(lambda: resp.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    info["seconds"] = round(time.monotonic() - start, 1)
    if digest.hexdigest() != want:
        part.unlink()
        raise SystemExit(f"{wheel['filename']}: sha256 {digest.hexdigest()} is not PyPI's {want}")
    part.replace(dest)
    print(f"downloaded {dest.name}: {wheel['size'] / 1e6:.1f} MB in {info['seconds']} s, sha256 ok",
          file=sys.stderr)
    return dest, info


# ---------------------------------------------------------------------------- reading the wheel

def zstd_decompress(data: bytes) -> bytes | None:
    """zstd payloads (CUDA 13 fatbins) through the zstd command, where installed; None otherwise."""
    if not shutil.which("zstd"):
        return None
    proc = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def check_payloads(read_at, entries) -> tuple[int, list]:
    """Compare each entry's header (SM + 'a'/'f') with the target its payload names itself."""
    checked, mismatches = 0, []
    for entry in entries:
        payload = read_at(entry.payload_offset, entry.compressed_size or entry.payload_size)
        if entry.compressed:
            payload = zstd_decompress(payload) if payload[:4] == b"\x28\xb5\x2f\xfd" else None
            if payload is None:
                continue
        named = fatbin.payload_arch(payload)
        if named is None:
            continue
        checked += 1
        if named != f"sm_{entry.target}":
            mismatches.append(f"header sm_{entry.target}, payload {named}")
    return checked, mismatches


def wheel_targets(path: pathlib.Path, verify: bool) -> dict:
    """Union of the SM targets of every ELF in the wheel; per-library report on stderr."""
    parts, problems = [], []
    with zipfile.ZipFile(path) as zf:
        for member in zf.infolist():
            if member.is_dir() or member.file_size < 64:
                continue
            with zf.open(member) as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
                read_at = fatbin.file_reader(fh)
                entries = fatbin.binary_entries(read_at)
                targets = fatbin.sm_targets(entries)
                note = ""
                if verify and entries:
                    checked, bad = check_payloads(read_at, entries)
                    note = f"  payloads checked {checked}/{len(entries)}, mismatches {len(bad)}"
                    problems += [f"{member.filename}: {b}" for b in bad[:5]]
            family = _FAMILY_DIR.search("/" + member.filename)
            if family and entries and not any(t.rstrip("af") == family.group(1) for t in targets["sm"]):
                problems.append(f"{member.filename}: folder sm{family.group(1)}/ but no such cubin")
            if entries:
                parts.append(targets)
                print(f"  {member.filename}: {len(entries)} entries, sm {' '.join(targets['sm'])}"
                      f"; ptx {' '.join(targets['ptx']) or '-'}{note}", file=sys.stderr)
    for problem in problems:
        print(f"  CHECK FAILED {problem}", file=sys.stderr)
    if problems:
        raise SystemExit(f"{path.name}: {len(problems)} cross-check failures")
    return fatbin.merge_targets(*parts)


# ---------------------------------------------------------------------------- the YAML table

HEADER = """\
# GPU architectures (CUDA SM targets) compiled into the kernel wheels that SGLang releases pin
# (sgl-kernel / sglang-kernel; torch where measured). Data for the sglang_compat GPU check.
#
# Read from the real wheels on PyPI by scripts/wheel_sm_targets.py: every ELF .so in the wheel,
# its .nv_fatbin parsed by plugins/module_utils/compat/fatbin.py (the format and its sources are documented there).
#   sm:  cubin (SASS) targets as compiled. Plain "80": runs on CC 8.0 and later minors of major 8
#        (8.6, 8.9). "90a" (arch-specific): only on exactly CC 9.0. "100f" (family-specific): on
#        CC 10.0 and the later members of its family (10.3).
#   ptx: PTX embedded, which the driver can JIT-compile for any newer GPU; [] = no JIT fallback.
# Values are the union over all libraries in the wheel: one library may cover fewer targets
# (e.g. flash_ops: 80 86 90a only). In every kernel wheel measured so far, the PTX comes only from
# the bundled mscclpp libraries (lib/mscclpp*.so): sgl_kernel's own ops carry no PTX at all.
#
# Regenerate one wheel (downloads it, checks PyPI's sha256, merges here):
#   .venv/bin/python scripts/wheel_sm_targets.py --pypi sglang-kernel==0.4.10 --platform x86_64 --verify --update
# Wheels measured (file name, sha256 as PyPI publishes it and as checked, date measured):
"""


def read_table(path: pathlib.Path) -> tuple[dict, dict, dict]:
    """(packages table, {wheel file name: (sha256, date)}, sglang_pins) of an existing table file."""
    if not path.exists():
        return {}, {}, {}
    text = path.read_text()
    sources = {m.group(1): (m.group(2), m.group(3))
               for m in map(_SOURCE_LINE.match, text.splitlines()) if m}
    data = yaml.safe_load(text) or {}
    return data.get("packages", {}), sources, data.get("sglang_pins", {})


def sglang_kernel_pin(wheel: pathlib.Path) -> tuple[str, str]:
    """(sglang version, "kernel-dist==version") from an sglang wheel's own Requires-Dist."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.HeaderParser().parsestr(zf.read(name).decode())
    for text in metadata.get_all("Requires-Dist") or ():
        req = Requirement(text)
        pinned = [spec.version for spec in req.specifier if spec.operator == "=="]
        if normalise(req.name) in KERNEL_DISTS and pinned and not req.extras:
            return metadata["Version"], f"{normalise(req.name)}=={pinned[0]}"
    raise SystemExit(f"{wheel.name}: no pinned {' or '.join(KERNEL_DISTS)} in its Requires-Dist")


def render_table(table: dict, sources: dict, pins: dict) -> str:
    lines = [HEADER.rstrip("\n")]
    lines += [f"#   - {name} sha256:{sha} {day}" for name, (sha, day) in sorted(sources.items())]
    if pins:
        lines.append("# The kernel each sglang release pins (its wheel's Requires-Dist):")
        lines.append("sglang_pins:")
        lines += [f'  "{version}": {pins[version]}' for version in sorted(pins, key=fatbin.version_key)]
    lines.append("packages:")
    for package, versions in table.items():
        lines.append(f"  {package}:")
        for version, archs in versions.items():
            lines.append(f'    "{version}":')
            for arch, targets in archs.items():
                lines.append(f"      {arch}: {fragment(targets)}")
    return "\n".join(lines) + "\n"


def fragment(targets: dict) -> str:
    def quoted(items):
        return "[" + ", ".join(f'"{t}"' for t in items) + "]"
    return f"{{sm: {quoted(targets['sm'])}, ptx: {quoted(targets['ptx'])}}}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", nargs="?", type=pathlib.Path, help="a local .whl file")
    parser.add_argument("--pypi", metavar="NAME==VERSION", help="download this wheel from PyPI instead")
    parser.add_argument("--platform", choices=ARCHS, help="with --pypi: which linux wheel")
    parser.add_argument("--python", metavar="cpXY", help="with --pypi: the cp tag, where wheels differ by it")
    parser.add_argument("--verify", action="store_true",
                        help="cross-check each header against the target its payload names (zstd payloads need zstd(1))")
    parser.add_argument("--update", nargs="?", const=TABLE, type=pathlib.Path, metavar="TABLE",
                        help=f"merge the result into TABLE (default {TABLE.relative_to(REPO)})")
    parser.add_argument("--delete", action="store_true", help="with --pypi: delete the wheel afterwards")
    parser.add_argument("--sglang-pins", nargs="+", type=pathlib.Path, metavar="SGLANG_WHEEL",
                        help="record the kernel each of these sglang wheels pins in TABLE's sglang_pins")
    args = parser.parse_args(argv)
    if args.sglang_pins:
        table_path = args.update or TABLE
        table, sources, pins = read_table(table_path)
        pins.update(sglang_kernel_pin(wheel) for wheel in args.sglang_pins)
        table_path.write_text(render_table(table, sources, pins))
        print(f"updated {table_path}: {len(pins)} sglang releases", file=sys.stderr)
        return 0
    if bool(args.wheel) == bool(args.pypi) or (args.pypi and not args.platform):
        parser.error("give a wheel file, or --pypi NAME==VERSION with --platform")

    if args.pypi:
        path, info = download(args.pypi, args.platform, args.python)
        sha = info["sha256"]
    else:
        path, sha = args.wheel, sha256_of(args.wheel)
    package, version, arch = wheel_identity(path)
    start = time.monotonic()
    targets = wheel_targets(path, args.verify)
    print(f"{path.name}: read in {time.monotonic() - start:.1f} s", file=sys.stderr)

    print(f'{package}:\n  "{version}":\n    {arch}: {fragment(targets)}')
    if args.update:
        table, sources, pins = read_table(args.update)
        table = fatbin.update_table(table, package, version, arch, targets)
        sources[path.name] = (sha, datetime.date.today().isoformat())
        args.update.parent.mkdir(parents=True, exist_ok=True)
        args.update.write_text(render_table(table, sources, pins))
        if yaml.safe_load(args.update.read_text())["packages"] != table:
            raise SystemExit(f"{args.update}: written table does not read back the same")
        print(f"updated {args.update}", file=sys.stderr)
    if args.pypi and args.delete:
        path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
