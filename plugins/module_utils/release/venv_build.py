"""Host side of ml_env: build one SGLang venv from its lock, offline, or leave none behind.

The sglang_venv module runs this on the host once the wheels and the lock are there (its action
plugin pushed them). The steps, in order, each named as a failure names it (they were one task each):
remove a half-built or outdated venv; with uv, write uv's hash-locked requirement, refuse a uv wheel
whose sha256 the requirement does not lock, unpack uv's static binary from the checked wheel; create
the venv; install from the lock (``--require-hashes --no-index``); check every file the installer
recorded is there; mark the venv complete (a copy of its lock). A step that fails raises StepFailed;
the caller removes the half-built venv and says which step failed and why (failure_message).

Stdlib only; Python 3.8 like every Ansible target.
"""

import os
import re
import shutil
import zipfile

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import (
    atomic_file,
    file_sha256,
    read_bytes,
    write_atomic,
)

REMOVE = "Remove a half-built or outdated environment"
UV_LOCK = "Write the hash-locked uv requirement"
UV_CHECK = "Refuse a uv wheel whose sha256 is not in the lock"
UV_INSTALL = "Install uv from its checked wheel"
CREATE = "Create the venv"
INSTALL = "Install SGLang into the venv"
CHECK = "Check every file the installer recorded is in the venv"
MARK = "Mark the environment as complete"

# Run by the venv's own Python: every file each installed distribution recorded (RECORD) exists.
# No retry of the install: a second try over a half-installed venv can report success with files
# missing (seen on a full disk: uv saw the package as installed); this catches what it left.
CHECK_FILES = ("import importlib.metadata as m, sys; "
               "missing = [str(f.locate()) for d in m.distributions() for f in (d.files or []) if not f.locate().exists()]; "
               "sys.exit('installed files missing: ' + ', '.join(missing[:5]) if missing else 0)")

# The failure message's detail is cut as Jinja's truncate(1500) cut it (the role's rescue task did).
DETAIL_LENGTH, DETAIL_LEEWAY = 1500, 5


class StepFailed(SglangFleetError):
    """A build step failed: `step` (its name), `detail` (the installer's stderr, else the reason)
    and `result` (rc, cmd, stdout, stderr of a command that failed; {} otherwise)."""

    def __init__(self, step, detail, result=None):
        super().__init__(f"{step}: {detail}")
        self.step, self.detail, self.result = step, detail, result or {}


def truncate(text, length=DETAIL_LENGTH, leeway=DETAIL_LEEWAY, end="..."):
    """Jinja's truncate filter: `text` unless longer than length + leeway, else cut at a word
    boundary to length characters, `end` included."""
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def failure_message(venv, installer, step, detail):
    """What the play says when a build step fails (the half-built venv is removed first)."""
    return (f'Building {venv} with {installer} failed in "{step}": {truncate((detail or "").strip())}. '
            "The half-built venv was removed and nothing else changed; the running service still uses its "
            "previous environment. Fix the cause and re-run.")


def remove_path(path):
    """Remove a file, link or folder tree as ansible.builtin.file state=absent does (its messages);
    True if something was there."""
    if not os.path.lexists(path):
        return False
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            shutil.rmtree(path)
        except OSError as exc:
            raise SglangFleetError(f"rmtree failed: {exc}") from exc
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SglangFleetError(f"unlinking failed: {exc} ") from exc
    return True


def file_differs(path, data, mode=0o644):
    """Whether `path` lacks `data` (bytes), mode `mode` or root's ownership (what put_file would change)."""
    if read_bytes(path) != data:
        return True
    st = os.stat(path)
    return (st.st_mode & 0o7777) != mode or (st.st_uid, st.st_gid) != (0, 0)


def put_file(path, data, mode=0o644):
    """`path` holds `data` (bytes), mode `mode`, owned by root: written atomically only when its
    bytes differ, its mode and owner set when they differ (ansible.builtin.copy). True if it changed."""
    changed = read_bytes(path) != data
    if changed:
        write_atomic(path, data, mode)
    st = os.stat(path)
    if (st.st_mode & 0o7777) != mode:
        os.chmod(path, mode)
        changed = True
    if (st.st_uid, st.st_gid) != (0, 0):
        os.chown(path, 0, 0)
        changed = True
    return changed


def uv_sha256s(uv_lock):
    """PyPI's sha256 of each uv wheel of the pinned release (one per platform), from its hash-locked requirement."""
    return re.findall(r"sha256:([0-9a-f]{64})", uv_lock)


