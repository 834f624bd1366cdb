"""A model revision's files on a host: plan their transfer, check them, mark them, watch them, collect old ones.

Runs on the host (stdlib only, Python 3.8+). The controller fetches a revision once, writes its
lock ({format, repo, source, revision, files: [{path, size, sha256}] sorted by path}) and rsyncs
the files to each host into

    <root>/<org>--<name>/<revision>/                           the files, as the lock lists them
    <root>/<org>--<name>/<revision>/.rsync-partial/            rsync's partial transfers (not files)
    <root>/<org>--<name>/<revision>/.sglang-fleet-model.json   the marker: the lock, how and when the
                                                               files were checked, their mtimes then

A revision with a marker is staged. The revision a deploy replaces stays for rollback; only
collect() removes revisions, and only those the caller no longer keeps.
"""

import hashlib
import json
import os
import re
import shutil
import stat

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import write_atomic

MARKER = ".sglang-fleet-model.json"
PARTIAL = ".rsync-partial"
MODES = ("sizes", "deep")
CHUNK = 8 << 20
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")  # a revision (40 hex or a label), no dot first
_MODEL_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*--[A-Za-z0-9._-]+$")  # <org>--<name>


class ModelFilesError(SglangFleetError, ValueError):
    """A lock, a path or a model folder that cannot be used."""


def _path_problem(path):
    if not isinstance(path, str) or not path:
        return "the path must be a non-empty string"
    if "\0" in path or "\n" in path or "\r" in path:
        return "the path holds a NUL or a line break"
    if path.startswith("/"):
        return "the path must be relative to the revision folder, not absolute"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "the path has an empty, '.' or '..' part"
    if parts[0] in (MARKER, PARTIAL):
        return f"{parts[0]} is the name of sglang-fleet's own marker or rsync's partial folder"
    return ""


