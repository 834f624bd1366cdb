"""Which GPU architectures (SM targets) a CUDA binary carries, read from its ELF `.nv_fatbin` section.

Stdlib only, no import of other repo files. Everything reads through `read_at(offset, size) -> bytes`,
so a 1.7 GB kernel library is never loaded whole: from a file (`file_reader`), from bytes in memory
(`bytes_reader`), or straight from a wheel's zip member (a seekable `zipfile.ZipExtFile`).

The fatbin layout is NVIDIA's, undocumented; what this relies on (little-endian throughout):

  container header, 16 bytes: u32 magic 0xBA55ED50, u16 version 1, u16 header size 16,
      u64 size of the entries that follow. Containers sit back to back, each 8-byte aligned,
      with zero padding between them.
  entry header (64 bytes, 80 or 112 for newer targets; its own size says which):
      0 u16 kind (1 = PTX, 2 = cubin), 4 u32 header size, 8 u64 payload size (padded),
      16 u32 compressed size (0 = stored as is), 28 u32 SM number (90, 100, 120, ...), 40 u64 flags.
      The payload follows the entry header; the next entry follows the payload.
  flags 0x100000 = arch-specific target ('a': sm_90a), 0x200000 = family-specific ('f': sm_100f).

Sources: the container header is NVIDIA's `fatBinaryHeader` (FATBIN_MAGIC, in the CUDA toolkit's
fatbinary_section.h); the entry layout is from public readers reverse-engineered from cuobjdump
(GrigoryEvko/nvopen-tools fatbin/FORMAT_SPECIFICATION.md), and agrees with every wheel read here. The 'a'/'f' flag bits are not in those: they were found in the
real sglang-kernel wheels and checked against the `-arch sm_XXa` / `sm_XXf` that ptxas records in
every cubin's `.note.nv.tkinfo` (see `ptxas_arch`), and against `cuobjdump -lelf` output published
for sglang-kernel 0.4.4. The cubin's own ELF e_flags can NOT tell 'a'/'f' from plain: for
CUDA 13 cubins (ELF ABI version 8) sm_90 and sm_90a both carry e_flags 0x6005a04.
"""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_CUBIN = 2
FLAG_ARCH_SPECIFIC = 0x100000   # 'a'
FLAG_FAMILY_SPECIFIC = 0x200000  # 'f'
FLAG_COMPRESSED = 0x2000 | 0x8000  # 0x2000: NVIDIA's own LZ (CUDA 11/12), 0x8000: zstd (CUDA 13)
_SHT_NOBITS = 8


class FatbinError(SglangFleetError, ValueError):
    """The bytes are not what they claim to be (not an ELF, truncated, corrupt fatbin)."""


class FatbinEntry(NamedTuple):
    kind: int         # KIND_PTX, KIND_CUBIN or another (unknown) kind number
    sm: int           # 90, 100, 120, ...
    variant: str      # '', 'a' or 'f'
    flags: int
    payload_offset: int  # in the ELF image
    payload_size: int    # bytes reserved for the payload (8-byte aligned)
    compressed_size: int  # bytes of compressed data at payload_offset; 0 when stored as is

    @property
    def target(self) -> str:
        """'90a', '100f', '89': the SM target as nvcc spells it, without 'sm_'."""
        return f"{self.sm}{self.variant}"

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)


def bytes_reader(data):
    """read_at over bytes / bytearray / memoryview / mmap."""
    view = memoryview(data)
    return lambda offset, size: bytes(view[offset:offset + size])


def file_reader(fileobj):
    """read_at over a seekable binary file object (an open file, a zipfile.ZipExtFile)."""
    def read_at(offset, size):
        fileobj.seek(offset)
        return fileobj.read(size)
    return read_at


def _read(read_at, offset: int, size: int, what: str) -> bytes:
    data = read_at(offset, size)
    if len(data) != size:
        raise FatbinError(f"{what}: wanted {size} bytes at offset {offset}, got {len(data)} (truncated file?)")
    return data


def elf_sections(read_at) -> dict:
    """{section name: (file offset, size)} of a 64-bit little-endian ELF; NOBITS sections left out."""
    ident = _read(read_at, 0, 64, "ELF header")
    if ident[:4] != b"\x7fELF":
        raise FatbinError(f"not an ELF file (magic {ident[:4]!r})")
    if ident[4] != 2 or ident[5] != 1:
        raise FatbinError(f"not a 64-bit little-endian ELF (class {ident[4]}, data {ident[5]})")
    (shoff,) = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if shnum == 0 or shentsize < 64 or shstrndx >= shnum:
        raise FatbinError(f"ELF has no usable section header table (shnum {shnum}, shentsize {shentsize},"
                          f" shstrndx {shstrndx})")
    table = _read(read_at, shoff, shnum * shentsize, "ELF section header table")
    headers = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    _, _, _, _, str_off, str_size = headers[shstrndx]
    names = _read(read_at, str_off, str_size, "ELF section name table")
    sections = {}
    for name_off, sh_type, _, _, offset, size in headers:
        if sh_type == _SHT_NOBITS:
            continue
        end = names.find(b"\0", name_off)
        sections[names[name_off:end].decode("ascii", "replace")] = (offset, size)
    return sections


