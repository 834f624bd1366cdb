"""ml_env's controller wheelhouse on real wheels and real PyPI resolution.

Pins read from each covered release's METADATA with packaging (FlashInfer, the kernel and torch
in lockstep), wheels chosen by their tags for the host, a tampered wheel refused with the fix,
and the full (CUDA) profile resolved by hash for linux x86_64 CPython 3.10-3.12 (metadata only:
nothing multi-GB is downloaded). uv's cache is kept in .cache/uv.
"""

import hashlib
import os
import shutil
import subprocess

import pytest
from ansible_run import REPO, run_module
from wheels import VERSIONS, sglang_wheel

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.release.venv_build import unpack_uv
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import (
    LOCKSTEP,
    WheelError,
    choose_wheel,
    find_uv,
    full_lock_inputs,
    host_tags,
    lockstep_skew,
    make_lock,
    parse_lock,
    serving_extras,
    wheel_pins,
)

pytestmark = pytest.mark.wheels

# Where the module tests keep the wheels they download (a controller wheelhouse, like ml_env's).
WHEELHOUSE = REPO / ".cache" / "ml-env-wheelhouse"
DEBIAN12 = {"python_version": "3.11", "architecture": "x86_64", "glibc": "2.36"}


@pytest.fixture(autouse=True)
def uv_cache(monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", os.environ.get("UV_CACHE_DIR", str(REPO / ".cache" / "uv")))


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    return p.returncode, p.stdout, p.stderr


# release: (torch, kernel package and version, flashinfer-python), as each wheel's METADATA pins them.
# 0.4.x keeps its serving stack in the `srt` extra; 0.5.13.post1+ pins `flashinfer_python[cu13]==...`.
PINS = {
    "0.4.10.post2": ("2.7.1", "sgl-kernel", "0.2.8", "0.2.9rc2"),
    "0.5.6": ("2.9.1", "sgl-kernel", "0.3.18.post2", "0.5.3"),
    "0.5.9": ("2.9.1", "sgl-kernel", "0.3.21", "0.6.3"),
    "0.5.11": ("2.11.0", "sglang-kernel", "0.4.2", "0.6.8.post1"),
    "0.5.13.post1": ("2.11.0", "sglang-kernel", "0.4.3", "0.6.12"),
    "0.5.16": ("2.11.0", "sglang-kernel", "0.4.5", "0.6.14"),
    "0.5.18": ("2.13.0", "sglang-kernel", "0.4.6.post1", "0.6.17"),
    "0.5.19": ("2.13.0", "sglang-kernel", "0.4.6.post1", "0.6.18"),
    "0.5.20": ("2.13.0", "sglang-kernel", "0.4.7", "0.6.18"),
    "0.5.23": ("2.14.1", "sglang-kernel", "0.4.10", "0.7.2"),
}


def test_every_covered_release_has_its_pins_listed():
    assert set(PINS) == set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_pins_come_from_the_metadata_with_flashinfer_kernel_and_torch_in_lockstep(version):
    torch, kernel, kernel_version, flashinfer = PINS[version]
    wheel = sglang_wheel(version)
    pins = wheel_pins(wheel, "3.11", "x86_64", serving_extras(wheel))
    assert pins["torch"] == torch
    assert pins[kernel] == kernel_version
    assert [pins[n] for n in LOCKSTEP] == [flashinfer] * 3
    assert full_lock_inputs(pins, {})[0] == [f"{n}=={flashinfer}" for n in LOCKSTEP]


def test_extras_and_other_platforms_are_not_pins():
    wheel = sglang_wheel("0.5.11")
    assert serving_extras(wheel) == ()
    x86 = wheel_pins(wheel, "3.11", "x86_64")
    assert x86["torchcodec"] == "0.11.1"
    assert "torchcodec" not in wheel_pins(wheel, "3.11", "aarch64")  # its marker leaves out aarch64
    assert "sgl-eval" not in wheel_pins(sglang_wheel("0.5.23"))  # extra == "test"
    old = sglang_wheel("0.4.10.post2")
    assert serving_extras(old) == ("srt",)
    assert "torch" not in wheel_pins(old)  # only sglang[srt] brings the CUDA stack up to 0.4


def test_lockstep_skew():
    pins = {n: "0.6.8.post1" for n in LOCKSTEP}
    assert lockstep_skew(pins, {"flashinfer-jit-cache": "0.6.9"}) == {"flashinfer-jit-cache": "0.6.9"}
    assert lockstep_skew(pins, {n: "0.6.9" for n in LOCKSTEP}) == {}
    assert lockstep_skew(pins, {"torch": "2.11.1"}) == {}


@pytest.mark.parametrize(
    ("host", "picked"),
    [
        ({"python_version": "3.11", "architecture": "x86_64", "glibc": "2.36"}, True),
        ({"python_version": "3.12", "architecture": "x86_64", "glibc": "2.36"}, False),
        ({"python_version": "3.11", "architecture": "aarch64", "glibc": "2.36"}, False),
        ({"python_version": "3.11", "architecture": "x86_64", "glibc": "2.31"}, False),  # wheel is manylinux_2_34
    ],
    ids=["cp311-x86_64", "py3.12", "aarch64", "glibc-2.31"],
)
def test_a_cached_wheel_is_used_only_for_a_host_its_tags_fit(tmp_path, host, picked):
    wheel = sglang_wheel("0.5.11")
    assert wheel.name == "sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl"
    shutil.copy(wheel, tmp_path)
    tags = host_tags(host["python_version"], host["architecture"], host["glibc"])
    assert choose_wheel(str(tmp_path), "sglang", "0.5.11", tags) == (str(tmp_path / wheel.name) if picked else None)


def test_hosts_that_no_sglang_wheel_fits_are_refused_with_the_reason():
    with pytest.raises(WheelError, match=r"^CPU architecture 'armv7l': SGLang ships wheels for x86_64, aarch64 only$"):
        host_tags("3.11", "armv7l", "2.36")
    with pytest.raises(WheelError, match=r"^glibc '': SGLang's wheels are manylinux wheels and need a glibc 2.x host$"):
        host_tags("3.11", "x86_64", "")


def put_wheel(wheel, folder):
    """Copy a wheel into a wheelhouse the way the module writes one: whole or not at all.

    pytest-xdist runs these tests side by side on one wheelhouse; a plain copy truncates the wheel
    that the other worker's module is reading ("Truncated file header").
    """
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{wheel.name}.{os.getpid()}"
    shutil.copyfile(wheel, partial)
    os.replace(partial, folder / wheel.name)


def wheelhouse(**params):
    put_wheel(sglang_wheel("0.5.11"), WHEELHOUSE)  # the cp311 x86_64 wheel, there for every host
    return run_module({"version": "0.5.11", "dest": str(WHEELHOUSE), "profile": "light", **params},
                      module="sglang_wheelhouse", timeout=600)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        (DEBIAN12, "sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl"),
        ({**DEBIAN12, "python_version": "3.12"}, "sglang-0.5.11-cp312-cp312-manylinux_2_34_x86_64.whl"),
        ({**DEBIAN12, "python_version": "3.12", "architecture": "aarch64"},
         "sglang-0.5.11-cp312-cp312-manylinux_2_34_aarch64.whl"),
    ],
    ids=["cp311-x86_64", "py3.12", "py3.12-aarch64"],
)
def test_each_host_gets_the_wheel_of_its_python_and_architecture(host, expected):
    rc, result, _ = wheelhouse(**host)
    assert rc == 0, result
    assert result["changed"] is False
    assert result["wheels"] == [result["wheel"]] == [str(WHEELHOUSE / expected)]
    platform = f"{host['architecture']}-manylinux_2_36"
    lock_file = WHEELHOUSE / "locks" / f"sglang-0.5.11-light-cp{host['python_version'].replace('.', '')}-{platform}.txt"
    assert result["lock_file"] == str(lock_file)
    assert result["lock"] == lock_file.read_text()
    assert list(parse_lock(result["lock"])) == ["sglang"]
    assert result["wheel_sha256"] == sha256(WHEELHOUSE / expected)
    assert result["wheel_sha256"] in parse_lock(result["lock"])["sglang"][1]
    assert result["pins"]["sglang"] == "0.5.11" and result["pins"]["torch"] == "2.11.0"
    assert (WHEELHOUSE / "src" / "sglang-0.5.11" / "sglang" / "srt" / "server_args.py").is_file()


