"""plugins/module_utils/model/stage.py and fetch.py's source folders, with the real rsync: its
remote side reached through a stand-in for ssh that runs the receiving rsync here (the lab tests
stage over real SSH to lab hosts)."""
import hashlib
import os
import shutil
import subprocess
import time

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.model import fetch, lock, spec, stage

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is not installed (lab/install-deps.sh)")


@pytest.fixture
def local_ssh(tmp_path):
    """An `ssh` for rsync's -e that drops the host name and runs the remote command here."""
    script = tmp_path / "ssh-here"
    script.write_text('#!/bin/sh\nshift\nexec "$@"\n')
    script.chmod(0o755)
    return str(script)


def make_source(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        out.append({"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    stage.set_mtimes(str(folder), out)
    return out


def test_a_first_staging_sends_everything_and_a_re_run_sends_nothing(tmp_path, local_ssh):
    files = make_source(tmp_path / "src", {"config.json": b"{}", "w/model.safetensors": os.urandom(300_000)})
    dest = tmp_path / "host" / "models" / "org--m" / "rev1"
    first = stage.stage(str(tmp_path / "src"), str(dest), [f["path"] for f in files], "host", local_ssh)
    assert first["rc"] == 0 and first["files_transferred"] == 2 and first["literal_bytes"] == 300_002
    assert (dest / "w" / "model.safetensors").read_bytes() == (tmp_path / "src" / "w" / "model.safetensors").read_bytes()
    assert os.stat(dest / "config.json").st_mtime == stage.mtime_of(files[0]["sha256"])
    again = stage.stage(str(tmp_path / "src"), str(dest), [f["path"] for f in files], "host", local_ssh)
    assert (again["rc"], again["files_transferred"], again["literal_bytes"]) == (0, 0, 0)


def test_a_new_revision_links_the_files_it_shares_with_one_on_the_host(tmp_path, local_ssh):
    shard = os.urandom(200_000)
    old = make_source(tmp_path / "r1", {"config.json": b'{"v": 1}', "shard": shard})
    new = make_source(tmp_path / "r2", {"config.json": b'{"v": 2}', "shard": shard})
    root = tmp_path / "host" / "org--m"
    stage.stage(str(tmp_path / "r1"), str(root / "r1"), [f["path"] for f in old], "host", local_ssh)
    second = stage.stage(str(tmp_path / "r2"), str(root / "r2"), [f["path"] for f in new], "host", local_ssh,
                         link_dest=[str(root / "r1")])
    assert second["rc"] == 0 and second["literal_bytes"] == len(b'{"v": 2}')   # the shard is linked, not sent
    assert os.stat(root / "r2" / "shard").st_ino == os.stat(root / "r1" / "shard").st_ino


def test_an_interrupted_file_is_resumed_not_sent_again(tmp_path, local_ssh):
    data = os.urandom(2_000_000)
    make_source(tmp_path / "src", {"big": data})
    dest = tmp_path / "host" / "rev"
    partial = dest / stage.PARTIAL_DIR
    partial.mkdir(parents=True)
    (partial / "big").write_bytes(data[:1_500_000])   # what a killed rsync leaves (--partial-dir)
    done = stage.stage(str(tmp_path / "src"), str(dest), ["big"], "host", local_ssh)
    assert done["rc"] == 0 and (dest / "big").read_bytes() == data
    assert done["literal_bytes"] < 1_000_000, done   # only the rest, the partial file is rsync's basis
    assert not (partial / "big").exists()


def test_the_bandwidth_limit_reaches_rsync(tmp_path, local_ssh):
    argv = stage.rsync_argv("/src", "/dest", "fleet@h", "/tmp/list", stage.ssh_command(2222, "~/k", "-o A=b"),
                            bwlimit="100M", become=True, link_dest=["/old"])
    assert "--bwlimit=100M" in argv and "--rsync-path=sudo -n rsync" in argv and "--link-dest=/old" in argv
    assert argv[-2:] == ["/src/", "fleet@h:/dest/"]
    assert argv[argv.index("-e") + 1].startswith("ssh -o BatchMode=yes -p 2222 -i ") and argv[argv.index("-e") + 1].endswith("-o A=b")


def test_a_source_folder_is_locked_and_a_changed_file_under_the_same_label_is_refused(tmp_path):
    src = tmp_path / "ft"
    make_source(src, {"config.json": b"{}", "model.safetensors": b"x" * 64, "notes.txt": b"n"})
    model = spec.parse({"source": str(src), "revision": "v1", "files": ["*.json", "*.safetensors"]})
    got = fetch.fetch(model, str(tmp_path / "locks"), str(tmp_path / "cache"))
    assert got["lock_written"] and [f["path"] for f in got["lock"]["files"]] == ["config.json", "model.safetensors"]
    assert lock.read(got["lock_file"]) == got["lock"] and got["folder"] == str(src)
    assert got["model_facts"]["weight_bytes"] == 64
    assert not fetch.fetch(model, str(tmp_path / "locks"), str(tmp_path / "cache"))["lock_written"]
    (src / "model.safetensors").write_bytes(b"y" * 64)
    with pytest.raises(fetch.FetchError) as err:
        fetch.fetch(model, str(tmp_path / "locks"), str(tmp_path / "cache"))
    assert "changed since revision v1 was locked" in str(err.value) and "model.safetensors: sha256" in str(err.value)
    assert "new sglang_model.revision label" in str(err.value)


def test_globs_that_match_nothing_are_refused(tmp_path):
    make_source(tmp_path / "ft", {"a.bin": b"1"})
    model = spec.parse({"source": str(tmp_path / "ft"), "revision": "v1", "files": ["*.safetensors"]})
    with pytest.raises(fetch.FetchError, match=r"match no file under"):
        fetch.fetch(model, str(tmp_path / "locks"), str(tmp_path / "cache"))


def test_a_copy_stopped_by_its_timeout_keeps_what_it_sent_and_the_next_run_finishes_it(tmp_path, local_ssh):
    data = os.urandom(3_000_000)
    make_source(tmp_path / "src", {"big": data})
    dest = tmp_path / "host" / "rev"
    with pytest.raises(subprocess.TimeoutExpired):
        stage.stage(str(tmp_path / "src"), str(dest), ["big"], "host", local_ssh, bwlimit="500K", timeout=2)
    kept = dest / stage.PARTIAL_DIR / "big"
    for _ in range(50):   # the receiving rsync saves its partial file once it sees the sender gone
        if kept.exists():
            break
        time.sleep(0.1)
    sent = kept.stat().st_size
    assert 0 < sent < len(data)
    done = stage.stage(str(tmp_path / "src"), str(dest), ["big"], "host", local_ssh)
    assert done["rc"] == 0 and (dest / "big").read_bytes() == data
    assert done["literal_bytes"] <= len(data) - sent + 65536, (done, sent)   # the rest, not the whole file again
