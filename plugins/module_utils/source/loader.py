"""``load_source``: read an installed sglang package (version, layout, flags, rules)."""
from __future__ import annotations

import ast
import platform
import sys
from pathlib import Path

from . import layouts
from .extract import Extractor
from .model import PYTHON_FLOOR, SglangSource, UnknownLayout, UnsupportedPython
from .rules import extract_rules
from .tree import Tree


def _read_version(pkg: Path) -> str:
    for rel in ("_version.py", "version.py"):
        p = pkg / rel
        if not p.is_file():
            continue
        tree = ast.parse(p.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, str) \
                    and any(isinstance(t, ast.Name) and t.id in ("__version__", "version")
                            for t in node.targets):
                return node.value.value
    # Installed without _version.py: the dist-info next to the package knows.
    for meta in sorted(pkg.parent.glob("sglang-*.dist-info/METADATA")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise UnknownLayout(f"{pkg}: cannot read the sglang version (no _version.py/version.py "
                        "with a literal __version__, no sglang-*.dist-info)")


def load_source(sglang_dir) -> SglangSource:
    """Read the sglang package at ``sglang_dir`` (the folder holding ``srt/server_args.py``)."""
    if sys.version_info < PYTHON_FLOOR:
        raise UnsupportedPython(
            f"reading SGLang's source on the host needs Python {'.'.join(map(str, PYTHON_FLOOR))} or newer, and "
            f"Ansible runs {sys.executable} ({platform.python_version()}) there: set ansible_python_interpreter "
            "for this host to a newer Python (the ml-env venv's bin/python is one)")
    pkg = Path(sglang_dir)
    if pkg.name != "sglang" and (pkg / "sglang").is_dir():
        pkg = pkg / "sglang"
    if not (pkg / "srt" / "server_args.py").is_file():
        raise UnknownLayout(f"{pkg}: no srt/server_args.py; expected the installed sglang/ package folder")
    version = _read_version(pkg)
    tree = Tree(pkg)
    ex = Extractor(tree)
    layout = layouts.detect(ex)
    era = layout.name
    try:
        flags = ex.run(layout)
    except UnknownLayout:
        raise
    except (SyntaxError, KeyError, AttributeError) as e:
        raise UnknownLayout(f"{pkg}: sglang {version} looks like era {era} but reading its flags "
                            f"failed: {type(e).__name__}: {e}") from e
    if len(flags) < 50:
        raise UnknownLayout(f"{pkg}: sglang {version} era {era}: only {len(flags)} flags found; "
                            "the flag layout changed")
    src = SglangSource(path=str(pkg), version=version, era=era, flags=flags, _tree=tree)
    src.rules = extract_rules(src, tree)
    return src
