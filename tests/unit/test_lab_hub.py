"""The lab hub (lab/hub: olah behind front.py) as the real huggingface_hub client sees it.

Starts one hub for the module (olah's own venv is built from lab/hub/requirements.lock the first time:
a minute or two), with an 8 MB bulk-model, and stops it at the end.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")
from huggingface_hub import HfApi  # noqa: E402
from huggingface_hub.errors import (  # noqa: E402
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HUB = os.path.join(ROOT, "lab", "hub", "hub.py")
BULK, TINY, GATED = "sglang-lab/bulk-model", "sglang-lab/tiny-llama", "sglang-lab/gated-model"
SHARD2 = "model-00002-of-00004.safetensors"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    d = tmp_path_factory.mktemp("hub")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    run = subprocess.run([sys.executable, HUB, "up", "--dir", str(d), "--bulk-mb", "8"], env=env,
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    try:
        with open(d / "hub.json") as f:
            state = json.load(f)
        state["dir"] = d
        yield state
    finally:
        subprocess.run([sys.executable, HUB, "down", "--dir", str(d)], check=True, timeout=60)
        status = subprocess.run([sys.executable, HUB, "status", "--dir", str(d)], capture_output=True, check=False)
        assert status.returncode == 3


@pytest.fixture(scope="module")
def api(hub):
    return HfApi(endpoint=hub["endpoint"], token=False)


def sha256_tree(folder):
    out = {}
    for base, dirs, files in os.walk(folder):
        dirs[:] = [x for x in dirs if x != ".cache"]  # huggingface_hub's local_dir metadata
        for name in files:
            path = os.path.join(base, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_local_only_and_recorded(hub):
    assert hub["endpoint"].startswith("http://127.0.0.1:")
    assert [len(hub["repos"][r]) for r in (TINY, BULK, GATED)] == [1, 2, 1]
    assert hub["token"]
    shards = [p for p in hub["files"][BULK][hub["repos"][BULK][0]] if p.endswith(".safetensors")]
    assert len(shards) == 4


def test_tiny_llama_is_make_tiny_model(hub, api):
    # by path: tests/real_engine has a make_tiny_model.py of its own (llama.cpp's)
    spec = importlib.util.spec_from_file_location("lab_make_tiny_model", os.path.join(ROOT, "lab", "real_sglang",
                                                                                    "make_tiny_model.py"))
    make_tiny_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_tiny_model)

    sha = hub["repos"][TINY][0]
    want = {n: hashlib.sha256(c if isinstance(c, bytes) else (c + "\n").encode()).hexdigest()
            for n, c in make_tiny_model.files(0).items()}
    info = api.model_info(TINY, revision=sha)
    assert info.sha == sha
    assert {s.rfilename for s in info.siblings} == set(want) | {".gitattributes"}
    got = {f.path: f for f in api.list_repo_tree(TINY, revision=sha, recursive=True)}
    assert got["model.safetensors"].lfs.sha256 == want["model.safetensors"]


@pytest.mark.parametrize("expand", [False, True])
def test_tree_sizes_and_lfs(hub, api, expand):
    for sha in hub["repos"][BULK]:
        want = hub["files"][BULK][sha]
        tree = {f.path: f for f in api.list_repo_tree(BULK, revision=sha, recursive=True, expand=expand)}
        assert set(tree) == set(want)
        for path, meta in want.items():
            assert tree[path].size == meta["size"]
            if meta.get("lfs"):  # LFS files: the sha256 of the content; others: the git blob id only
                assert tree[path].lfs.sha256 == meta["sha256"] and tree[path].lfs.size == meta["size"]
            else:
                assert tree[path].lfs is None and len(tree[path].blob_id) == 40
            if expand:  # olah takes the last commit from HEAD, not from the revision asked (README: gaps)
                assert tree[path].last_commit.oid in hub["repos"][BULK]


def test_model_info_files_metadata(hub, api):
    sha = hub["repos"][BULK][0]
    info = api.model_info(BULK, revision=sha, files_metadata=True)  # sizes: added by front.py
    want = hub["files"][BULK][sha]
    assert {s.rfilename: s.size for s in info.siblings} == {p: m["size"] for p, m in want.items()}
    assert {s.rfilename: s.lfs.sha256 for s in info.siblings if s.lfs} == \
        {p: m["sha256"] for p, m in want.items() if m.get("lfs")}


def test_snapshots_and_second_revision(hub, api, tmp_path):
    first, second = hub["repos"][BULK]
    got = {}
    for sha in (first, second):
        local = api.snapshot_download(BULK, revision=sha, local_dir=tmp_path / sha)
        got[sha] = sha256_tree(local)
        assert got[sha] == {p: m["sha256"] for p, m in hub["files"][BULK][sha].items()}
    assert {p for p in got[first] if got[first][p] != got[second][p]} == {"config.json", SHARD2}
    index = json.loads((tmp_path / first / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == sorted(p for p in got[first] if p.startswith("model-0"))


def test_branch_resolves_to_second_commit(hub, api):
    assert api.model_info(BULK, revision="main").sha == hub["repos"][BULK][1]
    assert api.model_info(BULK).sha == hub["repos"][BULK][1]  # no revision: front.py asks olah for main


def test_unknown_repo_and_revision(hub, api, tmp_path):
    sha = hub["repos"][BULK][0]
    with pytest.raises(RepositoryNotFoundError) as e:
        api.model_info("sglang-lab/no-such-model", revision=sha)
    assert e.value.response.status_code == 401 and not isinstance(e.value, GatedRepoError)
    with pytest.raises(RepositoryNotFoundError):
        api.hf_hub_download("sglang-lab/no-such-model", "config.json", revision=sha, local_dir=tmp_path)
    for revision in ("0" * 40, "no-such-branch"):
        with pytest.raises(RevisionNotFoundError) as e:
            api.model_info(BULK, revision=revision)
        assert e.value.response.status_code == 404
    with pytest.raises(RevisionNotFoundError):
        api.hf_hub_download(BULK, "config.json", revision="0" * 40, local_dir=tmp_path)


def test_gated(hub, api, tmp_path):
    with pytest.raises(GatedRepoError) as e:
        api.model_info(GATED)
    assert e.value.response.status_code == 401
    with pytest.raises(GatedRepoError):
        api.hf_hub_download(GATED, "weights.bin", local_dir=tmp_path / "none")
    with pytest.raises(HfHubHTTPError) as e:
        api.model_info(GATED, token="hf_not_the_lab_token")
    assert e.value.response.status_code == 403
    sha = hub["repos"][GATED][0]
    assert api.model_info(GATED, token=hub["token"]).sha == sha
    local = api.snapshot_download(GATED, revision=sha, local_dir=tmp_path / "ok", token=hub["token"])
    assert sha256_tree(local) == {p: m["sha256"] for p, m in hub["files"][GATED][sha].items()}
