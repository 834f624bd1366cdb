"""Fetch a model revision once, on the controller, and write or check its lock.

A hub revision comes through the real huggingface_hub client (its endpoint: sglang_model_endpoint,
else HF_ENDPOINT, else huggingface.co) into `<cache>/<name>/<revision>/`; a source folder is read
where it is. Every file the globs select is hashed; the sizes and LFS sha256 the hub lists must
agree with the bytes, and an existing lock must agree with both, before anything is staged.
"""

import json
import os

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError
from ansible_collections.sglang.fleet.plugins.module_utils.host.check import model_facts
from ansible_collections.sglang.fleet.plugins.module_utils.model import lock as model_lock
from ansible_collections.sglang.fleet.plugins.module_utils.model.files import sha256_file
from ansible_collections.sglang.fleet.plugins.module_utils.model.spec import selected
from ansible_collections.sglang.fleet.plugins.module_utils.model.stage import set_mtimes

FETCHED = ".sglang-fleet-fetched.json"  # in a hub revision's cache folder: its lock, once the bytes agreed


class FetchError(SglangFleetError, RuntimeError):
    """A revision that cannot be fetched or does not agree with its lock (the message says how to fix it)."""


def _hub_error(exc, model, endpoint, has_token):
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    repo, revision = model["repo"], model["revision"]
    if isinstance(exc, GatedRepoError):
        return (f"{repo} on {endpoint} is gated: "
                + ("the token given cannot read it (ask for access on the hub with that account)" if has_token
                   else "it needs a token with access; put one in sglang_model_hf_token (from the vault)"))
    if isinstance(exc, RepositoryNotFoundError):
        return (f"{repo}: no such repository on {endpoint} (or a private one the "
                f"{'token given' if has_token else 'anonymous client'} cannot see); check sglang_model.repo")
    if isinstance(exc, RevisionNotFoundError):
        return f"{repo} on {endpoint} has no revision {revision}; check sglang_model.revision"
    if isinstance(exc, HfHubHTTPError):
        status = getattr(exc.response, "status_code", "?")
        if status in (401, 403):
            return (f"{endpoint} refused {repo} ({status}): the token "
                    + ("given has no access to it" if has_token else "is missing; set sglang_model_hf_token"))
        return f"{endpoint} answered {status} for {repo}@{revision}: {str(exc).splitlines()[0]}"
    return f"cannot reach {endpoint} for {repo}: {exc.__class__.__name__}: {exc}; set sglang_model_endpoint (or HF_ENDPOINT) to a hub this controller reaches"


def _hash_files(folder, listing):
    return [{"path": f["path"], "size": os.path.getsize(os.path.join(folder, f["path"])),
             "sha256": sha256_file(os.path.join(folder, f["path"]))} for f in listing]


def _read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (FileNotFoundError, ValueError):
        return None


