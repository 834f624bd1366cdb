"""plugins/module_utils/model/spec.py and lock.py: how the inventory names a model revision, the
folder it gets on a host, and the lock's comparisons."""
import pytest

from ansible_collections.sglang.fleet.plugins.module_utils.model import lock, spec

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_a_hub_revision_lives_under_the_root_by_org_name_and_commit():
    m = spec.parse({"repo": "Qwen/Qwen3-8B", "revision": SHA, "files": ["*.json"]})
    assert m["path"] == f"/var/lib/sglang-fleet/models/Qwen--Qwen3-8B/{SHA}"
    assert (m["kind"], m["pinned"], m["files"], m["name"]) == ("hub", True, ["*.json"], "Qwen--Qwen3-8B")
    assert spec.parse({"repo": "Qwen/Qwen3-8B", "revision": SHA}, root="/data/m/")["path"].startswith("/data/m/Qwen--")


def test_a_branch_parses_unpinned_for_the_fetch_to_refuse_with_its_commit():
    assert spec.parse({"repo": "Qwen/Qwen3-8B", "revision": "main"})["pinned"] is False


def test_a_source_folder_is_named_after_its_folder_and_label():
    m = spec.parse({"source": "/srv/models/ft/", "revision": "v3"})
    assert (m["kind"], m["source"], m["path"]) == ("source", "/srv/models/ft", "/var/lib/sglang-fleet/models/source--ft/v3")


@pytest.mark.parametrize("model, words", [
    ({"repo": "Qwen/Qwen3-8B"}, "revision is missing"),
    ({"repo": "Qwen/Qwen3-8B", "source": "/x", "revision": SHA}, "exactly one of repo"),
    ({"repo": "Qwen", "revision": SHA}, "not a hub repository id"),
    ({"repo": "Qwen/Qwen3-8B", "revision": "../etc"}, "not a commit, branch or tag"),
    ({"source": "models/x", "revision": "v1"}, "absolute folder"),
    ({"source": "/m/x", "revision": "v 1"}, "a label is letters"),
    ({"repo": "Qwen/Qwen3-8B", "revision": SHA, "files": []}, "list of glob patterns"),
    ({"repo": "Qwen/Qwen3-8B", "revision": SHA, "revison": SHA}, "unknown key(s) revison"),
    ("Qwen/Qwen3-8B", "must be a mapping"),
])
def test_a_bad_declaration_says_what_is_wrong(model, words):
    with pytest.raises(spec.ModelSpecError, match=None) as err:
        spec.parse(model)
    assert words in str(err.value)


def test_a_root_of_slash_is_refused():
    with pytest.raises(spec.ModelSpecError, match="absolute folder other than /"):
        spec.parse({"repo": "Qwen/Qwen3-8B", "revision": SHA}, root="/")


def test_globs_match_the_whole_relative_path_as_huggingface_hub_allow_patterns_do():
    assert spec.selected("sub/config.json", ["*.json"]) and not spec.selected("model.bin", ["*.json", "*.safetensors"])


def test_describe_shortens_a_commit_and_keeps_a_label():
    assert spec.describe({"repo": "Qwen/Qwen3-8B", "revision": SHA}) == "Qwen/Qwen3-8B@0123456789ab"
    assert spec.describe({"source": "/srv/ft", "revision": "v3"}) == "/srv/ft@v3"
    assert spec.describe(None) == ""


def test_lock_differences_name_each_file_and_both_values():
    locked = [{"path": "a", "size": 1, "sha256": "1" * 64}, {"path": "b", "size": 2, "sha256": "2" * 64}]
    seen = [{"path": "a", "size": 1, "sha256": "3" * 64}, {"path": "c", "size": 5, "sha256": None}]
    assert lock.differences(locked, seen) == ["c: not in the lock", "b: in the lock, missing here",
                                              f"a: sha256 {'3' * 64}, the lock says {'1' * 64}"]
    assert lock.differences(locked, [{"path": "a", "size": 9}, {"path": "b", "size": 2}]) == ["a: 9 bytes, the lock says 1"]


def test_a_lock_is_written_atomically_and_read_back(tmp_path):
    m = spec.parse({"repo": "Qwen/Qwen3-8B", "revision": SHA})
    path = lock.path_of(str(tmp_path), m)
    assert lock.read(path) is None
    written = lock.make(m, [{"path": "z", "size": 3, "sha256": "a" * 64}, {"path": "a", "size": 1, "sha256": "b" * 64}])
    lock.write(path, written)
    assert lock.read(path) == written and [f["path"] for f in written["files"]] == ["a", "z"]
    assert path.endswith(f"Qwen--Qwen3-8B/{SHA}.json") and lock.total_bytes(written) == 4
