"""The model as part of a host's desired state, end to end (10.89.112.0/24, containers sglang-model-*).

Its own lab hub (lab/hub: olah, a real Hugging Face mirror, behind the thin front that answers a
gated, unknown or missing revision as the hub does) serves sglang-lab/bulk-model at two commits
(~268 MB of shards; the second commit changes one shard and config.json). One simulator host,
h200x1s (inventories/lab/host_vars/h200x1s.yml), gets it through deploy.yml: fetched once by the
real huggingface_hub client into a controller cache of this module's own, checked against its lock,
staged over the host's real SSH with rsync, checked on the host, then the restart. In order: the
first staging, a re-run that sends 0 bytes, bad input refused before the host changes (the service
and the model files as they were), the hub token never printed, an interrupted copy resumed, the
new revision (its shared shards linked, not sent) and the rollback to the first, drift by sizes and
mtimes and by hash and its repair, and a damaged controller copy stopping the host before its restart.
Needs podman and the lab image (make lab-image).
"""
import json
import re

import pytest
from lab_fleet import LIGHT_VERIFY, lab_fleet, recap, unflow
from lab_hub import lab_hub

pytestmark = pytest.mark.lab

HOST = "h200x1s"
REPO_ID = "sglang-lab/bulk-model"
GLOBS = ["*.json", "*.safetensors"]
ROOT = "/var/lib/sglang-fleet/models/sglang-lab--bulk-model"
# what a refused run must leave as it was: the service's process, its unit, every model file
SERVICE = "systemctl show sglang -p MainPID; sha256sum /etc/systemd/system/sglang.service"
STATE = SERVICE + "; find /var/lib/sglang-fleet/models -type f -printf '%P %s %T@\\n' | sort"
STAGED = re.compile(r"h200x1s: \S+: (\d+) files, ([\d.]+) MB sent in")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with lab_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, hub):
    tmp = tmp_path_factory.mktemp("model")
    extra = {"sglang_model_endpoint": hub["endpoint"], "sglang_model_cache_dir": str(tmp / "cache")}
    with lab_fleet(tmp, "sglang-model", "10.89.112.", hosts=[HOST], group_vars=LIGHT_VERIFY, extra_vars=extra) as fleet:
        fleet.cache = tmp / "cache"
        rc, out = fleet.play("lab/prepare.yml")
        assert rc == 0, out
        rc, fleet.first = fleet.play("deploy.yml")
        assert rc == 0, fleet.first[-20000:]
        yield fleet


def revisions(hub):
    return hub["repos"][REPO_ID]


def model(revision, **more):
    return json.dumps({"sglang_model": {"repo": REPO_ID, "revision": revision, "files": GLOBS, **more}})


def staged(out):
    """(files, MB) the staging said it sent."""
    m = STAGED.search(unflow(out))
    assert m, out[-20000:]
    return int(m.group(1)), float(m.group(2))


def selected_bytes(hub, revision):
    return sum(f["size"] for path, f in hub["files"][REPO_ID][revision].items() if path.endswith((".json", ".safetensors")))


def serving(fleet):
    """The revision folder the service's unit starts the server with."""
    m = re.search(r"--model-path (\S+)", fleet.ssh(HOST, "grep -e --model-path /etc/systemd/system/sglang.service"))
    return m.group(1)


def current_release(fleet):
    return json.loads(fleet.ssh(HOST, "cat /var/lib/sglang-fleet/releases/$(cat /var/lib/sglang-fleet/current)/release.json"))


def test_the_first_deploy_fetches_locks_stages_and_serves_the_revision(fleet, hub):
    rev1 = revisions(hub)[0]
    files, mb = staged(fleet.first)
    assert (files, mb) == (6, round(selected_bytes(hub, rev1) / 1e6, 1))
    assert serving(fleet) == f"{ROOT}/{rev1}"
    assert current_release(fleet)["model"] == {"repo": REPO_ID, "revision": rev1, "source": None}
    marker = json.loads(fleet.ssh(HOST, f"cat {ROOT}/{rev1}/.sglang-fleet-model.json"))
    assert (marker["revision"], marker["checked"], len(marker["files"])) == (rev1, "sizes", 6)
    # the lock in the inventory (committed) agreed with the hub and the bytes: it was not rewritten
    lock = json.loads((fleet.inventory.parent / "model-locks" / "sglang-lab--bulk-model" / f"{rev1}.json").read_text())
    assert {f["path"]: f["sha256"] for f in lock["files"]} == \
        {p: f["sha256"] for p, f in hub["files"][REPO_ID][rev1].items() if p.endswith((".json", ".safetensors"))}