def test_the_uv_wheel_is_locked_by_its_pypi_sha256():
    rc, result, _ = wheelhouse(**DEBIAN12, uv_version="0.13.9")
    assert rc == 0, result
    uv_wheel = WHEELHOUSE / "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    assert result["uv_wheel"] == str(uv_wheel)
    version, hashes = parse_lock(result["uv_lock"])["uv"]
    assert version == "0.13.9" and sha256(uv_wheel) in hashes


def test_ml_env_installs_uv_by_unpacking_its_checked_wheel(tmp_path):
    """venv_build.unpack_uv, as sglang_venv runs it on a host: the program, runnable."""
    rc, result, _ = wheelhouse(**DEBIAN12, uv_version="0.13.9")
    assert rc == 0, result
    unpack_uv(result["uv_wheel"], str(tmp_path / "uv"))
    got = subprocess.run([tmp_path / "uv" / "bin" / "uv", "--version"], capture_output=True, text=True, check=True)
    assert got.stdout.startswith("uv 0.13.9 ")
    assert sorted(p.name for p in (tmp_path / "uv").rglob("*")) == ["bin", "uv"]
    not_uv = tmp_path / "sglang.whl"
    shutil.copy(sglang_wheel("0.5.11"), not_uv)
    with pytest.raises(SglangFleetError) as refused:
        unpack_uv(str(not_uv), str(tmp_path / "other"))
    assert str(refused.value) == f"{not_uv}: expected one .data/scripts/uv in the wheel, found none"
    assert not (tmp_path / "other" / "bin" / "uv").exists()


