"""The lab's Hugging Face hub (lab/hub/hub.py: olah behind its thin front) for one test module."""

import contextlib
import json

from lab_fleet import BIN, REPO, run


@contextlib.contextmanager
def lab_hub(folder):
    """Start a hub with its generated repositories in `folder` on a free port of 127.0.0.1; yields its
    hub.json (endpoint, token, repos: {repo: [commits, oldest first]}, files: {repo: {commit: {path:
    {size, sha256, lfs}}}}), and stops it."""
    hub = [BIN / "python", REPO / "lab" / "hub" / "hub.py"]
    rc, out = run([*hub, "up", "--dir", folder, "--port", "0"], timeout=900)
    assert rc == 0, out
    try:
        yield json.loads((folder / "hub.json").read_text())
    finally:
        run([*hub, "down", "--dir", folder])