def test_a_staged_file_drift_reports_gets_the_whole_deploy_which_sends_it_again(fleet, hub):
    """README: "a host that drift.yml reports as drifted is never skipped". A weight file one byte short:
    drift.yml reports it, and a plain deploy.yml takes the host out of sync for it (not "nothing to
    do"), stages the file again and is in sync after."""
    rev1 = revisions(hub)[0]
    shard = "model-00002-of-00004.safetensors"
    size = hub["files"][REPO_ID][rev1][shard]["size"]
    fleet.ssh(HOST, f"truncate -s -1 {ROOT}/{rev1}/{shard}")
    rc, out = fleet.play("drift.yml")
    finding = f"model file {shard}: desired {size} bytes, actual {size - 1} bytes"
    assert rc != 0 and f"h200x1s: {finding}" in unflow(out), out[-20000:]
    rc, out = fleet.play("deploy.yml")
    assert rc == 0 and f"h200x1s: the whole deploy: drift: {finding}" in unflow(out), out[-20000:]
    assert staged(out)[0] == 1
    assert fleet.ssh(HOST, f"stat -c %s {ROOT}/{rev1}/{shard}").strip() == str(size)
    rc, out = fleet.play("deploy.yml")
    assert rc == 0 and "h200x1s: in sync with its last complete deploy: nothing to do" in unflow(out), out[-20000:]


def test_a_host_that_holds_the_revision_is_sent_0_bytes(fleet):
    pid = fleet.ssh(HOST, "systemctl show sglang -p MainPID")
    rc, out = fleet.play("deploy.yml", "-e", "sglang_release_skip_unchanged=false")
    assert rc == 0, out[-20000:]
    assert staged(out) == (0, 0.0)
    assert fleet.ssh(HOST, "systemctl show sglang -p MainPID") == pid   # nothing changed: no restart


def test_bad_input_is_refused_before_the_host_changes(fleet, hub):
    rev1, rev2 = revisions(hub)
    endpoint = hub["endpoint"]
    lock_file = fleet.inventory.parent / "model-locks" / "sglang-lab--bulk-model" / f"{rev1}.json"
    good_lock = lock_file.read_text()
    bad_lock = json.loads(good_lock)
    bad_lock["files"][0]["sha256"] = "0" * 64
    gated = hub["repos"]["sglang-lab/gated-model"][0]
    cases = [
        ("unknown repo", json.dumps({"sglang_model": {"repo": "sglang-lab/no-such-model", "revision": rev1}}),
         f"sglang-lab/no-such-model: no such repository on {endpoint}"),
        ("unknown revision", model("f" * 40), f"{REPO_ID} on {endpoint} has no revision {'f' * 40}"),
        ("a branch", model("main"), f"pin the commit it resolves to now: revision: {rev2}"),
        ("gated without a token", json.dumps({"sglang_model": {"repo": "sglang-lab/gated-model", "revision": gated}}),
         "sglang-lab/gated-model on " + endpoint + " is gated: it needs a token with access; put one in sglang_model_hf_token"),
        ("globs matching nothing", model(rev1, files=["*.gguf"]), "sglang_model.files ['*.gguf'] match no file of"),
        ("a lock that disagrees", model(rev1), f"the lock of {REPO_ID}@{rev1} disagrees with {endpoint}"),
        ("a disk too small", json.dumps({**json.loads(model(rev2)), "sglang_model_disk_reserve_gb": 10 ** 9}),
         "free space there or set sglang_model_root to a larger disk"),
    ]
    before = fleet.ssh(HOST, STATE)
    for name, extra, message in cases:
        if name == "a lock that disagrees":
            lock_file.write_text(json.dumps(bad_lock))
        try:
            rc, out = fleet.play("deploy.yml", "-e", extra)
        finally:
            lock_file.write_text(good_lock)
        assert rc != 0 and message in unflow(out), (name, out[-20000:])
        # the one change: a revision without a lock gets one written on the controller (its fetch succeeded)
        assert recap(out, HOST)["changed"] == (1 if name == "a disk too small" else 0), name
        assert fleet.ssh(HOST, STATE) == before, name


def test_the_hub_token_reaches_the_hub_and_is_never_printed(fleet, hub):
    """The gated repository through the whole check play at -vvv, the token as a vaulted variable would
    give it (sglang_model_hf_token); --check: nothing on the host changes."""
    gated = hub["repos"]["sglang-lab/gated-model"][0]
    extra = {"sglang_model": {"repo": "sglang-lab/gated-model", "revision": gated}, "sglang_model_hf_token": hub["token"]}
    rc, out = fleet.play("deploy.yml", "--check", "-vvv", "-e", json.dumps(extra))
    assert f"h200x1s: sglang-lab/gated-model@{gated}: 3 files" in unflow(out), out[:30000]
    assert hub["token"] not in out
    leaked = [p for p in fleet.reports.rglob("*") if p.is_file() and hub["token"] in p.read_text(errors="replace")]
    assert leaked == []


