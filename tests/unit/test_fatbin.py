"""plugins/module_utils/compat/fatbin.py against real bytes carved from sglang-kernel 0.4.10's aarch64 wheel
(tests/fixtures/fatbin/README.md says where each byte came from), plus its error paths."""

import gzip
import pathlib
import struct

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.compat import fatbin

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "fatbin"


def fixture(name: str) -> bytes:
    return gzip.decompress((FIXTURES / name).read_bytes())


@pytest.fixture(scope="module")
def spatial_ops() -> bytes:
    """sgl_kernel/spatial_ops.abi3.so, all bytes zeroed but ELF header, section headers, .shstrtab, .nv_fatbin."""
    return fixture("spatial_ops.carved.so.gz")


@pytest.fixture(scope="module")
def flashmla_container() -> bytes:
    """The first fatbin container of sgl_kernel/flashmla_ops.abi3.so: three stored (uncompressed) cubins."""
    return fixture("flashmla_container0.fatbin.gz")


def test_real_shared_object_targets(spatial_ops):
    entries = fatbin.binary_entries(fatbin.bytes_reader(spatial_ops))
    # Header order as stored; the targets match the ptxas `-arch` recorded in each (zstd) payload,
    # checked when the fixture was carved (README), and `cuobjdump -lelf` of the same library in 0.4.4.
    assert [(e.kind, e.target, e.compressed) for e in entries] == [
        (2, "90", True), (2, "100f", True), (2, "120a", True), (2, "110a", True), (2, "121a", True)]
    assert [(e.payload_offset, e.payload_size, e.compressed_size) for e in entries[:2]] == [
        (137552, 1184, 1180), (138848, 1408, 1406)]
    assert fatbin.sm_targets(entries) == {"sm": ["90", "100f", "110a", "120a", "121a"], "ptx": []}
    # The zstd frame magic starts each compressed payload.
    assert spatial_ops[entries[0].payload_offset:][:4] == b"\x28\xb5\x2f\xfd"


def test_real_section_table(spatial_ops):
    sections = fatbin.elf_sections(fatbin.bytes_reader(spatial_ops))
    assert sections[".nv_fatbin"] == (137472, 7376)
    assert sections[".shstrtab"] == (197892, 317)
    assert "__nv_relfatbin" not in sections


def test_header_flags_agree_with_what_ptxas_recorded(flashmla_container):
    """The 'a'/'f' bits of the entry header say what the ptxas command line in the cubin says."""
    data = flashmla_container
    entries = list(fatbin.fatbin_entries(fatbin.bytes_reader(data), 0, len(data)))
    assert [(e.target, hex(e.flags), e.compressed) for e in entries] == [
        ("90a", "0x100011", False), ("100f", "0x1200011", False), ("103a", "0x1100011", False)]
    named = [fatbin.payload_arch(data[e.payload_offset:e.payload_offset + e.payload_size]) for e in entries]
    assert named == ["sm_90a", "sm_100f", "sm_103a"]
    # ...while the cubin's ELF e_flags are the same for sm_90 and sm_90a (ABI 8: SM in bits 8-15).
    first = data[entries[0].payload_offset:]
    assert first[8] == 8 and struct.unpack_from("<I", first, 48)[0] == 0x6005A04


def test_ptx_payload_names_its_target():
    assert fatbin.payload_arch(b"//\n.version 8.7\n.target sm_90a\n.address_size 64\n") == "sm_90a"
    assert fatbin.payload_arch(b"no target here") is None


def test_folder_layout_agrees_with_the_fixture(spatial_ops):
    # The wheel ships sgl_kernel/sm90/ and sgl_kernel/sm100/ builds; the shared targets include both families.
    targets = fatbin.sm_targets(fatbin.binary_entries(fatbin.bytes_reader(spatial_ops)))["sm"]
    assert {t.rstrip("af") for t in targets} >= {"90", "100"}


def test_no_fatbin_section_is_an_empty_result(spatial_ops):
    renamed = spatial_ops.replace(b".nv_fatbin\0", b".nv_fatbix\0")
    assert renamed != spatial_ops
    assert fatbin.binary_entries(fatbin.bytes_reader(renamed)) == []
    assert fatbin.sm_targets([]) == {"sm": [], "ptx": []}


