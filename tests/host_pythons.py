"""The Pythons a managed host may run modules with: 3.8 (the oldest ansible-core 2.19 target) to 3.13.

`interpreter(minor)` finds python3.<minor> on PATH or in a pyenv install; tests run the host-side
code under each one found and skip, by name, the versions this machine lacks.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

TARGET_MINORS = [8, 9, 10, 11, 12, 13]


def interpreter(minor: int) -> str | None:
    candidates = [shutil.which(f"python3.{minor}")]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3")))
    for exe in filter(None, candidates):
        p = subprocess.run([exe, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True,
                           check=False)
        if p.returncode == 0 and p.stdout.strip() == str(minor):
            return exe
    return None
