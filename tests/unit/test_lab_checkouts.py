"""lab/lab.py with a second checkout of the project: `up` says at once that the running containers
belong to the other checkout's fleet (they authorize its lab key), and what to do, instead of
waiting for an SSH answer that cannot come. lab.py's logic only: podman's answers are canned.

And the lab hub (lab/hub/hub.py): `up` on a port another checkout's hub (or another program) holds
says whose it is and how to free it, not "front.py did not start". Real listeners on 127.0.0.1."""

import importlib.util
import json
import pathlib
import subprocess
import sys

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


# -- the lab hub's port --------------------------------------------------------------------------------

# A listener on 127.0.0.1 (the port after --port, else any free one) that prints its port and waits.
HOLDER = """import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0))
s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(120)
"""


@pytest.fixture
def hub():
    spec = importlib.util.spec_from_file_location("lab_hub", REPO / "lab" / "hub" / "hub.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def listen():
    """listen(script path, *args) -> (process, port): HOLDER run as that file, stopped at the end."""
    procs = []

    def start(path, *args):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HOLDER)
        proc = subprocess.Popen([sys.executable, str(path), *args], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc, int(proc.stdout.readline())

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


BESIDE = ("or start this checkout's hub beside it on a port of its own: `make lab-hub LAB_HUB_PORT=<port>`, and "
          "give the playbooks `-e sglang_model_endpoint=http://127.0.0.1:<port>`.")


def test_a_port_held_by_another_checkout_s_hub_names_it_and_how_to_stop_it(hub, listen, tmp_path):
    other, state = tmp_path / "other", tmp_path / "other" / ".lab" / "hub"
    front, port = listen(other / "lab" / "hub" / "front.py", "--port", "0", "--port-file", f"{state}/front.port")
    state.mkdir(parents=True)
    (state / "hub.json").write_text(json.dumps({"pids": {"olah": 1, "front": front.pid}}))
    held = (f"127.0.0.1:{port} is held by the lab hub of another checkout, {other} (pid {front.pid}, state in "
            f"{state}), so this checkout's hub cannot listen there.\nEither stop that hub: ")
    assert hub.port_taken(port) == (
        held + f"`{sys.executable} {other}/lab/hub/hub.py down --dir {state}`, " + BESIDE)
    # a hub its state no longer names (hub.json rewritten, or deleted): `down` there would not stop it
    (state / "hub.json").write_text(json.dumps({"pids": {"olah": 1, "front": 1}}))
    assert hub.port_taken(port) == held + f"`kill {front.pid}` (its {state}/hub.json does not name it), " + BESIDE


def test_a_port_held_by_another_program_names_its_pid_or_how_to_find_it(hub, listen, tmp_path, monkeypatch):
    proc, port = listen(tmp_path / "holder.py")
    assert hub.port_taken(port) == (
        f"127.0.0.1:{port} is in use by pid {proc.pid} ({sys.executable} {tmp_path}/holder.py), not a lab hub, so "
        "this checkout's hub cannot listen there.\nEither stop that process, " + BESIDE)
    monkeypatch.setattr(hub, "listeners", lambda port: {})  # another user's: /proc/<pid>/fd is closed to us
    assert hub.port_taken(port) == (
        f"127.0.0.1:{port} is in use by a process this user cannot see (another user's: `sudo ss -ltnp "
        f"'sport = :{port}'` names it), so this checkout's hub cannot listen there.\nEither stop that process, "
        + BESIDE)
    proc.kill()
    proc.wait()
    assert hub.port_taken(port) is None


def test_hub_up_refuses_a_held_port_before_building_anything(hub, listen, tmp_path, monkeypatch):
    proc, port = listen(tmp_path / "holder.py")

    def must_not_run(*args):
        raise AssertionError("up went on past the port check")

    for name in ("ensure_venv", "build_repos", "start"):
        monkeypatch.setattr(hub, name, must_not_run)
    with pytest.raises(SystemExit) as refused:
        hub.up(str(tmp_path / "hub"), port, 8)
    assert refused.value.code.startswith(f"127.0.0.1:{port} is in use by pid {proc.pid} (")
    assert not (tmp_path / "hub").exists() and proc.poll() is None


def test_hub_up_names_a_holder_that_took_the_port_while_it_built(hub, listen, tmp_path, monkeypatch):
    """The check before building cannot hold the port for front.py: its failure is read the same way."""
    port = hub.free_port()
    taken = []

    def build_repos(mirrors, bulk_mb):  # meanwhile, another program takes the port
        taken.append(listen(tmp_path / "holder.py", "--port", str(port))[0])
        return {}

    monkeypatch.setattr(hub, "ensure_venv", lambda: None)
    monkeypatch.setattr(hub, "build_repos", build_repos)
    with pytest.raises(SystemExit) as refused:
        hub.up(str(tmp_path / "hub"), port, 8)  # the real front.py, which cannot bind
    (proc,) = taken
    assert refused.value.code.startswith(f"127.0.0.1:{port} is in use by pid {proc.pid} (")
    assert "Address already in use" in (tmp_path / "hub" / "logs" / "front.log").read_text()


def test_a_host_declaring_lab_image_starts_from_it_and_the_others_from_the_lab_image(lab, tmp_path):
    """tests/lab/lab_fleet.py starts a shared fleet's hosts from their snapshot through `lab_image`."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"lab": {"hosts": {
        "ct129": {"ansible_host": "10.89.97.11", "lab_image": "localhost/sglang-fleet-snapshot:run-key-ct129"},
        "h200x1": {"ansible_host": "10.89.97.12"}}}}}}))
    assert lab.host_images(inventory) == {"ct129": "localhost/sglang-fleet-snapshot:run-key-ct129"}
