"""The bad-input corpus (#9): every bad input is refused before its host changes, naming the variable
and the fix (three lab hosts of their own, 10.89.103.0/24, sglang-badin-*).

Most refusals happen in deploy.yml's first play, so they run in one ansible-playbook call: each case
is an inventory alias of a deployed lab host (same ansible_host) with its own bad variables, and each
alias's own failure must carry its message. The same-machine check compares only the hosts still in
the play after every other check, so the batch (where every alias is refused earlier) never trips
it; the same-machine case itself runs alone. The other cases need a play of their own: a bad model
on one host of several, a wheelhouse missing a wheel, a full disk during the venv build, a host
that goes away mid-play.

Test equipment on the hosts (as root): a model folder only root can read, a process listening on a
port, and on h200x1 a fake nvidia-smi printing the real capture of a one-H200 machine
(tests/fixtures/gpu/h200x1/).
"""

import base64
import json
import pathlib
import re
import shutil
import subprocess
import time

import pytest
import yaml
from lab_fleet import BIN, ENV, REPO, recap, unflow
from rollout_support import rollout_fleet
from wheels import sglang_wheel

pytestmark = pytest.mark.lab

PREFIX, SUBNET = "sglang-badin", "10.89.103."
FAST = ("--skip-tags", "sglang_verify")
HOSTS = ("ct129", "h200x2", "h200x1")
CT = {"model_path": "/models/Qwen3.6-27B", "tp_size": 2, "speculative_algorithm": "NEXTN",
      "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
      "mem_fraction_static": 0.88, "context_length": 131072, "disable_radix_cache": True}
BUSY_PORT = 31000
GPU_FIXTURE = REPO / "tests" / "fixtures" / "gpu" / "h200x1"
FAKE_NVIDIA_SMI = """#!/bin/sh
# Test equipment: nvidia-smi of a one-H200 machine (a real capture).
case "$*" in
  *--query-gpu*) cat /opt/fake-gpu/query-gpu-module-argv.csv ;;
  *topo*) cat /opt/fake-gpu/topo.txt ;;
  *) cat /opt/fake-gpu/nvidia-smi.txt ;;
esac
"""


def args(**changes):
    return {"sglang_args": {**CT, **changes}}


def args_without(key):
    return {"sglang_args": {k: v for k, v in CT.items() if k != key}}


