"""lab/lab.py with a second checkout of the project: `up` says at once that the running containers
belong to the other checkout's fleet (they authorize its lab key), and what to do, instead of
waiting for an SSH answer that cannot come. lab.py's logic only: podman's answers are canned."""

import importlib.util
import json
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
INVENTORY = "inventories/lab/hosts.yml"


@pytest.fixture
def lab():
    spec = importlib.util.spec_from_file_location("lab_tool", REPO / "lab" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def other_checkout(tmp_path):
    """A checkout elsewhere, with its own lab key; returns (checkout, its public key file)."""
    pub = tmp_path / "other" / ".lab" / "ssh" / "id_ed25519.pub"
    pub.parent.mkdir(parents=True)
    pub.write_text("ssh-ed25519 AAAAother sglang-fleet-lab\n")
    return tmp_path / "other", pub


def inspect_json(key_source, labels=None):
    """What `podman container inspect` says of a running lab host (the fields lab.py reads)."""
    return json.dumps([{
        "State": {"Status": "running", "Pid": 0},
        "Image": "0123abcd",
        "NetworkSettings": {"Networks": {"sglang-lab-10-89-77": {"IPAddress": "10.89.77.11"}}},
        "Config": {"Labels": {"org.sglang-fleet.lab.ip": "10.89.77.11", **(labels or {})}},
        "Mounts": [{"Destination": "/run", "Source": "tmpfs"},
                   {"Destination": "/etc/ssh/lab/authorized_keys", "Source": str(key_source)}],
    }])


def test_container_info_reads_the_key_mount_and_label(lab, monkeypatch):
    answer = inspect_json("/elsewhere/.lab/ssh/id_ed25519.pub", {"org.sglang-fleet.lab.key": "abc123"})
    monkeypatch.setattr(lab, "podman", lambda *a, **k: subprocess.CompletedProcess(a, 0, answer, ""))
    assert lab.container_info("sglang-lab-ct129") == {
        "state": "running", "ip": "10.89.77.11", "image": "0123abcd",
        "key_source": "/elsewhere/.lab/ssh/id_ed25519.pub", "key_id": "abc123",
    }


def test_other_checkouts_lists_only_existing_foreign_keys(lab, tmp_path):
    checkout, pub = other_checkout(tmp_path)
    mine = {"key_source": str(lab.SSH_KEY.with_suffix(".pub"))}
    infos = {
        "sglang-lab-ct129": {"key_source": str(pub)},
        "sglang-lab-h200x1": {"key_source": str(pub)},
        "sglang-lab-h200x2": mine,
        "sglang-lab-gone": {"key_source": str(tmp_path / "deleted" / ".lab" / "ssh" / "id_ed25519.pub")},
        "sglang-lab-missing": None,
    }
    assert lab.other_checkouts(infos) == {str(checkout): ["sglang-lab-ct129", "sglang-lab-h200x1"]}
    lab.refuse_other_checkouts({}, "sglang-lab", INVENTORY)  # nothing foreign: no error


def test_up_refuses_at_once_before_building_or_touching_anything(lab, tmp_path, monkeypatch, capsys):
    checkout, pub = other_checkout(tmp_path)
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(lab, "setup_podman", lambda: None)
    monkeypatch.setattr(lab, "lab_containers", lambda netname: [])
    monkeypatch.setattr(lab, "container_info", lambda name: {"state": "running", "key_source": str(pub)})

    def must_not_run(*args, **kwargs):
        raise AssertionError("up went on past the ownership check")

    for name in ("ensure_image", "ensure_key", "ensure_network", "remove", "run_container", "wait_port"):
        monkeypatch.setattr(lab, name, must_not_run)
    assert lab.main(["up", "--inventory", INVENTORY]) == 1
    assert capsys.readouterr().err == (
        f"lab.py: error: sglang-lab-cpu1, sglang-lab-ct129, sglang-lab-h200x1, sglang-lab-h200x1b, sglang-lab-h200x1s, sglang-lab-h200x2, sglang-lab-router are "
        f"part of the lab fleet of another "
        f"checkout, {checkout}: only its lab key is accepted there, so SSH from this checkout would be refused\n"
        f"Either remove that fleet in {checkout} (`make lab-down` there for the default fleet; this one: "
        f"`.venv/bin/python lab/lab.py down --inventory {INVENTORY} --prefix sglang-lab`), or run this checkout's "
        "fleet beside it, with a prefix and an inventory on a /24 of their own: "
        "`lab.py up --prefix <another prefix> --inventory <your copy>` (lab/README.md, network table).\n"
    )


def test_new_containers_are_labelled_with_the_key_they_accept(lab, tmp_path, monkeypatch):
    pub = tmp_path / "id_ed25519.pub"
    pub.write_text("ssh-ed25519 AAAAmine sglang-fleet-lab\n")
    monkeypatch.setattr(lab, "SSH_KEY", tmp_path / "id_ed25519")
    calls = []
    monkeypatch.setattr(lab, "podman", lambda *a, **k: calls.append(a))
    lab.run_container("sglang-x-ct129", "ct129", "10.89.120.11", "sglang-x-10-89-120", "sglang-x")
    argv = calls[0]
    assert f"{pub}:/etc/ssh/lab/authorized_keys:ro" in argv
    assert "org.sglang-fleet.lab.key=02b544dbd1d5f58c" in argv  # sha256 of the public key file, 16 hex digits


class Created(Exception):
    """Stops `up` where it creates the first container (what comes after needs real hosts)."""


@pytest.mark.parametrize("key_source, key_label, why", [
    ("{tmp}/deleted/.lab/ssh/id_ed25519.pub", "", "it accepts the key of {tmp}/deleted/.lab/ssh/id_ed25519.pub, "
                                                  "which no longer exists"),
    ("{mine}", "0123456789abcdef", "it accepts an older lab key of this checkout"),
])
def test_up_recreates_containers_no_one_else_can_use(lab, tmp_path, monkeypatch, capsys, key_source, key_label, why):
    pub = tmp_path / "id_ed25519.pub"
    pub.write_text("ssh-ed25519 AAAAmine sglang-fleet-lab\n")
    monkeypatch.setattr(lab, "SSH_KEY", tmp_path / "id_ed25519")
    source = key_source.format(tmp=tmp_path, mine=pub)
    info = {"state": "running", "ip": "10.89.77.11", "image": "sha256:img", "key_source": source, "key_id": key_label}
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(lab, "setup_podman", lambda: None)
    monkeypatch.setattr(lab, "lab_containers", lambda netname: [])
    monkeypatch.setattr(lab, "container_info", lambda name: info)
    monkeypatch.setattr(lab, "ensure_image", lambda build: None)
    monkeypatch.setattr(lab, "ensure_key", lambda: None)
    monkeypatch.setattr(lab, "ensure_network", lambda *a: False)
    monkeypatch.setattr(lab, "podman", lambda *a, **k: subprocess.CompletedProcess(a, 0, "sha256:img\n", ""))
    removed = []
    monkeypatch.setattr(lab, "remove", removed.append)

    def created(name, *args):
        raise Created(name)

    monkeypatch.setattr(lab, "run_container", created)
    with pytest.raises(Created, match="sglang-lab-ct129"):
        lab.main(["up", "--inventory", INVENTORY])
    assert removed == ["sglang-lab-ct129"]
    assert capsys.readouterr().out == f"lab: removed sglang-lab-ct129 ({why.format(tmp=tmp_path)}); creating it again\n"
