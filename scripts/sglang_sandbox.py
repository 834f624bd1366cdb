"""The import sandbox: SGLang's own ``server_args.py`` imported from an extracted wheel, its heavy
dependencies (torch, triton, transformers, sglang's kernels and models...) replaced by stub modules.

It runs in a throwaway ``python -S -s`` interpreter (stdlib only, nothing of sglang-fleet imported)
and builds SGLang's REAL argparse parser (``ServerArgs.add_cli_args``). A meta-path finder answers
every import that is not the standard library, a third-party module named real, or an sglang
module named real with a permissive stub: importable, its attributes falsy callables, so optional
kernel probes answer "not installed". The callers, one ``Sandbox`` each:

- tests/source/real_parser_dump.py: the parser's actions; of sglang only ``server_args.py`` and
  ``arg_groups/`` run (``PARSER_MODULES``).
- scripts/release_sweep_real_parser.py: the same with types and defaults; an sglang module whose
  imports are all standard library (or msgspec, or other such modules) runs too (``real_safe``),
  a name imported from a stub is truthy and iterating a stub shows one element.
- scripts/sglang_oracle.py (its worker): the release's own resolution (``from_cli_args``); more of
  sglang runs, torch and transformers are its fakes with the profile's GPU and config.json, a
  CamelCase name of a stub is a class (``isinstance`` works).
"""
import argparse
import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import sys
import types

# What the tests' parser runs of sglang: every module whose name starts with one of these
# (server_args.py, server_args_config_parser.py, arg_groups/).
PARSER_MODULES = ("sglang.srt.server_args*", "sglang.srt.arg_groups*")
# The packages above them: bare (their __init__ does not run).
BARE_PACKAGES = ("sglang", "sglang.srt")


def matches(name: str, patterns) -> bool:
    """``x``: the module x; ``x.*``: x and every module under it; ``x*``: every name starting with x."""
    for pattern in patterns:
        if pattern.endswith(".*"):
            if name == pattern[:-2] or name.startswith(pattern[:-1]):
                return True
        elif pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


# ------------------------------------------------------------------------------------ the stand-ins

class _Base:
    """What a class deriving from a stub derives from instead."""

    def __init_subclass__(cls, **kwargs):
        pass

    def __init__(self, *args, **kwargs):
        pass