def test_an_interrupted_copy_resumes_and_the_new_revision_links_what_it_shares(fleet, hub):
    rev1, rev2 = revisions(hub)
    before = fleet.ssh(HOST, SERVICE)
    rc, out = fleet.play("deploy.yml", "-e", model(rev2), "-e", "sglang_model_stage_bwlimit=4M",
                         "-e", "sglang_model_stage_timeout_s=4")
    assert rc != 0 and "the next run resumes it" in unflow(out), out[-20000:]
    assert fleet.ssh(HOST, SERVICE) == before   # the old release serves on, untouched
    partial = int(fleet.ssh(HOST, f"du -sb {ROOT}/{rev2}/.rsync-partial | cut -f1"))
    assert partial > 0

    rc, out = fleet.play("deploy.yml", "-e", model(rev2))
    assert rc == 0, out[-20000:]
    changed = {p for p, f in hub["files"][REPO_ID][rev2].items() if hub["files"][REPO_ID][rev1].get(p) != f}
    assert changed == {"config.json", "model-00002-of-00004.safetensors"}
    changed_mb = sum(hub["files"][REPO_ID][rev2][p]["size"] for p in changed) / 1e6
    files, mb = staged(out)
    assert files >= 1 and mb < changed_mb - partial / 1e6 + 1, (mb, changed_mb, partial)   # the rest, not again
    assert serving(fleet) == f"{ROOT}/{rev2}" and current_release(fleet)["model"]["revision"] == rev2
    inodes = fleet.ssh(HOST, f"stat -c %i {ROOT}/{rev1}/model-00001-of-00004.safetensors "
                             f"{ROOT}/{rev2}/model-00001-of-00004.safetensors").split()
    assert inodes[0] == inodes[1]   # linked from the revision the host had, not sent again


def test_a_rollback_serves_the_revision_the_release_ran_with(fleet, hub):
    rev1, _ = revisions(hub)
    rc, out = fleet.play("rollback.yml", "-l", HOST)
    assert rc == 0, out[-20000:]
    assert serving(fleet) == f"{ROOT}/{rev1}" and current_release(fleet)["model"]["revision"] == rev1


def test_drift_finds_changed_files_and_a_deep_deploy_repairs_them(fleet, hub):
    rev1, _ = revisions(hub)
    folder = f"{ROOT}/{rev1}"
    shard = "model-00003-of-00004.safetensors"
    # a byte changed in place, size and mtime kept (only a hash sees it); config.json touched
    fleet.ssh(HOST, f"t=$(stat -c %Y {folder}/{shard}); printf 'X' | dd of={folder}/{shard} bs=1 seek=4096 conv=notrunc "
                    f"status=none; touch -d @$t {folder}/{shard}; touch {folder}/config.json")
    rc, out = fleet.play("drift.yml", "-e", model(rev1))
    text = unflow(out)
    assert rc != 0 and "h200x1s: model file config.json: desired as checked when staged, actual modified since" in text
    assert shard not in text   # sizes and mtimes cannot see it
    rc, out = fleet.play("drift.yml", "-e", model(rev1), "-e", "sglang_model_verify=deep")
    assert rc != 0 and f"h200x1s: model file {shard}: desired {hub['files'][REPO_ID][rev1][shard]['sha256']}" in unflow(out)

    rc, out = fleet.play("deploy.yml", "-e", model(rev1), "-e", "sglang_release_skip_unchanged=false",
                         "-e", "sglang_model_verify=deep")
    assert rc == 0, out[-20000:]
    rc, out = fleet.play("drift.yml", "-e", model(rev1), "-e", "sglang_model_verify=deep")
    assert rc == 0 and "drift: 1 host in sync, 0 drifted" in unflow(out), out[-20000:]


def test_a_damaged_controller_copy_stops_the_host_before_its_restart(fleet, hub):
    rev1, _ = revisions(hub)
    shard = "model-00004-of-00004.safetensors"
    cached = fleet.cache / "sglang-lab--bulk-model" / rev1 / shard
    data = bytearray(cached.read_bytes())
    data[8192] ^= 0xFF
    cached.write_bytes(bytes(data))   # the same size: the fetch's quick look cannot see it
    try:
        before = fleet.ssh(HOST, SERVICE)
        rc, out = fleet.play("deploy.yml", "-e", model(rev1), "-e", "sglang_release_skip_unchanged=false",
                             "-e", "sglang_model_verify=deep")
        text = unflow(out)
        expected = hub["files"][REPO_ID][rev1][shard]["sha256"]
        assert rc != 0 and "sent twice" in text and f"{shard}: sha256 " in text and expected in text, out[-20000:]
        assert "The service was not restarted" in text
        assert fleet.ssh(HOST, SERVICE) == before
    finally:
        cached.unlink()   # the next fetch downloads it again
