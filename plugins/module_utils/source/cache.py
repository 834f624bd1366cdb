"""A per-venv cache of what the source reader read from an installed SGLang.

Reading a release's flags and rules (plugins/module_utils/source/, load_source) parses a few dozen
files: 1-2 CPU-s per host, paid by the flag check, the static and runtime audit and drift on every
run. The deploy's static audit (root) stores the result next to the package it read,
`<site-packages>/.sglang-fleet-source.pickle`; later readers (cached_source: drift and audit as the connecting
user, the next deploy) load it when it is still true:
  - written by this reader: the key holds the sha256 of every module of the sglang_source package and of this file;
  - for this tree: the size and mtime of every file the reader opened, and the absence of every
    file it looked for and did not find, are as they were (a hand-edited server_args.py, a
    reinstalled package or a new arg_groups module each make it stale);
  - written by root or the reader's own user, in a folder and a file no one else can write:
    a pickle runs code when loaded, so anything else is ignored (and read afresh).
Anything wrong with the cache (missing, stale, unreadable, untrusted) means reading the source
again; a failed write is ignored. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys

from ansible_collections.sglang.fleet.plugins.module_utils import source as sglang_source
from ansible_collections.sglang.fleet.plugins.module_utils.files import atomic_file

CACHE_NAME = ".sglang-fleet-source.pickle"
FORMAT = 2   # 2: the reader is a package (plugins/module_utils/source/)


def _reader_modules() -> list:
    """The reader package's modules (every one loaded by its __init__), then this module."""
    prefix = sglang_source.__name__ + "."
    subs = sorted((m for name, m in list(sys.modules.items()) if name.startswith(prefix) and m is not None),
                  key=lambda m: m.__name__)
    return [sglang_source, *subs, __import__(__name__, fromlist=["_"])]


def _reader_key() -> str:
    """sha256 of the reader package's and this module's own source (inside Ansible's payload zip too)."""
    h = hashlib.sha256(str(FORMAT).encode())
    for mod in _reader_modules():
        loader = getattr(mod, "__loader__", None)
        text = None
        if loader is not None and hasattr(loader, "get_source"):
            try:
                text = loader.get_source(mod.__name__)
            except (ImportError, OSError):
                text = None
        if text is None:
            with open(mod.__file__, encoding="utf-8") as f:
                text = f.read()
        h.update(text.encode())
    return h.hexdigest()


def _stamps(root: str, rels) -> dict:
    """{relative path: [size, mtime_ns] or None when absent}."""
    out = {}
    for rel in rels:
        try:
            st = os.stat(os.path.join(root, rel))
            out[rel] = [st.st_size, st.st_mtime_ns]
        except FileNotFoundError:
            out[rel] = None
    return out


def _trusted(path: str) -> bool:
    """Owned by root or by us, and neither it nor its folder writable by group or others."""
    me = os.geteuid()
    for p in (path, os.path.dirname(path)):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode) or st.st_uid not in (0, me) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


def cache_path(sglang_dir) -> str:
    """The cache file of the package at `sglang_dir` (next to it, in site-packages)."""
    pkg = os.path.abspath(os.fspath(sglang_dir))
    if os.path.basename(pkg) != "sglang" and os.path.isdir(os.path.join(pkg, "sglang")):
        pkg = os.path.join(pkg, "sglang")
    return os.path.join(os.path.dirname(pkg), CACHE_NAME)


def _read(path: str, key: str):
    try:
        if not _trusted(path):
            return None
        with open(path, "rb") as f:
            entry = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    src = entry.get("source")
    if not isinstance(src, sglang_source.SglangSource):
        return None
    if _stamps(os.path.dirname(src.path), entry.get("files", {})) != entry.get("files"):
        return None
    return src


def _write(path: str, key: str, src) -> None:
    tree = src._tree
    files = _stamps(os.path.dirname(src.path), sorted(tree._mods) if tree is not None else [])
    entry = {"key": key, "files": files, "source": sglang_source.SglangSource(
        path=src.path, version=src.version, era=src.era, flags=src.flags, rules=src.rules)}
    try:
        with atomic_file(path, 0o644, binary=True, fsync=False, prefix=f".{CACHE_NAME}.") as f:
            pickle.dump(entry, f, protocol=4)
    except OSError:
        return  # a read-only venv or another user's: read the source next time too


def cached_source(sglang_dir, write: bool = False):
    """The reading sglang_source.load_source(sglang_dir) returns, from the cache when it is still true;
    with `write`, store a fresh reading for the next caller."""
    path = cache_path(sglang_dir)
    key = _reader_key()
    src = _read(path, key)
    if src is None:
        src = sglang_source.load_source(sglang_dir)
        if write:
            _write(path, key, src)
    return src