class Stub:
    """Permissive stand-in: any attribute, call, index, iteration or base-class use works; falsy.

    Arithmetic gives a stub named ``<op>`` (a message that shows it was made from stubs); a stub
    added to a list, tuple or string gives that list, tuple or string.
    """

    iterate_one = False   # iterating yields one stub element (the sweep's sandbox), else none

    def __init__(self, name="stub"):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        if attr in ("__name__", "__qualname__"):
            return self._name.rsplit(".", 1)[-1]
        if attr.startswith("__") and attr not in ("__func__", "__version__"):
            raise AttributeError(attr)
        return Stub(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return Stub(f"{self._name}()")

    def __getitem__(self, key):
        return Stub(f"{self._name}[]")

    def __setitem__(self, key, value):
        pass

    def __contains__(self, item):
        return False

    def __iter__(self):
        # a list built from a stubbed registry (["auto"] + list(X.keys())) shows the stub
        return iter((Stub(f"{self._name}[*]"),) if Stub.iterate_one else ())

    def __mro_entries__(self, bases):
        return (_Base,)

    def __or__(self, other):
        return self

    __ror__ = __and__ = __rand__ = __or__

    def __add__(self, other):
        return other if isinstance(other, (list, tuple, str)) else self._arith(other)

    __radd__ = __add__

    def _arith(self, *other):
        return Stub(f"{self._name}<op>")

    __neg__ = __pos__ = __abs__ = __invert__ = _arith
    __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _arith
    __mod__ = __rmod__ = __matmul__ = _arith

    def __bool__(self):
        return False

    def __len__(self):
        return 0

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __fspath__(self):
        return "/nonexistent"

    def __lt__(self, other):
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __str__(self):
        return self._name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Imported(Stub):
    """A name imported from a stubbed module, truthy as a real function or class is (the sweep's).

    (``Arg(type_parser=human_readable_int)`` is used as ``type_parser or <inferred type>``: a falsy
    stub would silently turn into ``int``.) What it returns when called is falsy, as before, so
    ``if is_cuda():`` still reads as "not CUDA".
    """

    def __bool__(self):
        return True


class _StubMeta(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Stub(f"{cls.__name__}.{attr}")

    def __iter__(cls):   # used as an Enum: no members
        return iter(())

    def __len__(cls):
        return 0

    def __contains__(cls, item):
        return False

    def __getitem__(cls, key):
        return Stub(f"{cls.__name__}[]")


class _StubClass(_Base, metaclass=_StubMeta):
    """A stubbed class (CamelCase name): isinstance() works (False), subclassing works."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Stub(f"{type(self).__name__}().{attr}")


def is_stub(value) -> bool:
    return isinstance(value, Stub)


# What a stubbed module's attribute is, by the sandbox's ``names`` policy.
def _falsy(module, attr):
    return Stub(f"{module.__name__}.{attr}")


def _truthy(module, attr):
    return Imported(f"{module.__name__}.{attr}")


def _classes(module, attr):
    if attr[:1].isupper() and not attr.isupper():   # a class: isinstance() must work
        return _StubMeta(attr, (_StubClass,), {"__module__": module.__name__})
    return _falsy(module, attr)


NAMES = {"falsy": _falsy, "truthy": _truthy, "classes": _classes}


class StubModule(types.ModuleType):
    """A module answering any attribute with a stand-in (kept, so the same name is the same object)."""

    ABSENT = ("npu", "hpu", "musa", "mlu", "xpu", "mps")   # torch back-ends probed with hasattr()
    sandbox = None   # the installed Sandbox

    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__file__ = f"<stub {name}>"
        self.__version__ = "2.9.0"
        self.__all__ = []

    def __getattr__(self, attr):
        sandbox = StubModule.sandbox
        name = f"{self.__name__}.{attr}"
        if not attr.startswith("__") and sandbox.real_safe is not None and sandbox.real_safe.ok(name):
            return importlib.import_module(name)   # a real-safe submodule of a stubbed package
        if (attr.startswith("__") and attr.endswith("__")) or attr in self.ABSENT:
            raise AttributeError(attr)
        if self.__name__.startswith("sglang"):
            sandbox.touched.add(name)
        value = sandbox.name_of(self, attr)
        setattr(self, attr, value)
        return value


# ------------------------------------------------------------------------------------ the finder

class RealSafe:
    """Which sglang modules may run for real: every import in them, transitively, is stdlib/msgspec."""

    ALLOWED_TOPS = set(sys.stdlib_module_names) | {"msgspec", "__future__"}

    def __init__(self, root, real_sglang):
        self.root = root
        self.real_sglang = real_sglang
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
        if matches(fullname, self.real_sglang):
            return True  # they run for real anyway
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
            if top in self.ALLOWED_TOPS:
                continue
            if top != "sglang" or not self.ok(name):
                return False
        self.memo[fullname] = True
        return True

    def real_modules(self):
        return sorted(n for n, ok in self.memo.items() if ok)

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


class _StubLoader(importlib.abc.Loader):
    def __init__(self, fake=None):
        self.fake = fake

    def create_module(self, spec):
        module = StubModule(spec.name)
        if spec.submodule_search_locations:
            module.__path__ = list(spec.submodule_search_locations)
        if self.fake is not None:
            self.fake(module)
        return module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, sandbox):
        self.sandbox = sandbox

    def find_spec(self, fullname, path, target=None):
        box = self.sandbox
        top = fullname.split(".")[0]
        if top in sys.stdlib_module_names or top in box.real_third_party:
            return None
        if top == "sglang" and fullname not in BARE_PACKAGES:
            if matches(fullname, box.real_sglang):
                return None
            if box.real_safe is not None and box.real_safe.ok(fullname):
                file, is_pkg = box.real_safe.path(fullname)
                return importlib.util.spec_from_file_location(
                    fullname, file, submodule_search_locations=[os.path.dirname(file)] if is_pkg else None)
        spec = importlib.machinery.ModuleSpec(fullname, _StubLoader(box.fakes.get(fullname)), is_package=True)
        if top == "sglang":   # a bare package (its __init__ does not run) or a stub module
            folder = os.path.join(box.root, *fullname.split("."))
            spec.submodule_search_locations = [folder] if os.path.isdir(folder) else []
        return spec


# ------------------------------------------------------------------------------------ the sandbox

class Sandbox:
    """One interpreter's import sandbox over the sglang package in ``root`` (the wheel's parent).

    real_sglang: sglang modules that run for real (patterns, see ``matches``); real_third_party:
    top-level modules imported for real (pure Python, on the path); real_safe: sglang modules whose
    imports are all stdlib/msgspec run too; names: what a stubbed module's attribute is ("falsy",
    "truthy", "classes": see NAMES); iterate_one: iterating a stub yields one element; fakes:
    {module name: function(module)} filling that stub module in (the oracle's torch, transformers).
    """

    def __init__(self, root, *, real_sglang=PARSER_MODULES, real_third_party=("msgspec",), real_safe=False,
                 names="falsy", iterate_one=False, fakes=None):
        self.root = root
        self.real_sglang = tuple(real_sglang)
        self.real_third_party = tuple(real_third_party)
        self.real_safe = RealSafe(root, self.real_sglang) if real_safe else None
        self.name_of = NAMES[names]
        self.iterate_one = iterate_one
        self.fakes = dict(fakes or {})
        self.touched = set()   # sglang.<stubbed module>.<name> the run read

    def install(self, paths):
        """Put ``paths`` first on sys.path and the finder first on sys.meta_path."""
        StubModule.sandbox = self
        Stub.iterate_one = self.iterate_one
        sys.path[:0] = paths
        sys.meta_path.insert(0, _Finder(self))
        return self

    def server_args(self):
        """The real ``sglang.srt.server_args`` module."""
        # import_module, not `from sglang.srt import server_args`: the stub package would answer the
        # attribute lookup itself and the real module would never load.
        module = importlib.import_module("sglang.srt.server_args")
        if is_stub(module.ServerArgs):
            raise SystemExit("sglang.srt.server_args was stubbed")
        return module

    def parser(self, server_args=None):
        """SGLang's real argparse parser, as ``sglang serve`` builds it."""
        server_args = server_args or self.server_args()
        parser = argparse.ArgumentParser(prog="sglang serve")
        server_args.ServerArgs.add_cli_args(parser)
        return parser

    def stubbed_sglang_modules(self):
        return sorted({t.rsplit(".", 1)[0] for t in self.touched})


def command_line(args):
    """``[--parse] SGLANG_PARENT [PATH...]`` of the real-parser scripts: (parse?, paths)."""
    parse = args[:1] == ["--parse"]
    return parse, (args[1:] if parse else args)


def parse_each(parser, argvs):
    """Parse each argv with the real parser: argparse errors exit, SGLang's own actions may raise."""
    out = []
    for argv in argvs:
        err = io.StringIO()
        try:
            # deprecation warnings go to stdout in some releases: keep stdout for the JSON
            with contextlib.redirect_stdout(sys.stderr), contextlib.redirect_stderr(err):
                parser.parse_args(argv)
            out.append({"ok": True})
        except SystemExit:
            out.append({"ok": False, "error": err.getvalue().strip().splitlines()[-1:]})
        except Exception as exc:  # noqa: BLE001 - e.g. ValueError from DeprecatedAction (<= 0.5.7)
            out.append({"ok": False, "error": [f"{type(exc).__name__}: {exc}"]})
    return out
