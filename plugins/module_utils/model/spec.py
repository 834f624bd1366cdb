"""A host's model as the inventory declares it (`sglang_model`), and the folder it lives in on the host.

    sglang_model:
      repo: Qwen/Qwen3.6-27B            # a Hugging Face hub repository (or a mirror's: HF_ENDPOINT)
      revision: 0123...abcd             # its commit, 40 hex: a branch or tag is refused by the fetch
      files: ["*.json", "*.safetensors", "tokenizer*"]   # optional globs (default: every file)
    sglang_model:
      source: /srv/models/my-finetune   # or a folder on the controller
      revision: v3                      # its label (a letter, digit, . _ -): change it when the files change

The revision is staged to `<sglang_model_root>/<org>--<name>/<revision>` on the host, and that
folder is the server's model_path (module_utils/host/host_model.py puts it in the host model's args).

Stdlib only: used by the host model on the controller and by modules.
"""

import fnmatch
import os
import re

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError

# Where staged revisions live on a host, unless sglang_model_root says otherwise.
DEFAULT_ROOT = "/var/lib/sglang-fleet/models"

_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_KEYS = {"repo", "source", "revision", "files"}


class ModelSpecError(SglangFleetError, ValueError):
    """An sglang_model the host model cannot use."""


def parse(model, root=None):
    """The inventory's sglang_model as {kind, repo, source, revision, pinned, files, name, path}.

    kind "hub" (repo) or "source" (a controller folder); pinned: the revision is a commit (a hub
    revision that is not is resolved and refused by the fetch, which prints the commit); name
    the folder under root (`org--name`, or `source--<folder name>`); path the revision's folder.
    """
    if not isinstance(model, dict):
        raise ModelSpecError(f"sglang_model must be a mapping (repo or source, revision, files), got {type(model).__name__}")
    unknown = sorted(set(model) - _KEYS)
    if unknown:
        raise ModelSpecError(f"sglang_model: unknown key(s) {', '.join(map(str, unknown))}; it takes repo or source, "
                             "revision and files")
    repo, source = model.get("repo"), model.get("source")
    if bool(repo) == bool(source):
        raise ModelSpecError("sglang_model: set exactly one of repo (a hub repository, org/name) and source "
                             "(a folder on the controller)")
    revision = model.get("revision")
    if not isinstance(revision, str) or not revision:
        raise ModelSpecError("sglang_model.revision is missing: give the commit (40 hex) of the hub repository, "
                             "or a label of your own for a source folder")
    root = root or DEFAULT_ROOT
    if not isinstance(root, str) or not root.startswith("/") or root.rstrip("/") == "":
        raise ModelSpecError(f"sglang_model_root must be an absolute folder other than /, got {root!r}")
    if repo:
        if not isinstance(repo, str) or not _REPO_RE.match(repo):
            raise ModelSpecError(f"sglang_model.repo {repo!r} is not a hub repository id such as Qwen/Qwen3-8B")
        if not _LABEL_RE.match(revision):
            raise ModelSpecError(f"sglang_model.revision {revision!r} is not a commit, branch or tag name")
        name = repo.replace("/", "--")
    else:
        if not isinstance(source, str) or not source.startswith("/"):
            raise ModelSpecError(f"sglang_model.source {source!r} must be an absolute folder on the controller")
        if not _LABEL_RE.match(revision):
            raise ModelSpecError(f"sglang_model.revision {revision!r}: a label is letters, digits, '.', '_' "
                                 "and '-' (e.g. v3 or 2026-12-04)")
        name = "source--" + (os.path.basename(source.rstrip("/")) or "root")
    files = model.get("files", ["*"])
    if isinstance(files, str):
        files = [files]
    if not isinstance(files, list) or not files or not all(isinstance(g, str) and g for g in files):
        raise ModelSpecError("sglang_model.files must be a list of glob patterns such as ['*.json', '*.safetensors']")
    return {
        "kind": "hub" if repo else "source",
        "repo": repo or None,
        "source": source.rstrip("/") if source else None,
        "revision": revision,
        "pinned": bool(COMMIT_RE.match(revision)) if repo else True,
        "files": list(files),
        "name": name,
        "root": root.rstrip("/"),
        "path": f"{root.rstrip('/')}/{name}/{revision}",
    }


def selected(path, globs):
    """True when a file's relative path matches one of the globs (as huggingface_hub's allow_patterns:
    fnmatch on the whole path, so `*.json` matches `sub/x.json` too)."""
    return any(fnmatch.fnmatch(path, g) for g in globs)


def describe(model):
    """`Qwen/Qwen3.6-27B@0123abcd` (12 hex) or `/srv/models/x@v3`: how reports and messages name a revision."""
    if not model:
        return ""
    what = model.get("repo") or model.get("source")
    revision = model.get("revision") or ""
    return f"{what}@{revision[:12] if COMMIT_RE.match(revision) else revision}"