def test_a_tampered_wheel_is_refused_with_the_file_both_hashes_and_the_fix(tmp_path):
    genuine = sglang_wheel("0.5.11")
    wheel = tmp_path / genuine.name
    wheel.write_bytes(genuine.read_bytes() + b"\0")
    rc, result, _ = run_module({"version": "0.5.11", "dest": str(tmp_path), "profile": "light", **DEBIAN12},
                               module="sglang_wheelhouse", timeout=600)
    assert rc != 0
    lock_file = tmp_path / "locks" / "sglang-0.5.11-light-cp311-x86_64-manylinux_2_36.txt"
    expected = parse_lock(lock_file.read_text())["sglang"][1]
    assert sha256(genuine) in expected
    assert result["msg"] == (
        f"{wheel} has sha256 {sha256(wheel)}, but the lock {lock_file} expects {' or '.join(expected)} for "
        f"sglang==0.5.11: the file was altered or corrupted, and nothing was installed from it. Delete it "
        f"(rm {wheel}) and re-run: it is downloaded again and checked against the lock.")
    assert not (tmp_path / "src").exists()  # nothing was read out of it


def test_an_extra_pin_that_skews_flashinfer_is_refused(tmp_path):
    shutil.copy(sglang_wheel("0.5.11"), tmp_path)
    rc, result, _ = run_module({"version": "0.5.11", "dest": str(tmp_path), **DEBIAN12,
                                "extra_pins": {"flashinfer-jit-cache": "0.6.9"}}, module="sglang_wheelhouse")
    assert rc != 0
    assert result["msg"] == (
        "ml_env_extra_pins {'flashinfer-jit-cache': '0.6.9'} would skew FlashInfer against sglang 0.5.11, which "
        "pins flashinfer-python==0.6.8.post1; flashinfer-python, flashinfer-cubin and flashinfer-jit-cache must "
        "move in lockstep (sglang PR 28786): remove the pin or pin all three to the same version")


def full_lock(tmp_path, version, python_version, extra=None):
    """The full profile's lock for linux x86_64 (glibc 2.36), resolved from PyPI metadata only."""
    wheel = sglang_wheel(version)
    pins = {**wheel_pins(wheel, python_version, "x86_64"), **(extra or {})}
    constraints, overrides = full_lock_inputs(pins, extra or {})
    _, text = make_lock(run, find_uv(), str(tmp_path), f"sglang-{version}-full", f"sglang=={version}",
                        python_version, "x86_64", "2.36", False, constraints, overrides, retries=2)
    return pins, parse_lock(text)


@pytest.mark.parametrize(
    ("version", "python_version"),
    [("0.5.11", "3.10"), ("0.5.11", "3.11"), ("0.5.11", "3.12"), ("0.5.23", "3.11"), ("0.5.23", "3.12")],
)
def test_the_full_profile_resolves_by_hash_with_the_wheels_pins(tmp_path, version, python_version):
    pins, lock = full_lock(tmp_path, version, python_version)
    torch, kernel, kernel_version, flashinfer = PINS[version]
    assert lock["sglang"][0] == version
    assert lock["torch"][0] == torch
    assert lock[kernel][0] == kernel_version
    assert lock["flashinfer-python"][0] == flashinfer
    assert all(lock[n][0] == flashinfer for n in LOCKSTEP if n in lock)
    assert all(lock[n][0] == v for n, v in pins.items() if n in lock)  # every exact pin held
    assert len(lock) > 100  # the CUDA stack, not sglang alone
    assert all(hashes for _, hashes in lock.values())


def test_a_release_without_a_wheel_for_the_host_python_is_refused_with_uvs_reason(tmp_path):
    with pytest.raises(WheelError) as err:
        full_lock(tmp_path, "0.5.23", "3.10")
    assert str(err.value).startswith("could not lock sglang==0.5.23 for CPython 3.10 on x86_64-manylinux_2_36: ")
    assert "we only found wheels for `sglang` (v0.5.23) with the following Python implementation tags: " \
           "`cp311`, `cp312`, `cp313`" in str(err.value)


def test_a_dependency_without_a_wheel_is_refused_and_an_extra_pin_fixes_it(tmp_path):
    # sglang 0.5.18 requires cuda-tile==1.6.0rc5, published as an sdist only.
    with pytest.raises(WheelError) as err:
        full_lock(tmp_path, "0.5.18", "3.12")
    assert "cuda-tile==1.6.0rc5 has no usable wheels" in str(err.value)
    assert str(err.value).endswith("when a package has no wheel for this host, pin one that has in "
                                   "ml_env_extra_pins, or pick another sglang_version or Python")
    pins, lock = full_lock(tmp_path, "0.5.18", "3.12", {"cuda-tile": "1.6.0"})
    assert lock["cuda-tile"][0] == "1.6.0"
    assert (lock["torch"][0], lock["sglang-kernel"][0], lock["flashinfer-python"][0]) == ("2.13.0", "0.4.6.post1", "0.6.17")
