"""The per-venv cache of the source reader (plugins/module_utils/source/cache.py) on real releases:
the cached reading is the reading, and anything that could make it untrue means reading again."""

import os
import pathlib
import shutil

import pytest
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils import source as sglang_source
from ansible_collections.sglang.fleet.plugins.module_utils.source import cache as sglang_source_cache


@pytest.fixture
def counted(monkeypatch):
    """How many times the real reader read a tree."""
    calls = []
    real = sglang_source.load_source

    def load(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(sglang_source, "load_source", load)
    return calls


def site(tmp_path, release, copy=False):
    """A site-packages folder holding the release's sglang package (a copy when the test edits it)."""
    folder = tmp_path / "site-packages"
    folder.mkdir(mode=0o755)
    src = sglang_source_tree(release)
    if copy:
        shutil.copytree(src, folder / "sglang", ignore=shutil.ignore_patterns("*.so", "*.json", "*.cu*"))
    else:
        (folder / "sglang").symlink_to(src)
    return folder / "sglang"


@pytest.mark.parametrize("release", ["0.5.11", "0.5.18", "0.5.23"])
def test_the_cached_reading_is_the_reading(tmp_path, counted, release):
    pkg = site(tmp_path, release)
    fresh = sglang_source_cache.cached_source(pkg, write=True)
    cached = sglang_source_cache.cached_source(pkg)
    assert len(counted) == 1 and cached is not fresh
    assert (cached.version, cached.era, cached.flags, cached.rules) == (fresh.version, fresh.era, fresh.flags,
                                                                      fresh.rules)
    argv = ["--model-path", "m", "--tp", "2", "--speculative-algo", "NEXTN", "--enable-ep-moe", "--mem-fraction-statc"]
    assert sglang_source.validate_argv(cached, argv) == sglang_source.validate_argv(fresh, argv)
    assert oct(os.stat(sglang_source_cache.cache_path(pkg)).st_mode & 0o777) == "0o644"


def test_without_write_nothing_is_stored(tmp_path, counted):
    pkg = site(tmp_path, "0.5.11")
    sglang_source_cache.cached_source(pkg)
    sglang_source_cache.cached_source(pkg)
    assert len(counted) == 2 and not pathlib.Path(sglang_source_cache.cache_path(pkg)).exists()


def test_a_hand_edited_or_new_source_file_is_read_again(tmp_path, counted):
    """The seeds' user patched server_args.py with sed: the audit must read the patched file."""
    pkg = site(tmp_path, "0.5.11", copy=True)
    sglang_source_cache.cached_source(pkg, write=True)
    server_args = pkg / "srt" / "server_args.py"
    text = server_args.read_text()
    assert '"--cuda-graph-max-bs",' in text
    server_args.write_text(text.replace('"--cuda-graph-max-bs",', '"--cuda-graph-max-bs", "--cgmb",', 1))
    patched = sglang_source_cache.cached_source(pkg, write=True)
    assert len(counted) == 2 and patched.has("--cgmb")
    assert sglang_source_cache.cached_source(pkg).has("--cgmb") and len(counted) == 2
    # a file the reader looked for and did not find now exists
    entry = __import__("pickle").loads(pathlib.Path(sglang_source_cache.cache_path(pkg)).read_bytes())
    absent = sorted(rel for rel, stamp in entry["files"].items() if stamp is None)
    assert absent, "the reader looked for no missing file: nothing to test here"
    (pkg.parent / absent[0]).parent.mkdir(parents=True, exist_ok=True)
    (pkg.parent / absent[0]).write_text("# new\n")
    sglang_source_cache.cached_source(pkg)
    assert len(counted) == 3


@pytest.mark.parametrize("tamper", ["group-writable file", "group-writable folder", "other reader", "garbage"])
def test_a_cache_that_cannot_be_trusted_is_ignored(tmp_path, counted, monkeypatch, tamper):
    pkg = site(tmp_path, "0.5.11")
    sglang_source_cache.cached_source(pkg, write=True)
    path = pathlib.Path(sglang_source_cache.cache_path(pkg))
    if tamper == "group-writable file":
        path.chmod(0o664)
    elif tamper == "group-writable folder":
        path.parent.chmod(0o775)
    elif tamper == "other reader":  # written by another version of the reader
        monkeypatch.setattr(sglang_source_cache, "FORMAT", sglang_source_cache.FORMAT + 1)
    else:
        path.write_bytes(b"\x80\x04not a pickle")
    again = sglang_source_cache.cached_source(pkg)
    assert len(counted) == 2 and again.version == "0.5.11"