def unpack_uv(wheel, dest):
    """Install uv's program from its wheel: DEST/bin/uv, whole or not at all (written aside, then renamed).

    A wheel is a zip; uv's carries the static `uv` binary as <name>.data/scripts/uv and nothing it
    needs at run time besides. The caller checked the wheel's sha256 against the lock first, so
    unpacking it is what `pip install --require-hashes` would do, without a venv and its pip."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(".data/scripts/uv")]
        if len(names) != 1:
            raise SglangFleetError(f"{wheel}: expected one .data/scripts/uv in the wheel, found {names or 'none'}")
        target = os.path.join(dest, "bin", "uv")
        with archive.open(names[0]) as src, atomic_file(target, 0o755, binary=True, makedirs=True) as out:
            shutil.copyfileobj(src, out)
    return target


def create_argv(p):
    """The command that creates the venv: `uv venv` or `python -m venv`."""
    if p["installer"] == "uv":
        return [os.path.join(p["uv"], "bin", "uv"), "venv", "--quiet", "--python", p["python"], p["venv"]]
    return [p["python"], "-m", "venv", p["venv"]]


def install_argv(p):
    """The command that installs the lock into the venv: offline, only wheels whose sha256 is in the
    lock (the light lock is sglang alone, --no-deps). The full profile is compiled to bytecode at
    install, as pip does by default and uv does not: the venv belongs to root, so the service user
    could never write __pycache__ and every start would compile torch and SGLang again."""
    if p["installer"] == "uv":
        argv = [os.path.join(p["uv"], "bin", "uv"), "pip", "install", "--python", os.path.join(p["venv"], "bin", "python")]
        argv += ["--compile-bytecode"] if p["profile"] == "full" else []
    else:
        argv = [os.path.join(p["venv"], "bin", "pip"), "install", "--disable-pip-version-check", "--no-input"]
    argv += ["--require-hashes", "--no-index", "--find-links", p["wheelhouse"], "-r", p["lock"]]
    return argv + (["--no-deps"] if p["profile"] == "light" else [])


def _command(step, argv, run):
    """Run one step's command; StepFailed with its stderr (the result's rc, cmd, stdout, stderr) when it fails."""
    try:
        rc, out, err = run(argv)
    except OSError as exc:  # the program is not there or cannot run
        raise StepFailed(step, str(exc), {"cmd": argv, "rc": exc.errno or 2}) from exc
    if rc != 0:
        raise StepFailed(step, err, {"cmd": argv, "rc": rc, "stdout": out, "stderr": err})
    return out


def _step(step, action, *args):
    """Run one step that is not a command; its OSError becomes StepFailed."""
    try:
        return action(*args)
    except (OSError, zipfile.BadZipFile, SglangFleetError) as exc:
        raise StepFailed(step, str(exc)) from exc


def install_uv(p):
    """uv's hash-locked requirement written, the pushed wheel checked against it, uv unpacked (unless
    this release is already there). Returns whether anything changed."""
    changed = _step(UV_LOCK, put_file, p["uv_lock"], p["uv_lock_content"].encode())
    wheel = os.path.join(p["wheelhouse"], p["uv_wheel"])
    actual = file_sha256(wheel) if os.path.isfile(wheel) else None
    locked = uv_sha256s(p["uv_lock_content"])
    if actual not in locked:
        raise StepFailed(UV_CHECK, (
            f"{p['uv_wheel']} on the host has sha256 {actual or '(missing)'}, none of the {len(locked)} that "
            f"{p['uv_lock']} locks for uv {p['uv_version']}: the wheelhouse changed after it was locked; remove the "
            "wheel from the controller's wheelhouse and deploy again."))
    if not os.path.exists(os.path.join(p["uv"], "bin", "uv")):
        _step(UV_INSTALL, unpack_uv, wheel, p["uv"])
        changed = True
    return changed


def build(p, run):
    """Build the venv of `p` (the module's parameters) from its lock. `run(argv)` -> (rc, stdout,
    stderr). Raises StepFailed at the first step that fails; the caller removes the venv then."""
    _step(REMOVE, remove_path, p["venv"])
    if p["installer"] == "uv":
        install_uv(p)
    if not os.path.exists(os.path.join(p["venv"], "bin", "python")):
        _command(CREATE, create_argv(p), run)
    _command(INSTALL, install_argv(p), run)
    _command(CHECK, [os.path.join(p["venv"], "bin", "python"), "-c", CHECK_FILES], run)
    _step(MARK, _mark, p["lock"], p["marker"])


def _mark(lock, marker):
    with open(lock, "rb") as fh:
        put_file(marker, fh.read())
