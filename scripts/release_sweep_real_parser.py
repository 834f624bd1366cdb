"""The REAL SGLang server parser of an extracted wheel, with its types and defaults, as JSON.

Run by scripts/release_sweep.py in a throwaway interpreter (stdlib only):
    python -S -s release_sweep_real_parser.py SGLANG_PARENT MSGSPEC_PARENT  ->  JSON on stdout
    python -S -s release_sweep_real_parser.py --parse SGLANG_PARENT MSGSPEC_PARENT < argvs.json

It is tests/source/real_parser_dump.py (sglang's own ``server_args.py`` / ``arg_groups/`` executed,
every other import stubbed) with one change: an sglang module whose imports are all standard
library (or msgspec, or other such sglang modules) runs for real instead of being stubbed, so
values it defines (``Backend.ALL`` of ``model_executor/cuda_graph_config.py``, the environment
registry of ``srt/environ.py``, ...) reach the parser as the release defines them. Values that still
come from a stub are marked ``{"stub": ...}`` so that the sweep does not compare them.
"""
import ast
import importlib
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "source"))
import real_parser_dump as base  # noqa: E402  (the tests' stubs and parse loop)

_ALLOWED_TOPS = set(sys.stdlib_module_names) | {"msgspec", "__future__"}


class _Real:
    """Which sglang modules may run for real: every import in them, transitively, is stdlib/msgspec."""

    def __init__(self, root):
        self.root = root
        self.memo = {}

    def path(self, fullname):
        base_path = os.path.join(self.root, *fullname.split("."))
        if os.path.isfile(base_path + ".py"):
            return base_path + ".py", False
        init = os.path.join(base_path, "__init__.py")
        if os.path.isfile(init):
            return init, True
        return None, False

    def ok(self, fullname):
        if fullname.startswith(base.REAL_SGLANG):
            return True  # server_args / arg_groups run for real anyway
        if fullname in self.memo:
            return self.memo[fullname]
        self.memo[fullname] = False  # cycles: not proven real-safe
        path, is_pkg = self.path(fullname)
        if path is None:
            return False
        try:
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError):
            return False
        package = fullname if is_pkg else fullname.rpartition(".")[0]
        for name in self._imports(tree.body, package):
            top = name.split(".")[0]
            if top in _ALLOWED_TOPS:
                continue
            if top != "sglang" or not self.ok(name):
                return False
        self.memo[fullname] = True
        return True

    def _imports(self, body, package):
        """Every module name the file imports, anywhere (a function may run at import time)."""
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            if isinstance(node, ast.Import):
                for a in node.names:
                    yield a.name
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    mod = ".".join(parts + ([mod] if mod else []))
                yield mod
                for a in node.names:  # `from pkg import submodule`
                    if self.path(f"{mod}.{a.name}")[0] is not None:
                        yield f"{mod}.{a.name}"


class _Imported(base._Any):
    """A name imported from a stubbed module: truthy, as a real function or class is.

    (``Arg(type_parser=human_readable_int)`` is used as ``type_parser or <inferred type>``: a falsy
    stub would silently turn into ``int``.) What it returns when called is falsy, as before, so
    ``if is_cuda():`` still reads as "not CUDA".
    """

    def __bool__(self):
        return True


def _iter_stub(self):
    """Iterating a stub yields one stub element (the tests' stubs yield none), so that a list built
    from a stubbed registry (``["auto"] + list(ReasoningParser.DetectorMap.keys())``) shows it."""
    return iter((base._Any(f"{self._name}[*]"),))


base._Any.__iter__ = _iter_stub


class _StubModule(base._StubModule):
    """A stubbed package whose real-safe submodules import for real on attribute access."""

    REAL = None

    def __getattr__(self, attr):
        name = f"{self.__name__}.{attr}"
        if not attr.startswith("__") and self.REAL is not None and self.REAL.ok(name):
            return importlib.import_module(name)
        if (attr.startswith("__") and attr.endswith("__")) or attr in self.ABSENT:
            raise AttributeError(attr)
        value = _Imported(name)
        setattr(self, attr, value)
        return value


class _StubLoader(base._StubLoader):
    def create_module(self, spec):
        module = _StubModule(spec.name)
        if spec.submodule_search_locations:
            module.__path__ = list(spec.submodule_search_locations)
        return module


class _Finder(base._StubFinder):
    def __init__(self, root):
        super().__init__(root)
        self.real = _Real(root)
        _StubModule.REAL = self.real

    def find_spec(self, fullname, path, target=None):
        top = fullname.split(".")[0]
        if top == "sglang" and fullname not in ("sglang", "sglang.srt") \
                and not fullname.startswith(base.REAL_SGLANG) and self.real.ok(fullname):
            file, is_pkg = self.real.path(fullname)
            return importlib.util.spec_from_file_location(
                fullname, file, submodule_search_locations=[os.path.dirname(file)] if is_pkg else None)
        spec = super().find_spec(fullname, path, target)
        if spec is not None and isinstance(spec.loader, base._StubLoader):
            spec.loader = _StubLoader()
        return spec


def _stubbed(value) -> bool:
    if isinstance(value, base._Any):
        return True
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_stubbed(v) for v in value)
    if isinstance(value, dict):
        return any(_stubbed(k) or _stubbed(v) for k, v in value.items())
    return False


def _plain(value):
    """A default or choice as JSON: enum members by value, containers as lists, others as text."""
    if _stubbed(value):
        return {"stub": str(value)}
    if hasattr(value, "value") and type(value).__mro__[1:2] and "Enum" in str(type(value).__mro__):
        return _plain(value.value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"repr": repr(value)}


def _type_name(t):
    if t is None:
        return None
    if isinstance(t, base._Any):
        return {"stub": str(t)}
    name = getattr(t, "__name__", None) or repr(t)
    return f"json.{name}" if getattr(t, "__module__", "") == "json" else name


def main():
    args = sys.argv[1:]
    parse = args[:1] == ["--parse"]
    args = args[1:] if parse else args
    sys.path[:0] = args
    sys.meta_path.insert(0, _Finder(args[0]))
    server_args = importlib.import_module("sglang.srt.server_args")
    assert not isinstance(server_args.ServerArgs, base._Any), "server_args was stubbed"
    parser = base.argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    if parse:
        for a in parser._actions:  # a stubbed type function: accept the text (as the reader does)
            if isinstance(a.type, base._Any):
                a.type = None
        json.dump(base._parse_each(parser, json.load(sys.stdin)), sys.stdout)
        return
    out = []
    for a in parser._actions:
        choices = None
        if a.choices is not None:
            choices = _plain(a.choices)
            if isinstance(choices, list) and not choices:
                choices = {"stub": "empty choices (a stubbed iterable)"}
            elif isinstance(choices, list):
                choices = sorted(json.dumps(c) if not isinstance(c, str) else c for c in choices)
        out.append({"option_strings": a.option_strings, "dest": a.dest, "action": type(a).__name__,
                    "nargs": a.nargs, "choices": choices, "required": a.required,
                    "type": _type_name(a.type), "default": _plain(a.default), "const": _plain(a.const)})
    real = sorted(n for n, ok in _StubModule.REAL.memo.items() if ok)
    json.dump({"actions": out, "real_modules": real}, sys.stdout)


if __name__ == "__main__":
    main()
