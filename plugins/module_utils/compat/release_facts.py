"""The facts of one SGLang release for one host, resolved on the controller and cached.

What sglang==X really installs on a GPU host: the full profile's pins (the same hash-locked lock
ml_env makes, `uv pip compile`, kept under <wheelhouse>/locks and shared with ml_env), the PyPI
files of its compiled packages (wheel tags, Requires-Python, sizes; kept under <wheelhouse>/pypi)
and the profile's download and installed size. An offline controller works from those caches;
with nothing cached the facts say so (`error`), and every check that needs them is "unknown".

Controller only (the sglang_compat module is delegated to localhost): uses packaging and urllib.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import time
import urllib.error
import urllib.request
import zipfile

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from ansible_collections.sglang.fleet.plugins.module_utils.compat.checks import KEY_PACKAGES, UNPACK_FACTOR, wheel_tags
from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.files import atomic_file
from ansible_collections.sglang.fleet.plugins.module_utils.release.wheels import (
    WheelError,
    check_hash,
    choose_wheel,
    full_requirement,
    host_tags,
    make_lock,
    parse_lock,
    pip_download,
)

PYPI = "https://pypi.org"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
FILES_MAX_AGE = 7 * 86400  # files of one version (a late aarch64 upload shows up within a week)
INDEX_MAX_AGE = 86400  # the list of every sglang release (for "the newest release that installs here")
# Where a host's own resolution fails, the pins are read from these instead (the tags then say why).
REFERENCE = (("host", "2.40"), ("3.12", "2.40"))


class CompatError(SglangFleetError):
    """Release facts that could not be read (offline controller, nothing cached...)."""


def fetch_json(url, accept=None, timeout=60):
    request = urllib.request.Request(url, headers={"Accept": accept or "application/json",
                                                   "User-Agent": "sglang-fleet-compat"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (https index URL)
        return json.loads(response.read().decode("utf-8"))


def _cached(path, max_age):
    """(data, fresh) of a cache file, or (None, False)."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None, False
    return data, time.time() - os.path.getmtime(path) < max_age


def _write(path, data):
    with atomic_file(path, 0o600, fsync=False, makedirs=True) as fh:
        json.dump(data, fh, indent=1, sort_keys=True)


def _file_version(filename):
    try:
        return parse_wheel_filename(filename)[1]
    except InvalidWheelFilename:
        pass
    try:
        return parse_sdist_filename(filename)[1]
    except InvalidSdistFilename:
        return None


class Pypi:
    """PyPI's files per (name, version), from the JSON API (/pypi/<name>/<version>/json), else the
    simple index's JSON form (PEP 691, what pip and uv read), cached under <cache>/pypi/."""

    def __init__(self, cache, index=PYPI, fetch=fetch_json):
        self.folder = os.path.join(cache, "pypi")
        self.index, self.fetch = index.rstrip("/"), fetch
        self.json_api = True  # dropped after the first 404: some mirrors serve the simple index only

    def _simple(self, name):
        data = self.fetch(f"{self.index}/simple/{canonicalize_name(name)}/", SIMPLE_JSON)
        return [{"filename": f["filename"], "size": f.get("size"), "requires_python": f.get("requires-python"),
                 "yanked": bool(f.get("yanked"))} for f in data.get("files", [])]

    def files(self, name, version):
        """[{filename, size, requires_python, yanked}] of name==version."""
        path = os.path.join(self.folder, f"{canonicalize_name(name)}-{version}.json")
        data, fresh = _cached(path, FILES_MAX_AGE)
        if fresh:
            return data
        try:
            files = None
            if self.json_api:
                try:
                    got = self.fetch(f"{self.index}/pypi/{canonicalize_name(name)}/{version}/json")
                    files = [{"filename": u["filename"], "size": u.get("size"),
                              "requires_python": u.get("requires_python"), "yanked": bool(u.get("yanked"))}
                             for u in got.get("urls", [])]
                except urllib.error.HTTPError as exc:
                    if exc.code != 404:
                        raise
                    self.json_api = False
            if files is None:
                want = Version(version)
                files = [f for f in self._simple(name) if _file_version(f["filename"]) == want]
            if not files:
                raise CompatError(f"{name} {version} has no files on {self.index}")
        except (OSError, ValueError, urllib.error.URLError) as exc:
            if data is not None:
                return data  # stale beats nothing on an offline controller
            raise CompatError(f"could not read {name} {version}'s files from {self.index} ({exc}) and none are "
                              f"cached in {self.folder}") from exc
        _write(path, files)
        return files

    def index_files(self, name):
        """Every release's files of `name` (for the newest release that installs on a host), or []."""
        path = os.path.join(self.folder, f"{canonicalize_name(name)}-index.json")
        data, fresh = _cached(path, INDEX_MAX_AGE)
        if fresh:
            return data
        try:
            files = [{k: f[k] for k in ("filename", "requires_python", "yanked")} for f in self._simple(name)]
        except (OSError, ValueError, urllib.error.URLError):
            return data or []
        _write(path, files)
        return files


