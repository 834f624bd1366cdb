"""A model revision's files on a host (plugins/module_utils/model/files.py), on real files in tmp_path."""

import hashlib
import json
import os

import pytest
from ansible_run import run_module

from ansible_collections.sglang.fleet.plugins.module_utils.model.files import (
    MARKER,
    PARTIAL,
    ModelFilesError,
    check,
    collect,
    drift,
    mark,
    plan,
    validate_files,
)

REV = "0123456789abcdef0123456789abcdef01234567"
CONTENT = {"config.json": b'{"model_type": "qwen3"}\n', "model-00001.safetensors": b"\x01" * 4096,
           "model-00002.safetensors": b"\x02" * 8192, "tokenizer/vocab.txt": b"a\nb\nc\n"}


def lock_of(content=CONTENT, revision=REV):
    files = [{"path": p, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for p, b in sorted(content.items())]
    return {"format": 1, "repo": "Qwen/Qwen3.6-27B", "source": None, "revision": revision, "files": files}


def stage(folder, content=CONTENT):
    for rel, data in content.items():
        os.makedirs(os.path.dirname(os.path.join(folder, rel)), exist_ok=True)
        with open(os.path.join(folder, rel), "wb") as fh:
            fh.write(data)
    return str(folder)


@pytest.fixture
def rev(tmp_path):
    """A fully transferred revision folder and its lock."""
    return stage(tmp_path / "models" / "Qwen--Qwen3.6-27B" / REV), lock_of()


# ----------------------------------------------------------------------------- plan

def test_plan_on_an_empty_folder_sends_everything(tmp_path):
    files = lock_of()["files"]
    got = plan(str(tmp_path / "models" / "Qwen--Qwen3.6-27B" / REV), files)  # not there yet: the parent's disk
    total = sum(len(b) for b in CONTENT.values())
    assert got["missing"] == sorted(CONTENT) and got["present"] == got["wrong_size"] == []
    assert (got["bytes_to_transfer"], got["bytes_total"]) == (total, total)
    st = os.statvfs(tmp_path)
    assert abs(got["free_bytes"] - st.f_bavail * st.f_frsize) < 64 << 20 and got["fits"] and got["message"] == ""


def test_plan_counts_missing_and_wrong_size_files_whole_and_ignores_rsync_partials(tmp_path):
    folder = stage(tmp_path / REV, {"config.json": CONTENT["config.json"],
                                    "model-00001.safetensors": b"\x01" * 100})  # an interrupted transfer
    os.makedirs(os.path.join(folder, PARTIAL))
    with open(os.path.join(folder, PARTIAL, "model-00002.safetensors"), "wb") as fh:
        fh.write(b"\x02" * 8000)
    got = plan(folder, lock_of()["files"], free_bytes=10 ** 9)
    assert got["present"] == ["config.json"]
    assert got["wrong_size"] == ["model-00001.safetensors"]
    assert got["missing"] == ["model-00002.safetensors", "tokenizer/vocab.txt"]
    assert got["bytes_to_transfer"] == 4096 + 8192 + 6  # the partial file does not reduce it


def test_plan_that_does_not_fit_says_how_much_is_needed_and_free(tmp_path):
    files = [{"path": "model.safetensors", "size": 54_300_000_000, "sha256": "a" * 64}]
    folder = str(tmp_path / "Qwen--Qwen3.6-27B" / REV)
    got = plan(folder, files, free_bytes=20_100_000_000)
    assert got["fits"] is False
    assert got["message"] == (f"{folder}: the revision needs 54.3 GB more, the file system of {got['mount']} has "
                              "20.1 GB free; free space there or set sglang_model_root to a larger disk")
    assert os.path.ismount(got["mount"]) and str(tmp_path).startswith(got["mount"])
    # the margin counts: 10 GB free, 9 GB to send and a 2 GB margin does not fit
    small = [{"path": "a", "size": 9_000_000_000, "sha256": "a" * 64}]
    assert plan(folder, small, free_bytes=10_000_000_000)["fits"] is True
    tight = plan(folder, small, free_bytes=10_000_000_000, margin=2_000_000_000)
    assert tight["fits"] is False and "needs 9.0 GB (and a margin of 2.0 GB) more" in tight["message"]


# ----------------------------------------------------------------------------- check

def test_a_complete_revision_has_no_problem_in_either_mode(rev):
    folder, lock = rev
    assert check(folder, lock["files"], "sizes") == ([], [])
    assert check(folder, lock["files"], "deep") == ([], [])


def test_a_same_size_corrupted_byte_is_caught_only_by_deep(rev):
    folder, lock = rev
    path = os.path.join(folder, "model-00001.safetensors")
    with open(path, "r+b") as fh:
        fh.seek(2000)
        fh.write(b"\xff")
    assert check(folder, lock["files"], "sizes")[0] == []
    problems, _extra = check(folder, lock["files"], "deep")
    expected = hashlib.sha256(CONTENT["model-00001.safetensors"]).hexdigest()
    actual = hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert problems == [{"path": "model-00001.safetensors", "problem": "sha256", "expected": expected, "actual": actual,
                         "line": f"model-00001.safetensors: sha256 is {actual}, the lock says {expected}"}]


def test_truncated_missing_and_extra_files(rev):
    folder, lock = rev
    os.truncate(os.path.join(folder, "model-00002.safetensors"), 1024)
    os.unlink(os.path.join(folder, "config.json"))
    stage(folder, {"README.md": b"hi\n", "tokenizer/old.txt": b"x"})
    os.makedirs(os.path.join(folder, PARTIAL))
    stage(folder, {f"{PARTIAL}/model-00003.safetensors": b"p", MARKER: b"{}"})
    problems, extra = check(folder, lock["files"], "deep")
    assert [p["line"] for p in problems] == [
        "config.json: missing",
        "model-00002.safetensors: 1024 bytes, the lock says 8192 (truncated?)",
    ]
    assert (problems[1]["expected"], problems[1]["actual"]) == (8192, 1024)
    assert extra == ["README.md", "tokenizer/old.txt"]  # the marker and rsync's partial folder are ours


def test_a_folder_or_symlink_where_a_file_belongs_is_not_a_file(rev, tmp_path):
    folder, lock = rev
    os.unlink(os.path.join(folder, "config.json"))
    os.mkdir(os.path.join(folder, "config.json"))
    os.unlink(os.path.join(folder, "tokenizer/vocab.txt"))
    stage(tmp_path, {"elsewhere.txt": CONTENT["tokenizer/vocab.txt"]})
    os.symlink(tmp_path / "elsewhere.txt", os.path.join(folder, "tokenizer/vocab.txt"))
    problems, _extra = check(folder, lock["files"], "sizes")
    assert [(p["path"], p["problem"], p["actual"]) for p in problems] == [
        ("config.json", "not a file", "folder"), ("tokenizer/vocab.txt", "not a file", "symlink")]


@pytest.mark.parametrize("entry, says", [
    ({"path": "/etc/passwd", "size": 1, "sha256": "a" * 64}, "not absolute"),
    ({"path": "../x", "size": 1, "sha256": "a" * 64}, "'..' part"),
    ({"path": "a//b", "size": 1, "sha256": "a" * 64}, "empty"),
    ({"path": "a\nb", "size": 1, "sha256": "a" * 64}, "line break"),
    ({"path": "a\0b", "size": 1, "sha256": "a" * 64}, "NUL"),
    ({"path": MARKER, "size": 1, "sha256": "a" * 64}, "marker"),
    ({"path": "x", "size": -1, "sha256": "a" * 64}, "size must be"),
    ({"path": "x", "size": "1", "sha256": "a" * 64}, "size must be"),
    ({"path": "x", "size": 1, "sha256": "A" * 64}, "64 lowercase hex"),
    ({"path": "x", "size": 1}, "64 lowercase hex"),
])
def test_bad_lock_entries_are_refused_by_name(entry, says):
    good = {"path": "config.json", "size": 1, "sha256": "b" * 64}
    with pytest.raises(ModelFilesError, match=r"^files\[1\] \(") as exc:
        validate_files([good, entry])
    assert says in str(exc.value) and repr(entry.get("path")) in str(exc.value)


def test_duplicates_and_empty_locks_are_refused():
    entry = {"path": "config.json", "size": 1, "sha256": "b" * 64}
    with pytest.raises(ModelFilesError, match=r"files\[1\] \('config.json'\): the path is listed twice"):
        validate_files([entry, dict(entry)])
    with pytest.raises(ModelFilesError, match="non-empty list"):
        validate_files([])


# ----------------------------------------------------------------------------- mark and drift

def test_mark_then_drift_is_clean_and_marking_again_changes_nothing(rev):
    folder, lock = rev
    changed, marker = mark(folder, lock, "deep", "20261130T120000Z")
    on_disk = json.load(open(os.path.join(folder, MARKER)))
    assert changed and on_disk == marker
    assert (on_disk["revision"], on_disk["repo"], on_disk["checked"], on_disk["checked_at"]) == (
        REV, "Qwen/Qwen3.6-27B", "deep", "20261130T120000Z")
    assert on_disk["files"] == lock["files"]
    assert on_disk["mtimes"]["config.json"] == os.stat(os.path.join(folder, "config.json")).st_mtime_ns
    assert oct(os.stat(os.path.join(folder, MARKER)).st_mode & 0o777) == "0o644"
    assert not [n for n in os.listdir(folder) if n.startswith(".tmp-")]
    assert drift(folder, "sizes") == [] and drift(folder, "deep") == []
    assert mark(folder, lock, "sizes", "later")[0] is False  # a deep check already covers a sizes one
    assert check(folder, lock["files"])[1] == []  # the marker is no extra file


def test_mark_refuses_a_revision_with_problems_and_writes_nothing(rev):
    folder, lock = rev
    os.truncate(os.path.join(folder, "model-00002.safetensors"), 10)
    with pytest.raises(ModelFilesError, match=r"model-00002.safetensors: 10 bytes, the lock says 8192 \(truncated\?\)"):
        mark(folder, lock, "sizes", "now")
    assert not os.path.exists(os.path.join(folder, MARKER))
    with pytest.raises(ModelFilesError, match="is not the folder of revision"):
        mark(folder, lock_of(revision="f" * 40), "sizes", "now")


def test_drift_without_a_marker_is_not_staged(rev):
    folder, _lock = rev
    assert [p["problem"] for p in drift(folder)] == ["not staged"]
    assert drift(folder)[0]["line"] == f"{folder}: not staged (no marker {MARKER})"


def test_a_broken_marker_is_not_staged_and_marking_again_replaces_it(rev):
    folder, lock = rev
    stage(folder, {MARKER: b"{not json"})
    problems = drift(folder)
    assert len(problems) == 1 and problems[0]["problem"] == "not staged" and "not readable JSON" in problems[0]["line"]
    assert mark(folder, lock, "sizes", "now")[0] is True and drift(folder) == []


def test_a_touched_file_of_the_same_size_drifts_in_sizes_mode_but_not_deep(rev):
    folder, lock = rev
    mark(folder, lock, "sizes", "now")
    path = os.path.join(folder, "config.json")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    problems = drift(folder, "sizes")
    assert [(p["path"], p["problem"], p["expected"], p["actual"]) for p in problems] == [
        ("config.json", "modified", st.st_mtime_ns, st.st_mtime_ns + 5_000_000_000)]
    assert problems[0]["line"] == "config.json: modified since it was checked (mtime changed, same size)"
    assert drift(folder, "deep") == []  # the bytes are still the lock's


def test_drift_after_truncation_and_deep_drift_after_a_rewrite(rev):
    folder, lock = rev
    mark(folder, lock, "sizes", "now")
    os.truncate(os.path.join(folder, "model-00001.safetensors"), 4000)
    assert [p["line"] for p in drift(folder, "sizes")] == [
        "model-00001.safetensors: 4000 bytes, the lock says 4096 (truncated?)"]
    stage(folder, {"model-00001.safetensors": b"\x01" * 4096, "model-00002.safetensors": b"\x03" * 8192})
    problems = drift(folder, "deep")
    assert [(p["path"], p["problem"]) for p in problems] == [("model-00002.safetensors", "sha256")]
    assert problems[0]["actual"] == hashlib.sha256(b"\x03" * 8192).hexdigest()


# ----------------------------------------------------------------------------- collect

def test_collect_removes_only_revisions_staged_by_us_and_not_kept(tmp_path):
    root = tmp_path / "models"
    kept = stage(root / "Qwen--Qwen3.6-27B" / REV)
    mark(kept, lock_of(), "sizes", "t")
    old = stage(root / "Qwen--Qwen3.6-27B" / ("a" * 40))
    mark(old, lock_of(revision="a" * 40), "sizes", "t")
    partial = stage(root / "Qwen--Qwen3.6-27B" / ("b" * 40),  # an interrupted transfer: unmarked
                    {f"{PARTIAL}/model-00001.safetensors": b"\x01" * 1000, "config.json": b"{}"})
    other = stage(root / "Meta--Llama-4" / "main", {"config.json": b"{}"})  # a label, the model's only revision
    os.makedirs(os.path.join(other, PARTIAL))
    foreign = stage(root / "Qwen--Qwen3.6-27B" / "handmade", {"weights.bin": b"mine"})  # no marker
    odd_layout = stage(root / "notamodel" / ("d" * 40), {MARKER: b"{}"})  # not <org>--<name>
    outside = stage(tmp_path / "outside" / ("e" * 40), {MARKER: b"{}", "w": b"keep me"})
    os.symlink(outside, root / "Qwen--Qwen3.6-27B" / ("e" * 40))
    os.symlink(tmp_path / "outside", root / "Link--Model")

    old_marker = os.path.getsize(os.path.join(old, MARKER))
    would, would_free = collect(str(root), [kept], dry_run=True)
    assert os.path.isdir(old) and os.path.isdir(partial)  # a dry run removes nothing
    removed, freed = collect(str(root), [kept])
    assert (removed, freed) == (would, would_free)
    assert removed == [other, str(root / "Meta--Llama-4"), old, partial]
    assert freed == 2 + sum(len(b) for b in CONTENT.values()) + old_marker + 1000 + 2
    assert drift(kept) == []
    for path in (foreign, odd_layout, outside, root / "Qwen--Qwen3.6-27B" / ("e" * 40), root / "Link--Model"):
        assert os.path.lexists(path), path
    assert sorted(os.listdir(outside)) == [MARKER, "w"]


def test_collect_through_a_root_that_is_a_link_to_a_larger_disk(tmp_path):
    disk = tmp_path / "disk"
    kept = stage(disk / "Qwen--Qwen3.6-27B" / REV)
    mark(kept, lock_of(), "sizes", "t")  # staged: only `keep`, named through the link, saves it
    old = stage(disk / "Qwen--Qwen3.6-27B" / ("a" * 40), {MARKER: b"{}"})
    os.symlink(disk, tmp_path / "models")
    link_kept = str(tmp_path / "models" / "Qwen--Qwen3.6-27B" / REV)
    assert collect(str(tmp_path / "models"), [link_kept]) == (
        [str(tmp_path / "models" / "Qwen--Qwen3.6-27B" / ("a" * 40))], 2)
    assert os.path.isdir(kept) and not os.path.exists(old)


@pytest.mark.parametrize("root", ["/", "relative/models", "//"])
def test_collect_refuses_the_root_folder_and_relative_roots(root):
    with pytest.raises(ModelFilesError, match="absolute folder other than /"):
        collect(root, [])


def test_collect_refuses_relative_kept_paths(tmp_path):
    with pytest.raises(ModelFilesError, match="absolute paths"):
        collect(str(tmp_path), ["Qwen--Qwen3.6-27B/" + REV])


# ----------------------------------------------------------------------------- the module, as Ansible runs it

def test_module_plan_and_check(rev):
    folder, lock = rev
    os.truncate(os.path.join(folder, "model-00002.safetensors"), 1024)
    rc, result, out = run_module({"state": "plan", "path": folder, "lock": lock}, module="sglang_model_files")
    assert rc == 0 and result["changed"] is False, out
    assert (result["wrong_size"], result["bytes_to_transfer"], result["fits"]) == (["model-00002.safetensors"], 8192, True)
    rc, result, out = run_module({"state": "check", "path": folder, "files": lock["files"], "mode": "deep"},
                                 module="sglang_model_files")
    assert rc == 0 and result["changed"] is False and result["ok"] is False, out  # problems do not fail the task
    assert result["lines"] == ["model-00002.safetensors: 1024 bytes, the lock says 8192 (truncated?)"]
    assert not os.path.exists(os.path.join(folder, MARKER))


def test_module_mark_writes_no_marker_over_a_problem_and_collect_in_check_mode_removes_nothing(rev, tmp_path):
    folder, lock = rev
    os.unlink(os.path.join(folder, "config.json"))
    rc, result, out = run_module({"state": "mark", "path": folder, "lock": lock, "now": "t"}, module="sglang_model_files")
    assert rc == 0 and result["ok"] is False and result["lines"] == ["config.json: missing"], out
    assert result["changed"] is False and not os.path.exists(os.path.join(folder, MARKER))
    stage(folder, {"config.json": CONTENT["config.json"]})
    mark(folder, lock, "sizes", "t")
    rc, result, out = run_module({"state": "collect", "root": str(tmp_path / "models"), "keep": []},
                                 module="sglang_model_files", check=True)
    assert rc == 0 and result["changed"] is True and result["removed"][0] == folder, out
    assert os.path.isfile(os.path.join(folder, MARKER))
