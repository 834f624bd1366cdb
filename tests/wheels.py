"""Real SGLang release sources for tests: download a wheel from PyPI once, extract `sglang/`.

    from tests.wheels import sglang_source_tree
    tree = sglang_source_tree("0.5.11")   # -> <repo>/.cache/sglang-src/0.5.11/sglang

Wheels are cached in `.cache/sglang-wheels/`, extracted trees in `.cache/sglang-src/<version>/`.
Idempotent and safe when several processes (pytest-xdist workers, the simulator's tests) ask for
the same version at once: a per-version lock file serialises the work, the extraction goes to a
temporary folder that is renamed into place, and a `.complete` marker says the tree is whole.
"""
from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO = pathlib.Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache"
WHEELS = CACHE / "sglang-wheels"
SOURCES = CACHE / "sglang-src"

# Releases the source-reader tests cover (one or more per flag-layout era).
VERSIONS = (
    "0.4.10.post2",
    "0.5.6",
    "0.5.9",
    "0.5.11",
    "0.5.13.post1",
    "0.5.16",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.23",
)


def pip_python() -> str:
    """A Python interpreter that has pip: this one if possible (the dev venv has none)."""
    candidates = [sys.executable, shutil.which("python3"), shutil.which("python")]
    for exe in candidates:
        if exe and subprocess.run([exe, "-m", "pip", "--version"], check=False, capture_output=True).returncode == 0:
            return exe
    raise RuntimeError(f"no Python with pip found to download sglang wheels (tried {candidates})")


def _find_wheel(version: str) -> pathlib.Path | None:
    hits = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    return hits[0] if hits else None


def sglang_wheel(version: str) -> pathlib.Path:
    """Path to the cached wheel of `sglang==version`, downloading it from PyPI if missing."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    wheel = _find_wheel(version)
    if wheel is not None:
        return wheel
    with _lock(WHEELS / f".sglang-{version}.lock"):
        wheel = _find_wheel(version)
        if wheel is not None:
            return wheel
        with tempfile.TemporaryDirectory(dir=WHEELS, prefix=".dl-") as tmp:
            cmd = [pip_python(), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-q", f"sglang=={version}", "-d", tmp]
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"pip download sglang=={version} failed (rc {proc.returncode}):\n"
                                   f"{proc.stderr[-2000:]}")
            got = sorted(pathlib.Path(tmp).glob("sglang-*.whl"))
            if not got:
                raise RuntimeError(f"pip download sglang=={version} produced no wheel in {tmp}")
            final = WHEELS / got[0].name
            os.replace(got[0], final)  # atomic within one file system
            return final


def sglang_source_tree(version: str) -> pathlib.Path:
    """Path to the extracted `sglang/` package of release `version` (only `sglang/` is extracted)."""
    dest = SOURCES / version
    pkg = dest / "sglang"
    marker = dest / ".complete"
    if marker.exists():
        return pkg
    wheel = sglang_wheel(version)
    SOURCES.mkdir(parents=True, exist_ok=True)
    with _lock(SOURCES / f".{version}.lock"):
        if marker.exists():
            return pkg
        tmp = pathlib.Path(tempfile.mkdtemp(dir=SOURCES, prefix=f".{version}-"))
        try:
            with zipfile.ZipFile(wheel) as zf:
                members = [n for n in zf.namelist() if n.startswith("sglang/") and ".." not in n]
                zf.extractall(tmp, members=members)
            if not (tmp / "sglang").is_dir():
                raise RuntimeError(f"{wheel.name} contains no sglang/ package")
            if dest.exists():  # a half-finished earlier attempt (no marker)
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        marker.write_text(wheel.name + "\n")
    return pkg


# era C's arg_groups are msgspec Structs: the real parser of 0.5.20+ needs it beside the stdlib
MSGSPEC = "msgspec==0.23.0"
MSGSPEC_DIR = CACHE / f"msgspec-py{sys.version_info.major}{sys.version_info.minor}"


def msgspec_dir() -> pathlib.Path:
    """A folder holding the pinned msgspec for this Python (installed once into the cache)."""
    if not (MSGSPEC_DIR / "msgspec").is_dir():
        subprocess.run([pip_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--only-binary=:all:", "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
                        "--target", str(MSGSPEC_DIR), MSGSPEC], check=True, capture_output=True)
    return MSGSPEC_DIR


class _lock:
    """Exclusive advisory lock on a file (POSIX flock), released on exit."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


if __name__ == "__main__":  # python tests/wheels.py 0.5.11 0.5.20 ...
    for v in sys.argv[1:] or VERSIONS:
        print(v, sglang_source_tree(v))


def ml_env_on_disk(root: pathlib.Path, version: str = "0.5.11", profile: str = "light") -> tuple[pathlib.Path, pathlib.Path]:
    """(venv, lock) of an ml_env folder as ml_env leaves it under `root`, the release's real `sglang/`
    linked into the venv: the venv, its lock marker matching the lock, and `current` pointing at it."""
    venv = root / f"sglang-{version}"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "sglang").symlink_to(sglang_source_tree(version))
    lock = root / "locks" / f"sglang-{version}-{profile}.txt"
    lock.parent.mkdir()
    lock.write_text(f"sglang=={version}\n")
    (venv / ".sglang-fleet-lock.txt").write_text(f"sglang=={version}\n")
    (root / "current").symlink_to(venv)
    return venv, lock