def uv_reason(message):
    """uv's own reason from a WheelError of make_lock ("Because ... unsatisfiable."), shortened."""
    text = re.sub(r"\s+", " ", message.split(" -- hosts install")[0])
    m = re.search(r"(Because .*?)(?: hint:|$)", text)
    reason = m.group(1).strip() if m else text.strip()
    reason = re.sub(r"(, we can conclude that .*? cannot be used)\. And because you require .*$", r"\1.", reason)
    return reason[:400]


def full_pins(run, uv, dest, version, python_version, architecture, glibc, extra_pins, retries=3):
    """The full profile's lock for one platform, made (or reused) exactly as ml_env makes it: (pins, lock path)."""
    light_file, light = make_lock(run, uv, dest, f"sglang-{version}-light", f"sglang=={version}", python_version,
                                  architecture, glibc, True, retries=retries)
    tags = host_tags(python_version, architecture, glibc)
    wheel = choose_wheel(dest, "sglang", version, tags)
    if not wheel:
        rc, _, err, _ = pip_download(run, dest, [f"sglang=={version}"], python_version, architecture, glibc, retries)
        if rc != 0:
            raise WheelError(f"could not download sglang=={version}: {(err or '').strip().splitlines()[-1:] or rc}")
        wheel = choose_wheel(dest, "sglang", version, tags)
        if not wheel:
            raise WheelError(f"no sglang {version} wheel for CPython {python_version} on {architecture} in {dest}")
    check_hash(wheel, "sglang", version, parse_lock(light)["sglang"][1], light_file)
    _, requirement, constraints, overrides = full_requirement(wheel, version, python_version, architecture,
                                                              extra_pins)
    path, text = make_lock(run, uv, dest, f"sglang-{version}-full", requirement, python_version, architecture, glibc,
                           False, constraints, overrides, retries)
    return {name: v for name, (v, _) in parse_lock(text).items()}, path, wheel


def _unresolvable(dest, version, python_version, architecture, glibc, extra_pins, reason=None):
    """A resolution that failed in the last day (uv's message), or None; with `reason`, remember one."""
    key = json.dumps([version, python_version, architecture, glibc, sorted((extra_pins or {}).items())])
    path = os.path.join(dest, "pypi", "unresolvable", hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")
    if reason is not None:
        _write(path, {"inputs": key, "reason": reason})
        return reason
    data, fresh = _cached(path, INDEX_MAX_AGE)
    return data["reason"] if data and fresh else None


def unpacked_size(wheel):
    with zipfile.ZipFile(wheel) as zf:
        return sum(i.file_size for i in zf.infolist())


def profile_size(pins, profile, dest, tags, pypi, sglang_wheel=None):
    """{"wheels", "wheel_bytes", "installed_bytes", "method"} of what the profile installs, or {"error"}."""
    names = ["sglang"] if profile == "light" else sorted(pins)
    wheel_bytes = installed = 0
    measured = estimated = 0
    missing = []

    def one(name):
        local = sglang_wheel if name == "sglang" and sglang_wheel else choose_wheel(dest, name, pins[name], tags)
        if local:
            return os.path.getsize(local), unpacked_size(local), True
        files = pypi.files(name, pins[name])
        rank = {t: i for i, t in enumerate(tags)}
        best = min(((min((rank[t] for t in wheel_tags(f["filename"]) or () if t in rank), default=None), f)
                    for f in files), key=lambda x: (x[0] is None, x[0] or 0))
        if best[0] is None or not best[1].get("size"):
            raise CompatError(f"no {name} {pins[name]} wheel with a size for this host")
        return best[1]["size"], int(best[1]["size"] * UNPACK_FACTOR), False

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(one, name) for name in names}
        for name, future in futures.items():
            try:
                size, unpacked, exact = future.result()
            except (CompatError, OSError, zipfile.BadZipFile) as exc:
                missing.append(f"{name}: {exc}")
                continue
            wheel_bytes += size
            installed += unpacked
            measured, estimated = measured + exact, estimated + (not exact)
    if missing:
        return {"error": f"{len(missing)} wheel size(s) unknown ({'; '.join(missing[:3])})"}
    method = (f"{measured} measured from the wheels in the controller wheelhouse" if measured else "") + (
        (", " if measured and estimated else "") + (f"{estimated} from PyPI sizes x {UNPACK_FACTOR} unpacked"
                                                    if estimated else ""))
    return {"wheels": len(names), "wheel_bytes": wheel_bytes, "installed_bytes": installed, "method": method}


