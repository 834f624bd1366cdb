"""The REAL SGLang server parser of an extracted wheel, with its types and defaults, as JSON.

Run by scripts/release_sweep.py in a throwaway interpreter (stdlib only):
    python -S -s release_sweep_real_parser.py SGLANG_PARENT MSGSPEC_PARENT  ->  JSON on stdout
    python -S -s release_sweep_real_parser.py --parse SGLANG_PARENT MSGSPEC_PARENT < argvs.json

The import sandbox of tests/source/real_parser_dump.py (scripts/sglang_sandbox.py: sglang's own
``server_args.py`` / ``arg_groups/`` executed, every other import stubbed) with one change: an sglang
module whose imports are all standard library (or msgspec, or other such sglang modules) runs for
real instead of being stubbed, so values it defines (``Backend.ALL`` of
``model_executor/cuda_graph_config.py``, the environment registry of ``srt/environ.py``, ...) reach
the parser as the release defines them. Values that still come from a stub are marked
``{"stub": ...}`` so that the sweep does not compare them.
"""
import json
import sys

import sglang_sandbox as sandbox


def _stubbed(value) -> bool:
    if sandbox.is_stub(value):
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
    if sandbox.is_stub(t):
        return {"stub": str(t)}
    name = getattr(t, "__name__", None) or repr(t)
    return f"json.{name}" if getattr(t, "__module__", "") == "json" else name


def _choices(a):
    if a.choices is None:
        return None
    choices = _plain(a.choices)
    if isinstance(choices, list) and not choices:
        return {"stub": "empty choices (a stubbed iterable)"}
    if isinstance(choices, list):
        return sorted(json.dumps(c) if not isinstance(c, str) else c for c in choices)
    return choices


def main():
    parse, paths = sandbox.command_line(sys.argv[1:])
    box = sandbox.Sandbox(paths[0], real_safe=True, names="truthy", iterate_one=True).install(paths)
    parser = box.parser()
    if parse:
        for a in parser._actions:  # a stubbed type function: accept the text (as the reader does)
            if sandbox.is_stub(a.type):
                a.type = None
        json.dump(sandbox.parse_each(parser, json.load(sys.stdin)), sys.stdout)
        return
    out = [{"option_strings": a.option_strings, "dest": a.dest, "action": type(a).__name__,
            "nargs": a.nargs, "choices": _choices(a), "required": a.required,
            "type": _type_name(a.type), "default": _plain(a.default), "const": _plain(a.const)}
           for a in parser._actions]
    json.dump({"actions": out, "real_modules": box.real_safe.real_modules()}, sys.stdout)


if __name__ == "__main__":
    main()