def fatbin_entries(read_at, start: int, size: int):
    """Yield the FatbinEntry of every container in the fatbin bytes [start, start + size)."""
    pos, end = start, start + size
    while pos + 16 <= end:
        head = _read(read_at, pos, 16, "fatbin container header")
        magic, version, head_size, body_size = struct.unpack("<IHHQ", head)
        if magic != FATBIN_MAGIC:
            if head[:8] == b"\0" * 8:  # padding that aligns the next container
                pos += 8
                continue
            raise FatbinError(f"no fatbin container at offset {pos} (magic 0x{magic:08x}, expected 0x{FATBIN_MAGIC:08x})")
        container_end = pos + head_size + body_size
        if head_size < 16 or container_end > end:
            raise FatbinError(f"fatbin container at offset {pos} claims {head_size + body_size} bytes,"
                              f" past the section's end at {end} (truncated?)")
        entry = pos + head_size
        while entry < container_end:
            raw = _read(read_at, entry, 48, "fatbin entry header")
            kind, _, entry_size, payload_size = struct.unpack_from("<HHIQ", raw, 0)
            (compressed_size,) = struct.unpack_from("<I", raw, 16)
            (sm,) = struct.unpack_from("<I", raw, 28)
            (flags,) = struct.unpack_from("<Q", raw, 40)
            if entry_size < 48 or entry + entry_size + payload_size > container_end:
                raise FatbinError(f"fatbin entry at offset {entry} (header {entry_size} + payload {payload_size} bytes)"
                                  f" runs past its container's end at {container_end}")
            variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
            yield FatbinEntry(kind, sm, variant, flags, entry + entry_size, payload_size, compressed_size)
            entry += entry_size + payload_size
        pos = container_end


def binary_entries(read_at) -> list:
    """Every fatbin entry of one ELF shared object; [] when it carries no fatbin (host-only code)."""
    sections = elf_sections(read_at)
    entries = []
    for name in FATBIN_SECTIONS:
        if name in sections:
            entries.extend(fatbin_entries(read_at, *sections[name]))
    return entries


def target_key(target: str):
    """Sort '89' < '90' < '90a' < '100' < '100f' < '120a' (numeric, then suffix)."""
    digits = target.rstrip("abcdefghijklmnopqrstuvwxyz")
    return (int(digits), target[len(digits):])


def sm_targets(entries) -> dict:
    """{'sm': cubin targets, 'ptx': PTX targets}, each sorted and without duplicates."""
    cubins = {e.target for e in entries if e.kind == KIND_CUBIN}
    ptx = {e.target for e in entries if e.kind == KIND_PTX}
    return {"sm": sorted(cubins, key=target_key), "ptx": sorted(ptx, key=target_key)}


def merge_targets(*parts) -> dict:
    """Union of several sm_targets() results (e.g. of every .so in a wheel)."""
    sm, ptx = set(), set()
    for part in parts:
        sm.update(part["sm"])
        ptx.update(part["ptx"])
    return {"sm": sorted(sm, key=target_key), "ptx": sorted(ptx, key=target_key)}


_PTXAS_ARCH = re.compile(rb"-arch[ =](sm_\d+[a-z]?)")
_PTX_TARGET = re.compile(rb"^\s*\.target\s+(sm_\d+[a-z]?)", re.M)


def payload_arch(payload: bytes):
    """The target a stored (uncompressed) payload names itself, e.g. 'sm_90a'; None if it names none.

    A cubin: the `-arch` of the ptxas command line in its `.note.nv.tkinfo` section. PTX text: its
    `.target` directive. Used to cross-check the entry header's SM number and 'a'/'f' flag bits.
    """
    if payload[:4] == b"\x7fELF":
        try:
            note = elf_sections(bytes_reader(payload)).get(".note.nv.tkinfo")
        except FatbinError:
            return None
        match = _PTXAS_ARCH.search(payload[note[0]:note[0] + note[1]]) if note else None
    else:
        match = _PTX_TARGET.search(payload[:8192])
    return match.group(1).decode() if match else None


def version_key(version: str):
    """'0.4.2' < '0.4.6.post1' < '0.4.10': numeric parts compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|[a-z]+", version.lower())]


def update_table(table: dict, package: str, version: str, arch: str, targets: dict) -> dict:
    """A copy of {package: {version: {arch: targets}}} with one wheel's targets set (replacing
    an older measurement of the same wheel), packages and archs sorted by name, versions by version."""
    merged = {pkg: {ver: dict(archs) for ver, archs in versions.items()} for pkg, versions in table.items()}
    merged.setdefault(package, {}).setdefault(version, {})[arch] = {
        "sm": list(targets["sm"]), "ptx": list(targets["ptx"])}
    return {pkg: {ver: dict(sorted(merged[pkg][ver].items()))
                  for ver in sorted(merged[pkg], key=version_key)}
            for pkg in sorted(merged)}