def release_facts(run, uv, dest, version, python_version, architecture, glibc, extra_pins=None, profile="full",
                  retries=3, pypi=None):
    """Everything the checks need about sglang==version for one host (see module docstring)."""
    pypi = pypi or Pypi(dest)
    facts = {"version": version, "pins": {"sglang": version}, "files": {}, "size": {}, "resolved_for": None,
             "resolve_error": None, "error": None}
    attempts = [(python_version, glibc)] + [(python_version if py == "host" else py, gl) for py, gl in REFERENCE]
    pins = wheel = None
    for py, gl in dict.fromkeys(attempts):
        if not gl:
            continue
        known = _unresolvable(dest, version, py, architecture, gl, extra_pins)
        try:
            if known:
                raise WheelError(known)
            pins, _, wheel = full_pins(run, uv, dest, version, py, architecture, gl, extra_pins, retries)
            facts["resolved_for"] = f"CPython {py} on {architecture}-manylinux_{gl.replace('.', '_')}"
            break
        except WheelError as exc:
            reason = uv_reason(str(exc))
            if (py, gl) == (python_version, glibc):
                facts["resolve_error"] = reason
            if "No solution found" not in str(exc) and not known:
                # The index is out of reach and nothing is cached: no point trying more.
                facts["error"] = (f"the controller could not resolve sglang {version} (is it offline? nothing is "
                                  f"cached in {dest}/locks for this host): {reason}")
                break
            if not known:
                _unresolvable(dest, version, py, architecture, gl, extra_pins, str(exc))
            if not re.search(r"platform tag|Python implementation tag|requires Python|Python>=|python_version",
                             reason):
                break  # a reason no other platform changes (a dependency without any wheel)
    if pins is None:
        if not facts["error"]:
            facts["resolve_error"] = facts["resolve_error"] or "no platform resolved"
        pins = {"sglang": version}
    facts["pins"] = pins
    for name in KEY_PACKAGES:
        if name in pins:
            try:
                facts["files"][name] = pypi.files(name, pins[name])
            except CompatError as exc:
                facts["files_error"] = str(exc)
    if facts.get("files_error") and not facts["resolve_error"]:
        facts["resolve_error"] = facts["files_error"]
    facts["index_files"] = pypi.index_files("sglang")
    if wheel is None and profile == "light" and glibc and not facts["error"]:
        wheel = choose_wheel(dest, "sglang", version, host_tags(python_version, architecture, glibc))
        if wheel:  # the light profile is this wheel alone, whatever the full profile does
            facts["size"]["light"] = profile_size(pins, "light", dest, [], pypi, wheel)
            return facts
    if facts["error"] is None and glibc and (wheel or profile == "full"):
        host_ok = facts["resolve_error"] is None
        if profile == "light" and wheel and host_ok:
            facts["size"]["light"] = profile_size(pins, "light", dest, [], pypi, wheel)
        elif profile == "full" and host_ok:
            facts["size"]["full"] = profile_size(pins, "full", dest, host_tags(python_version, architecture, glibc),
                                                 pypi)
        else:
            facts["size"][profile] = {"error": "the release does not resolve for this host"}
    return facts
