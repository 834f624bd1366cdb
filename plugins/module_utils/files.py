"""Put a file, a folder or a link in place atomically: the collection's one temporary-file-and-rename;
and the one reader of a file's bytes and its hash.

A reader sees the old content or the new, never half of it: the new content goes to a temporary
file in the target's own folder (one file system), which is renamed over the target. Used on hosts
(release records, staged models' markers and locks) and on the controller (reports, caches,
wheelhouse locks and bundles). Stdlib only; Python 3.8 like every Ansible target.
"""

import contextlib
import hashlib
import os
import shutil
import tempfile


def _default_mode():
    """What open() gives a new file: 0666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_file(path, mode=0o644, binary=False, encoding=None, fsync=True, makedirs=False, prefix=".tmp-", suffix=""):
    """An open temporary file beside `path`, renamed to `path` when the block ends without an error.

    `mode`: the file's mode (None: what open() would give, 0666 less the umask). `binary`: bytes,
    else text in `encoding` (None: the locale's, as open()). `fsync`: synced before the rename (a
    crash cannot leave an empty file; False where a lost write costs nothing). `makedirs`: the parent folders made first. `prefix` and
    `suffix` name the temporary file (keep it out of a reader's glob). On an error the temporary
    file is removed and `path` is untouched. The file belongs to the process's user, as one made
    by open() does.
    """
    folder = os.path.dirname(os.fspath(path))
    if makedirs and folder:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder or ".", prefix=prefix, suffix=suffix)  # made 0600
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding) as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, _default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_atomic(path, data, mode=0o644, **kwargs):
    """Replace `path` with `data` (bytes, or text) atomically; atomic_file's options. Returns `path`."""
    with atomic_file(path, mode, binary=isinstance(data, bytes), **kwargs) as fh:
        fh.write(data)
    return path


def publish_dir(target, fill, marker=".complete"):
    """Make folder `target` once: `fill(tmp)` fills a temporary sibling folder, renamed into place,
    then `marker` is made in it. A folder without the marker (a run that died half-way) is made
    again; losing the rename to another process that made the same folder is no error. Returns `target`."""
    done = os.path.join(target, marker)
    if os.path.exists(done):
        return target
    tmp = f"{target}.tmp{os.getpid()}"
    fill(tmp)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(target) and not os.path.exists(done):  # a previous run died half-way
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(tmp, target)
        open(done, "w").close()
    except OSError:  # another process made the same folder first
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.exists(done):
            raise
    return target


def move_files(folder, dest):
    """Move every file of `folder` into `dest` (one file system), each whole by one rename."""
    for name in os.listdir(folder):
        os.replace(os.path.join(folder, name), os.path.join(dest, name))


def replace_symlink(link, target):
    """Point symlink `link` at `target` atomically (a new link renamed over the old)."""
    tmp = link + ".tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def read_bytes(path, missing=None):
    """The bytes of file `path`; `missing` when there is no such file (records read an absent unit as
    b"", the venv build tells an absent lock by None)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return missing


def file_sha256(path):
    """sha256 hex of the file at `path`, read in 1 MiB blocks (wheels and uv archives are large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
