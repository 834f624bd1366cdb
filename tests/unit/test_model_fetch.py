"""plugins/module_utils/model/fetch.py through the real huggingface_hub client against the lab hub
(lab/hub: olah, a real Hugging Face mirror, behind its thin front), with an 8 MB bulk-model. The same
paths through deploy.yml, and what the host keeps, are tests/lab/test_model_lab.py's."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.model import fetch, lock, spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BULK = "sglang-lab/bulk-model"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    d = tmp_path_factory.mktemp("hub")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    hub_py = [sys.executable, os.path.join(ROOT, "lab", "hub", "hub.py")]
    run = subprocess.run([*hub_py, "up", "--dir", str(d), "--bulk-mb", "8"], env=env, capture_output=True, text=True,
                         timeout=900, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    try:
        yield json.loads((d / "hub.json").read_text())
    finally:
        subprocess.run([*hub_py, "down", "--dir", str(d)], capture_output=True, check=False)


def bulk(revision, files=("*.json", "*.safetensors")):
    return spec.parse({"repo": BULK, "revision": revision, "files": list(files)})


def test_a_revision_is_fetched_once_locked_and_the_lock_holds_the_hub_s_bytes(hub, tmp_path):
    rev1 = hub["repos"][BULK][0]
    got = fetch.fetch(bulk(rev1), str(tmp_path / "locks"), str(tmp_path / "cache"), endpoint=hub["endpoint"])
    want = {p: f["sha256"] for p, f in hub["files"][BULK][rev1].items() if p.endswith((".json", ".safetensors"))}
    assert got["lock_written"] and {f["path"]: f["sha256"] for f in got["lock"]["files"]} == want
    assert got["downloaded_bytes"] == got["total_bytes"] == lock.total_bytes(got["lock"])
    assert got["model_facts"]["config"]["architectures"] == ["Qwen3ForCausalLM"]
    again = fetch.fetch(bulk(rev1), str(tmp_path / "locks"), str(tmp_path / "cache"), endpoint=hub["endpoint"])
    assert (again["lock_written"], again["downloaded_bytes"]) == (False, 0)


def test_under_check_mode_no_lock_is_written(hub, tmp_path):
    got = fetch.fetch(bulk(hub["repos"][BULK][0]), str(tmp_path / "locks"), str(tmp_path / "cache"),
                      endpoint=hub["endpoint"], write_lock=False)
    assert not got["lock_written"] and not os.path.exists(got["lock_file"])


@pytest.mark.parametrize("case", ["branch", "unknown repo", "unknown revision", "gated", "gated, token", "no match"])
def test_what_cannot_be_fetched_says_what_to_fix(hub, tmp_path, case):
    rev1, rev2 = hub["repos"][BULK]
    gated = {"repo": "sglang-lab/gated-model", "revision": hub["repos"]["sglang-lab/gated-model"][0]}
    model, token, words = {
        "branch": (bulk("main"), None, f"pin the commit it resolves to now: revision: {rev2}"),
        "unknown repo": (spec.parse({"repo": "sglang-lab/nope", "revision": rev1}), None, "no such repository on"),
        "unknown revision": (bulk("e" * 40), None, f"has no revision {'e' * 40}"),
        "gated": (spec.parse(gated), None, "is gated: it needs a token with access"),
        "gated, token": (spec.parse(gated), "hf_wrong", "is gated: the token given cannot read it"),
        "no match": (bulk(rev1, ["*.gguf"]), None, "match no file of sglang-lab/bulk-model@"),
    }[case]
    with pytest.raises(fetch.FetchError) as err:
        fetch.fetch(model, str(tmp_path / "locks"), str(tmp_path / "cache"), endpoint=hub["endpoint"], token=token)
    assert words in str(err.value)
    assert not (tmp_path / "locks").exists()   # nothing written for a revision that failed


def test_the_right_token_reads_a_gated_repository(hub, tmp_path):
    gated = spec.parse({"repo": "sglang-lab/gated-model", "revision": hub["repos"]["sglang-lab/gated-model"][0]})
    got = fetch.fetch(gated, str(tmp_path / "locks"), str(tmp_path / "cache"), endpoint=hub["endpoint"], token=hub["token"])
    assert [f["path"] for f in got["lock"]["files"]] == [".gitattributes", "config.json", "weights.bin"]


@pytest.mark.parametrize("edit", ["an LFS file's size", "a plain file's sha256 (the hub lists none)"])
def test_a_lock_that_disagrees_with_the_hub_is_refused(hub, tmp_path, edit):
    rev1 = hub["repos"][BULK][0]
    first = fetch.fetch(bulk(rev1), str(tmp_path / "locks"), str(tmp_path / "cache"), endpoint=hub["endpoint"])
    edited = json.loads(open(first["lock_file"]).read())
    if edit.startswith("an LFS"):
        edited["files"][-1]["size"] += 1
    else:
        edited["files"][0]["sha256"] = "0" * 64   # config.json
    lock.write(first["lock_file"], edited)
    for cache in ("cache", "another-cache"):   # the cached copy and a new download alike
        with pytest.raises(fetch.FetchError) as err:
            fetch.fetch(bulk(rev1), str(tmp_path / "locks"), str(tmp_path / cache), endpoint=hub["endpoint"])
        assert f"the lock of {BULK}@{rev1} disagrees with" in str(err.value)
