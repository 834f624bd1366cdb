"""One home per concept (issue #43): a helper the collection has once is not written again beside it."""

import ast
import builtins
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
CODE = sorted(p for root in ("plugins", "filter_plugins") for p in (REPO / root).rglob("*.py"))
FILES_HELPER = REPO / "plugins" / "module_utils" / "files.py"


def rel(path):
    return str(path.relative_to(REPO))


def test_files_are_put_in_place_by_the_one_helper():
    """A temporary file renamed into place is module_utils/files.py's (atomic_file, write_atomic,
    publish_dir, move_files, replace_symlink): its modes, fsync and clean-up are then the same everywhere."""
    pattern = re.compile(r"\bos\.(replace|rename)\(|\b(mkstemp|NamedTemporaryFile)\(")
    allowed = {
        # a scratch listing for rsync --files-from, deleted when done: not a file put in place
        ("plugins/module_utils/model/stage.py", "NamedTemporaryFile"),
    }
    found = []
    for path in CODE:
        if path == FILES_HELPER:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in pattern.finditer(line):
                name = m.group(1) or m.group(2)
                if (rel(path), name) not in allowed:
                    found.append(f"{rel(path)}:{n}: {line.strip()}")
    assert not found, "use plugins/module_utils/files.py:\n" + "\n".join(found)


def python_files(*roots):
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def test_a_median_is_statistics_median():
    """No hand-written median beside the standard library's (statistics.median, median_high...)."""
    found = [f"{rel(path)}:{node.lineno} def {node.name}"
             for path in python_files("plugins", "filter_plugins", "scripts", "bench", "sglang_fleet", "tests")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.strip("_") == "median"]
    assert not found, "use statistics.median:\n" + "\n".join(found)


# Copied to hosts, or loaded by path outside the collection (tests/gpu/h200_capture.py on a GPU machine,
# the host Pythons' tests): they import nothing of the collection, so their errors keep their builtin base.
SELF_CONTAINED = ("plugins/module_utils/source/", "plugins/module_utils/verify/bench_client.py",
                  "plugins/module_utils/host/gpu_facts.py", "plugins/module_utils/verify/roofline.py")
BUILTIN_ERRORS = {name for name in dir(builtins) if isinstance(getattr(builtins, name), type)
                  and issubclass(getattr(builtins, name), BaseException)}


def test_every_error_class_derives_from_the_one_root():
    """module_utils/errors.py's SglangFleetError is every public error's root; an older base
    (ValueError, RuntimeError) stays beside it where callers catch that. A private (_Name) class is
    a module's own control flow and never leaves it."""
    found = []
    for path in python_files("plugins", "filter_plugins"):
        if rel(path).startswith(SELF_CONTAINED):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_") or node.name == "SglangFleetError":
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if any(b in BUILTIN_ERRORS for b in bases) and "SglangFleetError" not in bases:
                found.append(f"{rel(path)}:{node.lineno} class {node.name}({', '.join(bases)})")
    assert not found, "derive from errors.SglangFleetError:\n" + "\n".join(found)


def test_no_module_imports_another_modules_private_name():
    """A name another module needs is public (no leading underscore); `import x as _x` aliases are fine.
    Tests may import private names of the module they test."""
    found = [f"{rel(path)}:{node.lineno} from {'.' * node.level}{node.module or ''} import {alias.name}"
             for path in python_files("plugins", "filter_plugins")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom)
             for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, "make these names public:\n" + "\n".join(found)