# (alias, lab host it points at, variables over that host's host_vars, what its refusal must say: a
# text, or texts that must all be there)
CASES = [
    ("nl-in-arg", "ct129", args(served_model_name="qwen\nExecStartPre=+/bin/touch /tmp/pwned"),
     "nl-in-arg: sglang_args.served_model_name: the value contains a newline"),
    ("nul-in-env", "ct129",
     {"sglang_service_environment": {"SGLANG_SIM_CONFIG": "/etc/sglang-sim/config.json", "EXTRA": "a\0b"}},
     "nul-in-env: sglang_service_environment.EXTRA: the value contains a NUL byte"),
    ("cr-in-secret", "ct129", {"sglang_service_secrets": {"HF_TOKEN": "hf_canary\r"}},
     "cr-in-secret: sglang_service_secrets.HF_TOKEN: the value contains a carriage return"),
    ("nl-in-version", "ct129", {"sglang_version": "0.5.11\n"},
     ("ml_env_sglang_version (sglang_version) is '0.5.11", "': it must be a PyPI release such as 0.5.11 or "
      "0.5.13.post1")),
    ("nl-in-hardening", "ct129", {"sglang_service_unit_extra": {"LimitMEMLOCK": "infinity\nUser=root"}},
     "nl-in-hardening: sglang_service_unit_extra.LimitMEMLOCK: the value contains a newline"),
    ("bad-env-name", "ct129", {"sglang_service_environment": {"BAD-NAME": "x"}},
     "bad-env-name: sglang_service_environment: 'BAD-NAME' is not a valid environment variable name"),
    ("bad-directive", "ct129", {"sglang_service_unit_extra": {"exec start": "x"}},
     "bad-directive: sglang_service_unit_extra: 'exec start' is not a systemd [Service] directive name"),
    ("model-tilde", "ct129", args(model_path="~/models/Qwen3.6-27B"),
     "model-tilde: sglang_args.model_path '~/models/Qwen3.6-27B' is neither a folder on the host (those start "
     "with /) nor a Hugging Face repo id"),
    ("model-three-parts", "ct129", args(model_path="models/Qwen3.6/27B"),
     "sglang_args.model_path 'models/Qwen3.6/27B' is neither a folder on the host (those start with /) nor a "
     "Hugging Face repo id (owner/name of letters, digits, '.', '_' and '-'): write the absolute path (e.g. "
     "/models/Qwen3.6-27B) or the repo id (e.g. Qwen/Qwen3-8B)"),
    ("model-space", "ct129", args(model_path="Qwen/Qwen3.6 27B"),
     "model-space: sglang_args.model_path 'Qwen/Qwen3.6 27B' is neither a folder on the host"),
    ("model-unreadable", "ct129", args(model_path="/models/private-27B"),
     "model-unreadable: sglang_args.model_path /models/private-27B cannot be read by the service user sglang "
     "(sglang_service_user): /models/private-27B is drwx------ root:root; let it read the model (e.g. chmod -R "
     "o+rX /models/private-27B, or chgrp -R sglang /models/private-27B and chmod -R g+rX /models/private-27B), "
     "or set sglang_args.model_path to a folder it can read"),
    ("model-missing", "ct129", args(model_path="/models/Qwen3.6-72B"),
     "model-missing: sglang_args.model_path /models/Qwen3.6-72B has no config.json on the host. Copy the model "
     "there first, or fix the path"),
    ("model-unset", "ct129", args_without("model_path"),
     "model-unset: sglang_args.model_path is missing: set it to the model folder on the host"),
    ("expect-quoted-int", "ct129", {"sglang_expect": {"speculative_num_steps": "3", "cuda_graph": "on"}},
     "expect-quoted-int: sglang_expect.speculative_num_steps is '3', a quoted number: SGLang resolves it as a "
     "number, so the text never matches; write it without quotes (sglang_expect.speculative_num_steps: 3)"),
    ("expect-quoted-float", "ct129", {"sglang_expect": {"mem_fraction_static": "0.88"}},
     "expect-quoted-float: sglang_expect.mem_fraction_static is '0.88', a quoted number"),
    ("port-in-use", "ct129", args(port=BUSY_PORT),
     f"port-in-use: sglang_args.port {BUSY_PORT} is already in use on the host by pid "),
    ("port-range", "ct129", args(port=70000),
     "sglang_args.port is 70000: it must be a whole number from 1 to 65535"),
    ("port-quoted", "ct129", args(port="30000"),
     "sglang_args.port is '30000': it must be a whole number from 1 to 65535"),
    ("tp-over-gpus", "ct129", args(tp_size=4),
     "tp-over-gpus: these arguments need 4 GPU(s) per node (tp_size 4) but the host has 2 (declared); lower "
     "tp_size to at most 2 or fix sglang_hardware.gpu_count"),
    ("tp-quoted", "ct129", args(tp_size="2"),
     "sglang_args.tp_size is '2': it must be a whole number >= 1 (e.g. tp_size: 2, without quotes)"),
    ("tp-zero", "ct129", args(tp_size=0), "sglang_args.tp_size is 0: it must be a whole number >= 1"),
    ("mem-fraction", "ct129", args(mem_fraction_static=1.5),
     "sglang_args.mem_fraction_static is 1.5: it must be a fraction between 0 and 1 (e.g. 0.88)"),
    ("context-text", "ct129", args(context_length="long"),
     "sglang_args.context_length is 'long': it must be a whole number of tokens"),
    ("secret-in-args", "ct129", args(api_key="s3cret-value"),
     "sglang_args.api_key is a secret and would be visible in the unit file and in the process list; set it "
     "in sglang_service_secrets.SGLANG_API_KEY"),
    ("misspelled-flag", "ct129", args(speculative_num_stpes=3),
     "sglang 0.5.11 would refuse to start with these arguments (nothing was changed)"),
    ("misspelled-var", "ct129", {"sglang_service_ready_timout_s": 10},
     "unknown variable sglang_service_ready_timout_s: did you mean sglang_service_ready_timeout_s?"),
    ("wrong-type", "ct129", {"sglang_service_ready_timeout_s": "soon"},
     "argument 'sglang_service_ready_timeout_s' is of type str"),
    ("verify-type", "ct129", {"sglang_verify_min_decode_tok_s": "fast"},
     "argument 'sglang_verify_min_decode_tok_s' is of type str"),
    ("noise-min-effect", "ct129", {"sglang_verify_min_effect_pct": 0},
     "sglang_verify settings out of range: sglang_verify_min_effect_pct 0: must be a number in (0, 100)"),
    ("noise-gate-mode", "ct129", {"sglang_verify_gate_mode": "strict"},
     "value of sglang_verify_gate_mode must be one of: fixed, noise, got: strict"),
    ("bad-version", "ct129", {"sglang_version": "0.5.x"},
     "ml_env_sglang_version (sglang_version) is '0.5.x': it must be a PyPI release"),
    ("open-bind", "ct129", args(host="0.0.0.0"),
     "open-bind: sglang_args.host 0.0.0.0 serves SGLang beyond this host, and sglang_service_secrets has no "
     "SGLANG_API_KEY"),
    ("open-bind-v6", "ct129", args(host="::"),
     "or set sglang_service_allow_unauthenticated_bind: true if an open server is intended"),
    ("hw-zero-gpus", "ct129", {"sglang_hardware": {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 0}},
     "sglang_hardware: GPU declaration: gpu_count must be a positive integer, got 0"),
    ("hw-unknown-gpu", "ct129", {"sglang_hardware": {"gpu_model": "NVIDIA Z9000", "gpu_count": 2}},
     "sglang_hardware: GPU declaration: unknown gpu_model 'NVIDIA Z9000'"),
    ("gpu-contradiction", "h200x1", {"sglang_hardware": {"gpu_model": "NVIDIA H200", "gpu_count": 2}},
     "sglang_hardware declares 2x NVIDIA H200, but nvidia-smi on the host reports 1x NVIDIA H200: fix "
     "sglang_hardware (gpu_model, gpu_count) to match the host, or leave sglang_hardware out to use what "
     "nvidia-smi detects"),
    ("gpu-model-contradiction", "h200x1", {"sglang_hardware": {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 1}},
     "sglang_hardware declares 1x NVIDIA RTX A6000, but nvidia-smi on the host reports 1x NVIDIA H200"),
    # the release cannot run here (roles/sglang_compat): every covered release pins CUDA 13's runtime
    ("compat-driver-too-old", "ct129",
     {"sglang_hardware": {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "driver_version": "535.183.01"}},
     ("driver: NVIDIA driver 535.183.01 is older than CUDA 13.0 needs (>= 580.65.06", "sglang_compat_ignore: [driver]")),
    ("compat-weights-over-gpu", "ct129", args(tp_size=1, mem_fraction_static=0.5),
     ("memory_fit: weights 25.1 GiB / TP 1 = 25.1 GiB per GPU", "the weights do not fit")),
    # sglang_args written as a command line: refused in every playbook's first play (the host model)
    ("args-list", "ct129", {"sglang_args": ["--model-path", "/models/Qwen3.6-27B", "--tp-size", "2"]},
     "args-list: sglang_args is a list, not a mapping: write each SGLang flag as a key (its argparse dest: "
     "tp_size for --tp-size) with its value"),
    ("args-string", "ct129", {"sglang_args": "--model-path /models/Qwen3.6-27B --tp-size 2"},
     "args-string: sglang_args is a string, not a mapping: write each SGLang flag as a key"),
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with rollout_fleet(tmp_path_factory, PREFIX, SUBNET) as fleet:
        # Test equipment: a model only root can read, a port held by another process, and on
        # h200x1 an nvidia-smi printing a real one-H200 capture (its declaration agrees with it).
        fleet.ssh("ct129", "mkdir -p /models/private-27B && cp /models/Qwen3.6-27B/config.json /models/private-27B/"
                           " && chmod 700 /models/private-27B")
        fleet.ssh("ct129", f"setsid python3 -m http.server {BUSY_PORT} --bind 127.0.0.1 >/dev/null 2>&1 < /dev/null &")
        files = {name: (GPU_FIXTURE / name).read_bytes() for name in
                 ("query-gpu-module-argv.csv", "topo.txt", "nvidia-smi.txt")}
        files["nvidia-smi"] = FAKE_NVIDIA_SMI.encode()
        for name, data in files.items():
            dest = "/usr/local/bin/nvidia-smi" if name == "nvidia-smi" else f"/opt/fake-gpu/{name}"
            fleet.ssh("h200x1", f"mkdir -p /opt/fake-gpu && echo {base64.b64encode(data).decode()} | base64 -d > {dest}")
        fleet.ssh("h200x1", "chmod 755 /usr/local/bin/nvidia-smi")
        yield fleet


def host_state(fleet, host):
    """What must not change when a deploy is refused: the unit's bytes and the server's PID."""
    unit = fleet.ssh(host, "sha256sum /etc/systemd/system/sglang.service").split()[0]
    pid = fleet.ssh(host, "systemctl show sglang -p MainPID").strip()
    assert re.fullmatch(r"MainPID=[1-9]\d*", pid), pid
    return unit, pid


def fleet_state(fleet):
    return {host: host_state(fleet, host) for host in HOSTS}


def host_vars(fleet, host):
    return yaml.safe_load((fleet.inventory.parent / "host_vars" / f"{host}.yml").read_text())


def alias_inventory(fleet, aliases):
    """A second inventory source next to hosts.yml: `aliases` maps a name to (lab host, variables)."""
    hosts = {name: {**host_vars(fleet, base), **extra, "ansible_host": fleet.ip[base]}
             for name, (base, extra) in aliases.items()}
    path = fleet.inventory.parent / "aliases.yml"
    # JSON is YAML: control characters travel as escapes (\n, \u0000).
    path.write_text(json.dumps({"all": {"children": {"sglang_servers": {"children": {"sglang_lab": {
        "hosts": hosts}}}}}}))
    return path


def failure(out, host):
    """The host's failure(s) in the play output, unfolded."""
    blocks = re.findall(rf"^(?:fatal|failed): \[{re.escape(host)}(?: -> [^\]]+)?\](?: \(item=[^)]*\))?(?:: FAILED!)? =>"
                        r"(.*?)(?=^\S)", out + "\nEND", re.M | re.S)
    return unflow(" ".join(blocks)).replace("''", "'")


def first_play_failure(out, host):
    """The host's failure, asserted to be in deploy's first play (before the rollout starts)."""
    text = failure(out, host)
    assert text, out
    rollout = out.find("PLAY [Roll SGLang out")
    first = re.search(rf"^(?:fatal|failed): \[{re.escape(host)}[\] ]", out, re.M)
    assert rollout == -1 or first.start() < rollout, out
    return text


def test_every_bad_input_is_refused_before_its_host_changes(fleet):
    before = fleet_state(fleet)
    inventory = alias_inventory(fleet, {alias: (base, extra) for alias, base, extra, _ in CASES})
    started = time.monotonic()
    rc, out = fleet.play("deploy.yml", "-i", inventory, "-l", ",".join(alias for alias, *_ in CASES),
                         "--forks", str(len(CASES)), *FAST)
    print(f"{len(CASES)} cases refused in {time.monotonic() - started:.0f} s")
    assert rc != 0, out
    wrong = {}
    for alias, _base, _extra, message in CASES:
        text = first_play_failure(out, alias)
        if any(part not in text for part in ((message,) if isinstance(message, str) else message)):
            wrong[alias] = text
        assert recap(out, alias) == {"ok": recap(out, alias)["ok"], "changed": 0, "failed": 1, "unreachable": 0}, alias
    assert not wrong, json.dumps(wrong, indent=1)
    assert "same machine" not in out, out
    assert "s3cret-value" not in out and "hf_canary" not in out
    assert fleet_state(fleet) == before
    assert fleet.ssh("ct129", "ls /tmp/pwned 2>/dev/null; true") == ""


def test_two_inventory_names_for_one_machine_are_refused(fleet):
    before = fleet_state(fleet)
    inventory = alias_inventory(fleet, {"ct129-again": ("ct129", {})})
    rc, out = fleet.play("deploy.yml", "-i", inventory, "-l", "ct129,ct129-again", *FAST)
    assert rc != 0, out
    key = fleet.ssh("ct129", "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub").split()[1]
    for host in ("ct129", "ct129-again"):
        assert (f"{host}: ct129 and ct129-again are the same machine (SSH host key {key}, ansible_host "
                f"{fleet.ip['ct129']}): each would deploy over the other. Keep one inventory name per machine "
                "(remove the others, or fix their ansible_host).").replace(f"{host}: ct129 and ct129-again",
                f"{host}: {host} and {'ct129-again' if host == 'ct129' else 'ct129'}") in first_play_failure(out, host)
        assert recap(out, host)["changed"] == 0
    assert fleet_state(fleet) == before


def test_a_bad_model_on_one_host_of_several_leaves_the_others_deploying(fleet):
    before = fleet_state(fleet)
    path = fleet.inventory.parent / "host_vars" / "h200x2.yml"
    good = path.read_text()
    data = yaml.safe_load(good)
    path.write_text(yaml.safe_dump({**data, "sglang_args": {**data["sglang_args"], "model_path": "/models/gone"}}))
    try:
        # the whole rollout for the others (in sync and verified, they would end it at its first task)
        rc, out = fleet.play("deploy.yml", "-e", '{"sglang_rollout_batches": ["100%"]}', *FAST,
                             "-e", "sglang_release_skip_unchanged=false")
    finally:
        path.write_text(good)
    assert rc != 0, out
    assert ("h200x2: sglang_args.model_path /models/gone has no config.json on the host. Copy the model there "
            "first, or fix the path") in first_play_failure(out, "h200x2")
    assert recap(out, "h200x2")["changed"] == 0
    rollout = out.split("PLAY [Roll SGLang out", 1)[1]
    for host in ("ct129", "h200x1"):  # refused h200x2 is out of the rollout; the others go through it
        assert recap(out, host) == {"ok": recap(out, host)["ok"], "changed": 0, "failed": 0, "unreachable": 0}, out
        assert re.search(rf"^ok: \[{host}\]", rollout, re.M), out
    assert not re.search(r"^\w+: \[h200x2\]", rollout, re.M), out
    assert fleet_state(fleet) == before


def test_a_wheelhouse_missing_a_wheel_is_refused_before_the_host_changes(fleet, tmp_path):
    """The controller's wheelhouse lacks the host's sglang wheel and cannot download it (no index)."""
    before = fleet_state(fleet)
    shared = pathlib.Path.home() / ".cache" / "sglang-fleet" / "wheelhouse"  # group_vars' sglang_controller_cache
    cache = tmp_path / "cache"
    (cache / "wheelhouse").mkdir(parents=True)
    shutil.copytree(shared / "locks", cache / "wheelhouse" / "locks")
    for wheel in shared.glob("uv-*.whl"):
        shutil.copy(wheel, cache / "wheelhouse")
    (cache / "wheelhouse" / "src").symlink_to(shared / "src")
    env = {**ENV, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2"}
    p = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(fleet.inventory), "deploy.yml", "-l", "ct129",
                        "-e", f"sglang_controller_cache={cache}", "-e", "ml_env_retries=1", *FAST],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    text = first_play_failure(out, "ct129")
    assert (f"the controller wheelhouse {cache}/wheelhouse (ml_env_controller_wheelhouse) has no wheel of "
            "sglang==0.5.11 for CPython 3.11 on x86_64 (glibc 2.36), and downloading it failed after 1 attempt(s): "
            ) in text, text
    assert (f"or put the wheel in {cache}/wheelhouse yourself; then re-run (nothing on the host was changed)"
            ) in text, text
    assert recap(out, "ct129")["changed"] == 0
    assert fleet_state(fleet) == before


def test_a_full_disk_during_the_venv_build_marks_nothing_good(fleet):
    """/opt/ml-env on ct129 becomes a tmpfs holding what it held plus room for the new wheel, not for
    the venv: the compatibility check refuses 0.5.13.post1 there with the numbers; deployed anyway
    (sglang_compat_ignore: [disk]), the build runs out of space half-way."""
    before = host_state(fleet, "ct129")
    releases = fleet.ssh("ct129", "ls -l --time-style=+%s /var/lib/sglang-fleet/ /var/lib/sglang-fleet/*")
    size = sglang_wheel("0.5.13.post1").stat().st_size  # the host's copy of it fits, the venv does not
    used = int(fleet.ssh("ct129", "du -sk /opt/ml-env").split()[0])
    fleet.podman("exec", "--privileged", f"{PREFIX}-ct129", "sh", "-ec",
           f"cp -a /opt/ml-env /opt/ml-env.full && mount -t tmpfs -o size={used + size // 1024 + 4096}k,mode=755 "
           "tmpfs /opt/ml-env && cp -a /opt/ml-env.full/. /opt/ml-env/ && rm -rf /opt/ml-env.full")
    try:
        # the compatibility check sees the filesystem is too small and stops the host before any change
        rc, refused = fleet.play("deploy.yml", "-l", "ct129", "-e", "sglang_version=0.5.13.post1", *FAST)
        refused_state = host_state(fleet, "ct129")
        # told to go on anyway (the estimate could be wrong, or something else fills the disk meanwhile):
        # the install itself runs out of space
        rc2, out = fleet.play("deploy.yml", "-l", "ct129", "-e", "sglang_version=0.5.13.post1", "-e",
                              '{"sglang_compat_ignore": ["disk"]}', *FAST)
        left = fleet.ssh("ct129", "ls /opt/ml-env; readlink /opt/ml-env/current")
    finally:
        fleet.podman("exec", "--privileged", f"{PREFIX}-ct129", "umount", "/opt/ml-env")
    assert rc != 0, refused
    text = first_play_failure(refused, "ct129")
    assert "ct129: sglang 0.5.13.post1: " in text and "This host cannot run sglang 0.5.13.post1; nothing on it " \
        "was changed: disk: " in text, text
    assert re.search(r"MiB free on /opt/ml-env \(holds /opt/ml-env\), about \d+ MiB needed", text), text
    assert "sglang_compat_ignore: [disk]" in text, text
    assert refused_state == before
    assert rc2 != 0, out
    text = failure(out, "ct129")
    # where the space runs out (the install, or the completion marker after it) varies with the wheel
    assert re.search(r'Building /opt/ml-env/sglang-0\.5\.13\.post1 with uv failed in "(Install SGLang into the venv|'
                     r'Check every file the installer recorded is in the venv|Mark the environment as complete)": '
                     r'.*(No space left on device|installed files missing)', text), text
    assert ("The half-built venv was removed and nothing else changed; the running service still uses its "
            "previous environment. Fix the cause and re-run.") in text, text
    assert "not rolled back: this run did not change the service" in out, out
    assert "sglang-0.5.13.post1" not in left.split() and left.split()[-1] == "/opt/ml-env/sglang-0.5.11", left
    assert fleet.ssh("ct129", "ls -l --time-style=+%s /var/lib/sglang-fleet/ /var/lib/sglang-fleet/*") == releases
    assert host_state(fleet, "ct129") == before


def test_a_host_unreachable_mid_play_leaves_the_others_converging(fleet):
    """h200x1's container stops as the rollout starts; ct129 and h200x2 go through it. (The rollout
    stops at the first failed host by default, sglang_rollout_max_fail_percentage 0: 50 lets the
    rest of the batch go on, which is what this case is about.) Last here: h200x1 stays down."""
    before = {host: host_state(fleet, host) for host in ("ct129", "h200x2")}
    argv = [str(BIN / "ansible-playbook"), "-i", str(fleet.inventory), "-e", f"sglang_report_dir={fleet.reports}",
            "deploy.yml", "-e",
            '{"sglang_rollout_batches": ["100%"], "sglang_rollout_max_fail_percentage": 50}', *FAST,
            "-e", "sglang_release_skip_unchanged=false"]  # the whole rollout (in sync, it would not reach the hosts)
    lines, stopped = [], False
    with subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as play:
        for line in play.stdout:
            lines.append(line)
            if line.startswith("PLAY [Roll SGLang out") and not stopped:
                fleet.podman("stop", "-t", "0", f"{PREFIX}-h200x1")
                stopped = True
        rc = play.wait(timeout=300)
    out = "".join(lines)
    assert stopped and rc == 4, out  # 4: a host was unreachable
    counts = recap(out, "h200x1")
    assert (counts["changed"], counts["unreachable"], counts["failed"]) == (0, 1, 0), out
    assert re.search(r"^fatal: \[h200x1\]: UNREACHABLE! => .*(?:\n\s+.*)*(?:Failed to connect to the host via ssh|"
                     r"Data could not be sent to remote host \"10\.89\.103\.13\")",
                     out, re.M), out
    for host in ("ct129", "h200x2"):
        counts = recap(out, host)
        assert (counts["changed"], counts["unreachable"], counts["failed"]) == (0, 0, 0), out
        assert f"{host}: release " in out, out  # went all the way to the release record
    assert {host: host_state(fleet, host) for host in ("ct129", "h200x2")} == before
