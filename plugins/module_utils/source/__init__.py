"""Read an installed SGLang package's source (text + ``ast``, never ``import sglang``).

Stdlib only and self-contained: this package is copied to lab hosts and imported there by the
SGLang simulator without Ansible (it imports only its own modules, relatively).

    src = load_source("/opt/sglang/lib/python3.11/site-packages/sglang")
    src.version, src.era, src.flags          # flag table, era "A" | "B" | "C"
    build_parser(src)                        # argparse parser that accepts/rejects argv like SGLang
    validate_argv(src, argv)                 # -> [Problem] before anything changes on a host
    validate_argv(src, argv, model_config)   # ... plus what start-up would refuse for that model
    normalise_argv(src, argv)                # -> {dest: value}  ("--tp 2" -> {"tp_size": 2})
    predict(src, args, hardware, model_config)   # -> [Finding], one per optimisation

Three layouts of the flag definitions ("eras"), one module each under layouts/:
  A (<= 0.5.13.post1): ``@dataclass ServerArgs`` + ``add_cli_args`` with ``parser.add_argument``.
  B (0.5.14 - 0.5.19): fields ``name: A[T, "help" | Arg(...)] = d`` registered by
     ``add_cli_args_from_dataclass``; deprecated aliases still added by hand.
  C (>= 0.5.20): the same annotations in ``msgspec.Struct`` classes under
     ``sglang/srt/arg_groups/fields/*.py``, listed in ``_INPUT_NAMESPACES``.

Exactness: option strings (same order), dests, actions, nargs and `required` reproduce SGLang's
argparse setup; tests/source/test_real_parser.py builds the REAL parser from the wheels of
0.4.10.post2, 0.5.3, 0.5.11, 0.5.13.post1, 0.5.15.post1, 0.5.18, 0.5.20 and 0.5.23 (sglang's own
server_args.py / arg_groups run under ``python -S``, every other import stubbed) and asserts
equality, and checks that every replacement validate_argv suggests parses with it. Choices
and defaults are read statically (module constants, enums, class attributes, registry dict keys);
those computed at run time (environment, plugin hooks, ServerArgs properties) become
``Runtime(expr)`` and the parser then accepts any value. Custom ``type=`` functions other than
int/float/str/json/human_readable_int/json_list_type/nullable_str/parse_cuda_graph_backend_arg
accept the text unchanged. Auto-adjust rules are located by pattern (file + line of THIS
release); ``predict`` evaluates the few conditions the audit needs, not SGLang's whole resolution.

Where each piece lives (a new layout or a new audited optimisation touches one module, see
CONTRIBUTING.md):
  model.py         Flag, Problem, Rule, Finding, SglangSource, errors
  tree.py          the package parsed as modules, static evaluation of expressions
  layouts/         one module per flag layout (era) with its own detect(); LAYOUTS lists them
  extract.py       flag reading shared by the layouts (add_argument calls, annotated fields)
  loader.py        load_source
  parser.py        build_parser (argparse rebuilt), validate_argv, normalise_argv
  flag_history.py  renamed/removed flags per release (pure data)
  rules.py         auto-adjust rules (file + line) and start-up refusals
  predict.py       predict: one Finding per audited optimisation
  optimisations.py the registry of audited optimisations (key, label, prediction, /server_info reading)
"""
from __future__ import annotations

from .flag_history import FLAG_HISTORY
from .loader import load_source
from .model import (
    PYTHON_FLOOR,
    Finding,
    Flag,
    Problem,
    Rule,
    Runtime,
    SglangSource,
    UnknownLayout,
    UnsupportedPython,
)
from .model import vtuple as vtuple  # for the tests
from .parser import build_parser, normalise_argv, validate_argv
from .parser import parse_human_readable_int as parse_human_readable_int  # for the tests
from .predict import predict
from .rules import startup_refusals

__all__ = [
    "FLAG_HISTORY", "Finding", "Flag", "Problem", "Rule", "Runtime", "SglangSource",
    "PYTHON_FLOOR", "UnknownLayout", "UnsupportedPython", "build_parser", "load_source", "normalise_argv", "predict",
    "startup_refusals", "validate_argv",
]
