"""Build the REAL SGLang server parser from an extracted wheel and dump its actions as JSON.

Run in a throwaway interpreter (never in the test process):
    python -S -s real_parser_dump.py SGLANG_PARENT [MSGSPEC_PARENT]  ->  JSON actions on stdout
    python -S -s real_parser_dump.py --parse SGLANG_PARENT [MSGSPEC_PARENT] < argvs.json
        ->  for each argv (a JSON list of lists): {"ok": true} or {"ok": false, "error": ...}
Heavy dependencies (torch, triton, transformers, ...) are replaced by stub modules through a
meta-path finder, so only the argparse part of ``sglang.srt.server_args`` really runs.
"""
import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import io
import json
import sys
import types


class _Base:
    """What a class deriving from a stub derives from instead."""

    def __init_subclass__(cls, **kwargs):
        pass

    def __init__(self, *args, **kwargs):
        pass


class _Any:
    """Permissive stand-in: any attribute, call, index, iteration or base-class use works."""

    def __init__(self, name="stub"):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        if attr in ("__mro_entries__",):
            return lambda bases: (_Base,)
        if attr.startswith("__") and attr not in ("__func__", "__version__"):
            raise AttributeError(attr)
        return _Any(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return _Any(f"{self._name}()")

    def __getitem__(self, key):
        return _Any(f"{self._name}[]")

    def __setitem__(self, key, value):
        pass

    def __contains__(self, item):
        return False

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (_Base,)

    def __or__(self, other):
        return self

    def __add__(self, other):
        return other if isinstance(other, (list, tuple, str)) else self

    __radd__ = __add__

    __ror__ = __or__

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


class _StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__file__ = f"<stub {name}>"
        self.__version__ = "2.9.0"
        self.__all__ = []

    ABSENT = ("npu", "hpu", "musa", "mlu")  # torch device back-ends probed with hasattr()

    def __getattr__(self, attr):
        if (attr.startswith("__") and attr.endswith("__")) or attr in self.ABSENT:
            raise AttributeError(attr)
        value = _Any(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _StubModule(spec.name)
        if spec.submodule_search_locations:
            module.__path__ = list(spec.submodule_search_locations)
        return module

    def exec_module(self, module):
        pass


REAL_SGLANG = ("sglang.srt.server_args", "sglang.srt.arg_groups")


class _StubFinder(importlib.abc.MetaPathFinder):
    """Stub every module except the stdlib, msgspec and the argparse part of sglang.

    ``sglang`` and ``sglang.srt`` become bare packages (their ``__init__`` is not run); of
    sglang only ``srt/server_args.py`` and ``srt/arg_groups/`` really execute.
    """

    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path, target=None):
        top = fullname.split(".")[0]
        if top in sys.stdlib_module_names or top == "msgspec":
            return None
        if fullname in ("sglang", "sglang.srt"):
            spec = importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
            spec.submodule_search_locations = [f"{self.root}/{fullname.replace('.', '/')}"]
            return spec
        if top == "sglang" and fullname.startswith(REAL_SGLANG):
            return None
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


def _parse_each(parser, argvs):
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


def main():
    args = sys.argv[1:]
    parse = args[:1] == ["--parse"]
    args = args[1:] if parse else args
    sys.path[:0] = args
    sys.meta_path.insert(0, _StubFinder(args[0]))
    # import_module, not `from sglang.srt import server_args`: the stub package would answer the
    # attribute lookup itself and the real module would never load.
    server_args = importlib.import_module("sglang.srt.server_args")

    assert not isinstance(server_args.ServerArgs, _Any), "server_args was stubbed"

    parser = argparse.ArgumentParser(prog="sglang serve")
    server_args.ServerArgs.add_cli_args(parser)
    if parse:
        json.dump(_parse_each(parser, json.load(sys.stdin)), sys.stdout)
        return
    out = []
    for a in parser._actions:
        choices = None
        if a.choices is not None:
            try:
                choices = sorted(str(c) for c in a.choices)
            except TypeError:
                choices = "<unsortable>"
        out.append({"option_strings": a.option_strings, "dest": a.dest,
                    "action": type(a).__name__, "nargs": a.nargs, "choices": choices,
                    "required": a.required})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
