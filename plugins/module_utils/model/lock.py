"""A model revision's lock: every file's size and sha256, like the wheel lock, kept next to the
inventory (`<inventory>/model-locks/<name>/<revision>.json`) so that a review sees what a fleet
serves and a later fetch can only agree with it.

    {"format": 1, "repo": "Qwen/Qwen3-8B" | null, "source": null | "/controller/folder",
     "revision": "<commit or label>", "files": [{"path", "size", "sha256"}, ...]}   (sorted by path)

Stdlib only.
"""

import json
import os

from ansible_collections.sglang.fleet.plugins.module_utils.files import write_atomic

FORMAT = 1


def make(model, files):
    """The lock of `model` (a parsed sglang_model) with `files` [{path, size, sha256}]."""
    return {"format": FORMAT, "repo": model.get("repo"), "source": model.get("source"),
            "revision": model["revision"], "files": sorted(files, key=lambda f: f["path"])}


def total_bytes(lock):
    return sum(f["size"] for f in lock["files"])


def path_of(lock_dir, model):
    return os.path.join(lock_dir, model["name"], f"{model['revision']}.json")


def read(path):
    """The lock at `path`, or None when there is none."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def write(path, lock):
    """Write the lock atomically (0644), its parent folders made."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, (json.dumps(lock, indent=1, sort_keys=True) + "\n").encode(), 0o644)


def differences(expected, actual, what="the lock"):
    """Lines naming each file whose size or sha256 differs between two file lists (or that only one
    has); `actual` entries may leave sha256 out (a listing that only knows sizes)."""
    mine = {f["path"]: f for f in expected}
    theirs = {f["path"]: f for f in actual}
    lines = [f"{p}: not in {what}" for p in sorted(set(theirs) - set(mine))]
    lines += [f"{p}: in {what}, missing here" for p in sorted(set(mine) - set(theirs))]
    for p in sorted(set(mine) & set(theirs)):
        a, b = mine[p], theirs[p]
        if b.get("size") is not None and a["size"] != b["size"]:
            lines.append(f"{p}: {b['size']} bytes, {what} says {a['size']}")
        elif a.get("sha256") and b.get("sha256") and a["sha256"] != b["sha256"]:
            lines.append(f"{p}: sha256 {b['sha256']}, {what} says {a['sha256']}")
    return lines