def test_truncated_elf_is_a_clear_error(spatial_ops):
    with pytest.raises(fatbin.FatbinError, match=r"^ELF section header table: wanted 1984 bytes at offset 198216, "
                                                 r"got 0 \(truncated file\?\)$"):
        fatbin.binary_entries(fatbin.bytes_reader(spatial_ops[:150000]))


def test_truncated_fatbin_is_a_clear_error(flashmla_container):
    cut = flashmla_container[:100000]
    with pytest.raises(fatbin.FatbinError, match=r"^fatbin container at offset 0 claims 190608 bytes, "
                                                 r"past the section's end at 100000 \(truncated\?\)$"):
        list(fatbin.fatbin_entries(fatbin.bytes_reader(cut), 0, len(cut)))


def test_entry_past_its_container_is_a_clear_error(flashmla_container):
    shrunk = bytearray(flashmla_container)
    struct.pack_into("<Q", shrunk, 8, 1000)  # the container now claims 1000 bytes: its first entry overruns it
    with pytest.raises(fatbin.FatbinError, match=r"^fatbin entry at offset 16 \(header 64 \+ payload 31520 bytes\) "
                                                 r"runs past its container's end at 1016$"):
        list(fatbin.fatbin_entries(fatbin.bytes_reader(bytes(shrunk)), 0, len(shrunk)))


def test_garbage_instead_of_a_container_is_a_clear_error():
    with pytest.raises(fatbin.FatbinError, match=r"^no fatbin container at offset 8 \(magic 0x64636261, expected 0xba55ed50\)$"):
        list(fatbin.fatbin_entries(fatbin.bytes_reader(b"\0" * 8 + b"abcdefgh" * 2), 0, 24))


def test_not_an_elf_is_a_clear_error():
    with pytest.raises(fatbin.FatbinError, match=r"^not an ELF file \(magic b'PK\\x03\\x04'\)$"):
        fatbin.elf_sections(fatbin.bytes_reader(b"PK\x03\x04" + b"\0" * 60))
    with pytest.raises(fatbin.FatbinError, match=r"^ELF header: wanted 64 bytes at offset 0, got 4"):
        fatbin.elf_sections(fatbin.bytes_reader(b"\x7fELF"))


def test_reads_through_a_file_object(spatial_ops, tmp_path):
    path = tmp_path / "spatial_ops.so"
    path.write_bytes(spatial_ops)
    with path.open("rb") as fh:
        entries = fatbin.binary_entries(fatbin.file_reader(fh))
    assert fatbin.sm_targets(entries)["sm"] == ["90", "100f", "110a", "120a", "121a"]


def test_target_order_and_merge():
    assert sorted(["120a", "90a", "100f", "89", "90", "100"], key=fatbin.target_key) == [
        "89", "90", "90a", "100", "100f", "120a"]
    merged = fatbin.merge_targets({"sm": ["90", "100f"], "ptx": []}, {"sm": ["80", "90"], "ptx": ["90"]})
    assert merged == {"sm": ["80", "90", "100f"], "ptx": ["90"]}


def test_update_table_sorts_and_replaces():
    table = {"sglang-kernel": {"0.4.2": {"x86_64": {"sm": ["80"], "ptx": []}}}}
    table = fatbin.update_table(table, "sglang-kernel", "0.4.10", "x86_64", {"sm": ["90"], "ptx": []})
    table = fatbin.update_table(table, "sglang-kernel", "0.4.6.post1", "aarch64", {"sm": ["90"], "ptx": []})
    table = fatbin.update_table(table, "sgl-kernel", "0.2.8", "x86_64", {"sm": ["75"], "ptx": ["90"]})
    table = fatbin.update_table(table, "sglang-kernel", "0.4.2", "x86_64", {"sm": ["86"], "ptx": []})
    assert list(table) == ["sgl-kernel", "sglang-kernel"]
    assert list(table["sglang-kernel"]) == ["0.4.2", "0.4.6.post1", "0.4.10"]
    assert table["sglang-kernel"]["0.4.2"] == {"x86_64": {"sm": ["86"], "ptx": []}}
