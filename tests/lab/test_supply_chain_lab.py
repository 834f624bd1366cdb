"""Verified installs end to end on a lab host of its own (ct129 mirror, 10.89.95.0/24, sglang-supply-*).

The host installs from a hash-locked lock made on the controller for its Python and platform
(--require-hashes, no index, uv checked the same way). A wheel altered in the controller
wheelhouse is refused before anything on the host changes (the service's PID and unit bytes
stay the same, the altered file is never pushed), with the file, the expected and actual sha256
and the fix; following the fix (delete it, re-run) deploys cleanly without rebuilding the venv.
"""

import hashlib
import shutil
import zipfile

import pytest
from lab_fleet import deployed_lab_fleet, recap, unflow
from wheels import sglang_wheel

pytestmark = pytest.mark.lab

HOST = "ct129"
WHEEL = "sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl"  # Debian 12: CPython 3.11, glibc 2.36
LOCK = "/opt/ml-env/locks/sglang-0.5.11-light.txt"
FAST = ("--skip-tags", "sglang_verify")


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A controller cache of this module's own (the tests alter a wheel in it)."""
    cache = tmp_path_factory.mktemp("controller-cache")
    (cache / "wheelhouse").mkdir()
    seed = sglang_wheel("0.5.11")
    if seed.name == WHEEL:  # saves a download; the lock checks it like any other
        shutil.copy(seed, cache / "wheelhouse" / WHEEL)
    return cache


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, cache):
    with deployed_lab_fleet(tmp_path_factory.mktemp("supply-lab"), "sglang-supply", "10.89.95.", hosts=[HOST],
                            deploy_args=("-e", f"sglang_controller_cache={cache}", *FAST)) as fleet:
        yield fleet


def deploy(fleet, cache, *args):
    """The whole deploy (its checks read the controller's wheelhouse; a host in sync with its last
    deploy reads no wheel, it installs nothing)."""
    return fleet.play("deploy.yml", "-e", f"sglang_controller_cache={cache}", "-e", "sglang_release_skip_unchanged=false",
                      *FAST, *args)


def host_state(fleet):
    """What must not change when a deploy is refused: the unit's bytes and the server's PID."""
    unit = fleet.ssh(HOST, "sha256sum /etc/systemd/system/sglang.service").split()[0]
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID").strip()
    return unit, pid


def test_the_host_installs_its_own_wheel_by_hash_and_offline(fleet, cache):
    wheel = cache / "wheelhouse" / WHEEL
    lock = fleet.ssh(HOST, f"cat {LOCK}")
    assert f"--hash=sha256:{sha256(wheel)}" in lock
    assert "# installed with --require-hashes --no-index from the pushed wheelhouse." in lock
    assert fleet.ssh(HOST, f"sha256sum /opt/ml-env/wheelhouse/{WHEEL}").split()[0] == sha256(wheel)
    uv_wheel = next((cache / "wheelhouse").glob("uv-0.13.9-*.whl"))
    assert f"--hash=sha256:{sha256(uv_wheel)}" in fleet.ssh(HOST, "cat /opt/ml-env/locks/uv-0.13.9.txt")
    assert fleet.ssh(HOST, "/opt/ml-env/sglang-0.5.11/bin/python -c "
                           "'import importlib.metadata as m; print(m.version(\"sglang\"))'").strip() == "0.5.11"


def test_a_tampered_wheel_is_refused_before_the_host_changes_and_the_fix_works(fleet, cache):
    wheel = cache / "wheelhouse" / WHEEL
    genuine = sha256(wheel)
    before = host_state(fleet)
    marker = fleet.ssh(HOST, "stat -c %Y.%i /opt/ml-env/sglang-0.5.11/.sglang-fleet-lock.txt")

    # What an attacker with write access to the cache would do: same name, one module altered.
    altered = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(altered, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "sglang/version.py":
                data += b"\nimport os; os.system('touch /tmp/pwned')\n"
            dst.writestr(item, data)
    altered.replace(wheel)
    tampered = sha256(wheel)

    # In sync with its last deploy, the host installs nothing and no wheel is read: it is left as it is.
    rc, out = fleet.play("deploy.yml", "-e", f"sglang_controller_cache={cache}", *FAST)
    assert rc == 0 and f"{HOST}: in sync with its last complete deploy" in out, out
    assert recap(out, HOST)["changed"] == 0 and host_state(fleet) == before

    rc, out = deploy(fleet, cache)
    assert rc != 0, out
    text = unflow(out)
    assert f"{wheel} has sha256 {tampered}, but the lock " in text, out
    assert genuine in text.split(f"{wheel} has sha256 {tampered}, but the lock ")[1].split(" for sglang==0.5.11:")[0]
    assert (f"for sglang==0.5.11: the file was altered or corrupted, and nothing was installed from it. Delete it "
            f"(rm {wheel}) and re-run: it is downloaded again and checked against the lock.") in text, out
    assert recap(out, HOST)["changed"] == 0, out
    assert host_state(fleet) == before
    assert fleet.ssh(HOST, f"sha256sum /opt/ml-env/wheelhouse/{WHEEL}").split()[0] == genuine

    wheel.unlink()  # the fix the message gives
    rc, out = deploy(fleet, cache)
    assert rc == 0, out
    assert recap(out, HOST)["changed"] == 0, out
    assert sha256(wheel) == genuine
    assert host_state(fleet) == before
    assert fleet.ssh(HOST, "stat -c %Y.%i /opt/ml-env/sglang-0.5.11/.sglang-fleet-lock.txt") == marker