def validate_files(files):
    """Return a lock's `files` list, or raise ModelFilesError naming its first bad entry."""
    if not isinstance(files, list) or not files:
        raise ModelFilesError(f"the lock's files must be a non-empty list, got {files!r}")
    seen = set()
    for i, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise ModelFilesError(f"files[{i}] is not a mapping of path, size and sha256: {entry!r}")
        where = f"files[{i}] ({entry.get('path')!r})"
        problem = _path_problem(entry.get("path"))
        if problem:
            raise ModelFilesError(f"{where}: {problem}")
        size = entry.get("size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ModelFilesError(f"{where}: size must be a whole number of bytes >= 0, got {size!r}")
        if not isinstance(entry.get("sha256"), str) or not _SHA256_RE.match(entry["sha256"]):
            raise ModelFilesError(f"{where}: sha256 must be 64 lowercase hex digits, got {entry.get('sha256')!r}")
        if entry["path"] in seen:
            raise ModelFilesError(f"{where}: the path is listed twice")
        seen.add(entry["path"])
    return files


def human_bytes(n):
    """`n` bytes as people read them: 512 B, 1.5 MB, 54.3 GB (powers of 1000, as model hubs count)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""  # not reached


def free_space(path):
    """(bytes free to unprivileged users, mount point) of the file system `path` (or its nearest
    existing parent) is on."""
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    st = os.statvfs(existing)
    mount = existing
    while not os.path.ismount(mount):
        mount = os.path.dirname(mount)
    return st.f_bavail * st.f_frsize, mount


def _stat(folder, rel):
    """os.lstat of a lock's file in `folder` (a symlink is not a file of the revision), None when there is none."""
    try:
        return os.lstat(os.path.join(folder, rel))
    except (FileNotFoundError, NotADirectoryError):
        return None


def plan(path, files, free_bytes=None, margin=0):
    """What rsync has to send to revision folder `path`, and whether it fits; changes nothing.

    Files missing or with another size than the lock's are sent whole: `bytes_to_transfer` is the
    sum of their sizes (a partial file in .rsync-partial is not subtracted: the estimate errs
    high). `fits`: bytes_to_transfer <= free_bytes - margin. `free_bytes`: measured when None.
    """
    validate_files(files)
    missing, wrong_size, present = [], [], []
    for entry in files:
        st = _stat(path, entry["path"])
        if st is None or not stat.S_ISREG(st.st_mode):
            missing.append(entry["path"])
        else:
            (present if st.st_size == entry["size"] else wrong_size).append(entry["path"])
    sizes = {entry["path"]: entry["size"] for entry in files}
    to_transfer = sum(sizes[p] for p in missing + wrong_size)
    measured, mount = free_space(path)
    free = measured if free_bytes is None else free_bytes
    out = {"missing": missing, "wrong_size": wrong_size, "present": present, "bytes_to_transfer": to_transfer,
           "bytes_total": sum(sizes.values()), "free_bytes": free, "margin_bytes": margin, "mount": mount,
           "fits": to_transfer <= free - margin, "message": ""}
    if not out["fits"]:
        needs = human_bytes(to_transfer) + (f" (and a margin of {human_bytes(margin)})" if margin else "")
        out["message"] = (f"{path}: the revision needs {needs} more, the file system of {mount} has "
                          f"{human_bytes(free)} free; free space there or set sglang_model_root to a larger disk")
    return out


def sha256_file(path):
    """sha256 hex of a file, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _kind(mode):
    return "folder" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode) else "other"


def _problem(rel, kind, expected, actual, line):
    return {"path": rel, "problem": kind, "expected": expected, "actual": actual, "line": line}


def _size_line(rel, actual, expected):
    hint = " (truncated?)" if actual < expected else " (longer than the lock's)"
    return f"{rel}: {actual} bytes, the lock says {expected}{hint}"


def _walk(top, rel="", ours=False):
    """(relative path, lstat) of everything but folders under `top`, symlinks not followed; the
    marker and .rsync-partial only when `ours`."""
    with os.scandir(os.path.join(top, rel) if rel else top) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if sub in (MARKER, PARTIAL) and not ours:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(top, sub, ours)
        else:
            yield sub, entry.stat(follow_symlinks=False)


def check(path, files, mode="sizes"):
    """(problems, extra) of revision folder `path` against the lock's `files`.

    mode "sizes" compares sizes, "deep" also sha256 (of the files whose size is right). Each
    problem: {path, problem: missing|not a file|size|sha256, expected, actual, line}. `extra`:
    files in the folder the lock does not list (not problems; the marker and .rsync-partial aside).
    """
    if mode not in MODES:
        raise ModelFilesError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    validate_files(files)
    problems = []
    for entry in files:
        rel, size = entry["path"], entry["size"]
        st = _stat(path, rel)
        if st is None:
            problems.append(_problem(rel, "missing", size, None, f"{rel}: missing"))
        elif not stat.S_ISREG(st.st_mode):
            problems.append(_problem(rel, "not a file", "file", _kind(st.st_mode),
                                     f"{rel}: a {_kind(st.st_mode)}, not a regular file"))
        elif st.st_size != size:
            problems.append(_problem(rel, "size", size, st.st_size, _size_line(rel, st.st_size, size)))
        elif mode == "deep":
            actual = sha256_file(os.path.join(path, rel))
            if actual != entry["sha256"]:
                problems.append(_problem(rel, "sha256", entry["sha256"], actual,
                                         f"{rel}: sha256 is {actual}, the lock says {entry['sha256']}"))
    listed = {entry["path"] for entry in files}
    extra = [rel for rel, _st in _walk(path) if rel not in listed] if os.path.isdir(path) else []
    return problems, extra


def _validate_lock(path, lock):
    if not isinstance(lock, dict):
        raise ModelFilesError(f"the lock must be a mapping, got {lock!r}")
    revision = lock.get("revision")
    if not isinstance(revision, str) or not _NAME_RE.match(revision):
        raise ModelFilesError(f"the lock's revision must be a commit or a label ([A-Za-z0-9._-]), got {revision!r}")
    if os.path.basename(os.path.normpath(path)) != revision:
        raise ModelFilesError(f"{path} is not the folder of revision {revision} (<root>/<org>--<name>/{revision})")
    validate_files(lock.get("files"))


def read_marker(path):
    """The marker of revision folder `path`, None when there is none; ModelFilesError when it is no marker."""
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as fh:
            marker = json.load(fh)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ModelFilesError(f"{os.path.join(path, MARKER)} is not readable JSON: {exc}") from None
    if not isinstance(marker, dict):
        raise ModelFilesError(f"{os.path.join(path, MARKER)} does not hold a marker")
    return marker


def mark(path, lock, mode, now, write=True, checked=False):
    """Check revision folder `path` against `lock` (mode sizes|deep) and record it as staged: the
    marker holds the lock, how and when it was checked and each file's mtime (ns) right after.
    `checked`: the caller's check in that mode just passed (a deep check is not read twice).

    Raises ModelFilesError with one line per problem. Returns (changed, marker); nothing is
    written when the marker already says the same with as strong a check, or when not `write`.
    """
    _validate_lock(path, lock)
    problems = [] if checked else check(path, lock["files"], mode)[0]
    if problems:
        raise ModelFilesError(f"{path} is not what the lock says:\n" + "\n".join(p["line"] for p in problems))
    marker = {key: lock.get(key) for key in ("repo", "source", "revision", "files")}
    marker.update({"format": 1, "checked": mode, "checked_at": now,
                   "mtimes": {e["path"]: os.lstat(os.path.join(path, e["path"])).st_mtime_ns for e in lock["files"]}})
    try:
        old = read_marker(path) or {}
    except ModelFilesError:  # a broken marker is replaced
        old = {}
    same = all(old.get(k) == marker[k] for k in ("repo", "source", "revision", "files", "mtimes"))
    if same and (old.get("checked") == mode or old.get("checked") == "deep"):
        return False, old
    if write:
        write_atomic(os.path.join(path, MARKER), (json.dumps(marker, indent=1, sort_keys=True) + "\n").encode())
    return True, marker


def drift(path, mode="sizes"):
    """Problems of a staged revision folder since it was marked (the shape of check()'s).

    "sizes": each file's size against the lock and its mtime against the marker's (a new mtime
    with the same size is drift too); "deep": sha256 again. No marker: one problem, not staged.
    """
    try:
        marker = read_marker(path)
    except ModelFilesError as exc:
        return [_problem("", "not staged", MARKER, None, f"{path}: not staged ({exc})")]
    if marker is None:
        return [_problem("", "not staged", MARKER, None, f"{path}: not staged (no marker {MARKER})")]
    if mode == "deep":
        return check(path, marker.get("files"), "deep")[0]
    problems = check(path, marker.get("files"), "sizes")[0]
    bad = {p["path"] for p in problems}
    mtimes = marker.get("mtimes") or {}
    for entry in marker["files"]:
        rel = entry["path"]
        if rel in bad:
            continue
        actual = os.lstat(os.path.join(path, rel)).st_mtime_ns
        if actual != mtimes.get(rel):
            problems.append(_problem(rel, "modified", mtimes.get(rel), actual,
                                     f"{rel}: modified since it was checked (mtime changed, same size)"))
    return problems


def _ours(folder):
    """Whether sglang-fleet staged revision folder `folder`: it has the marker or rsync's partial folder."""
    marker, partial = os.path.join(folder, MARKER), os.path.join(folder, PARTIAL)
    return (os.path.isfile(marker) and not os.path.islink(marker)) or \
        (os.path.isdir(partial) and not os.path.islink(partial))


def _is_dir(path):
    return os.path.isdir(path) and not os.path.islink(path)


def collect(root, keep, dry_run=False):
    """Remove the revision folders under `root` that are not in `keep` (absolute paths); (removed, freed_bytes).

    Only `<root>/<org>--<name>/<revision>` folders (real folders, no symlinks, a revision of
    [A-Za-z0-9._-]) that sglang-fleet staged (_ours) are removed, and then their `<org>--<name>`
    folder when that left it empty. freed_bytes counts files with no other hard link.
    `dry_run`: only say what would go.
    """
    if not isinstance(root, str) or not os.path.isabs(root) or os.path.realpath(root) == "/":
        raise ModelFilesError(f"the model root must be an absolute folder other than /, got {root!r}")
    bad = [k for k in keep if not isinstance(k, str) or not os.path.isabs(k)]
    if bad:
        raise ModelFilesError(f"the revisions to keep must be absolute paths, got {bad!r}")
    kept = {os.path.realpath(k) for k in keep}
    removed, freed = [], 0
    if not os.path.isdir(root):  # the root itself may be a link to a larger disk
        return removed, freed
    for model in sorted(os.listdir(root)):
        model_dir = os.path.join(root, model)
        if not _MODEL_RE.match(model) or not _is_dir(model_dir):
            continue
        revisions = sorted(os.listdir(model_dir))
        gone = 0
        for revision in revisions:
            folder = os.path.join(model_dir, revision)
            if not _NAME_RE.match(revision) or not _is_dir(folder) or os.path.realpath(folder) in kept \
                    or not _ours(folder):
                continue
            freed += sum(st.st_size for _rel, st in _walk(folder, ours=True)
                         if stat.S_ISREG(st.st_mode) and st.st_nlink == 1)
            if not dry_run:
                shutil.rmtree(folder)
            removed.append(folder)
            gone += 1
        if gone and gone == len(revisions):
            if not dry_run:
                os.rmdir(model_dir)
            removed.append(model_dir)
    return removed, freed