def fetch_hub(model, known, cache_dir, endpoint, token):
    """(files [{path, size, sha256}], folder, bytes downloaded) of a hub revision."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.hf_api import RepoFile

    repo, revision = model["repo"], model["revision"]
    api = HfApi(endpoint=endpoint, token=token)
    try:
        sha = api.model_info(repo, revision=revision).sha
        if sha != revision:
            raise FetchError(f"sglang_model.revision {revision!r} of {repo} is a branch, a tag or a short commit, "
                             f"which can move; pin the commit it resolves to now: revision: {sha}")
        listing = [{"path": e.path, "size": e.size, "sha256": e.lfs.sha256 if e.lfs else None}
                   for e in api.list_repo_tree(repo, revision=sha, recursive=True) if isinstance(e, RepoFile)]
    except FetchError:
        raise
    except Exception as exc:  # huggingface_hub's errors and the HTTP client's: each gets its fix
        raise FetchError(_hub_error(exc, model, endpoint, bool(token))) from None
    picked = sorted((f for f in listing if selected(f["path"], model["files"])), key=lambda f: f["path"])
    if not picked:
        names = ", ".join(sorted(f["path"] for f in listing)[:12])
        raise FetchError(f"sglang_model.files {model['files']} match no file of {repo}@{sha[:12]}, which has: {names}")
    _check_lock(known, picked, endpoint)
    folder = os.path.join(cache_dir, model["name"], revision)
    fetched = _read_json(os.path.join(folder, FETCHED))
    if fetched and [f["path"] for f in fetched["files"]] == [f["path"] for f in picked] and all(
            os.path.isfile(os.path.join(folder, f["path"])) and os.path.getsize(os.path.join(folder, f["path"])) == f["size"]
            for f in fetched["files"]):
        _check_lock(known, fetched["files"], endpoint)   # the cache's bytes agreed with the hub when fetched
        return fetched["files"], folder, 0
    present = sum(f["size"] for f in picked if os.path.isfile(os.path.join(folder, f["path"]))
                  and os.path.getsize(os.path.join(folder, f["path"])) == f["size"])
    try:
        snapshot_download(repo, revision=sha, allow_patterns=[f["path"] for f in picked], local_dir=folder,
                          token=token, endpoint=endpoint)
    except Exception as exc:
        raise FetchError(_hub_error(exc, model, endpoint, bool(token))) from None
    files = _hash_files(folder, picked)
    wrong = model_lock.differences(picked, files, what=f"{endpoint}'s listing")
    if wrong:
        raise FetchError(f"the download of {repo}@{sha[:12]} into {folder} does not match: {'; '.join(wrong[:5])}; "
                         "delete that folder to download it again")
    _check_lock(known, files, endpoint)
    set_mtimes(folder, files)  # the same bytes, the same mtime: rsync's quick check and --link-dest see them
    model_lock.write(os.path.join(folder, FETCHED), model_lock.make(model, files))
    return files, folder, model_lock.total_bytes({"files": files}) - present


def fetch_source(model, known, cache_dir):
    """(files, folder, 0) of a controller folder; hashes are kept by (size, mtime) between runs."""
    folder = model["source"]
    if not os.path.isdir(folder):
        raise FetchError(f"sglang_model.source {folder} is not a folder on the controller")
    paths = sorted(os.path.relpath(os.path.join(d, n), folder) for d, _dirs, names in os.walk(folder) for n in names)
    paths = [p for p in paths if selected(p, model["files"]) and not p.startswith(".")]
    if not paths:
        raise FetchError(f"sglang_model.files {model['files']} match no file under {folder}")
    stat_file = os.path.join(cache_dir, model["name"], f"{model['revision']}.stat.json")
    seen = _read_json(stat_file) or {}
    files, stats = [], {}
    for p in paths:
        st = os.stat(os.path.join(folder, p))
        key = [st.st_size, st.st_mtime_ns]
        sha = seen[p][2] if p in seen and seen[p][:2] == key else sha256_file(os.path.join(folder, p))
        files.append({"path": p, "size": st.st_size, "sha256": sha})
        stats[p] = key + [sha]
    if known:
        wrong = model_lock.differences(known["files"], files)
        if wrong:
            raise FetchError(f"the files of {folder} changed since revision {model['revision']} was locked "
                             f"({'; '.join(wrong[:5])}): give them a new sglang_model.revision label (the hosts keep the "
                             "old revision for rollback), or put the locked files back")
    model_lock.write(stat_file, stats)
    return files, folder, 0


def _check_lock(known, files, endpoint):
    """Refuse files (a listing, or hashed bytes) that disagree with the lock, when there is one."""
    wrong = model_lock.differences(known["files"], files) if known else []
    if wrong:
        raise FetchError(_disagrees(known, endpoint, wrong))


def _disagrees(known, endpoint, wrong):
    return (f"the lock of {known.get('repo')}@{known['revision']} disagrees with {endpoint}: {'; '.join(wrong[:5])}. "
            "A commit's files cannot change on a hub: check the endpoint, or delete the lock to take the hub's files")


def fetch(model, lock_dir, cache_dir, endpoint=None, token=None, write_lock=True):
    """Fetch `model` (a parsed sglang_model) and write its lock when it has none (unless `write_lock` is
    false: --check). Returns {lock, lock_file, lock_written, folder, downloaded_bytes, total_bytes,
    model_facts}; raises FetchError."""
    lock_file = model_lock.path_of(lock_dir, model)
    try:
        known = model_lock.read(lock_file)
    except ValueError as exc:
        raise FetchError(f"{lock_file} is not a lock ({exc}); delete it to write it again") from None
    if model["kind"] == "hub":
        files, folder, downloaded = fetch_hub(model, known, cache_dir, endpoint, token)
    else:
        files, folder, downloaded = fetch_source(model, known, cache_dir)
    lock = model_lock.make(model, files)
    if not known and write_lock:
        model_lock.write(lock_file, lock)
    return {"lock": lock, "lock_file": lock_file, "lock_written": not known and write_lock, "folder": folder,
            "downloaded_bytes": downloaded, "total_bytes": model_lock.total_bytes(lock),
            "model_facts": model_facts(folder)}
