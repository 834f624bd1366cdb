"""SGLang's argparse parser rebuilt from the flag table, and argv validation / normalisation."""
from __future__ import annotations

import argparse
import difflib
import json
import re

from .extract import DEPRECATED_ACTIONS
from .flag_history import FLAG_HISTORY
from .model import Problem, Runtime, SglangSource
from .rules import startup_refusals


def parse_human_readable_int(value: str) -> int:
    """SGLang's human_readable_int: '128k' -> 128000, '1Ki' -> 1024, '25.6k' -> 25600."""
    value = value.strip()
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    for suf, mul in iec.items():
        if value.endswith(suf):
            return int(value[: -len(suf)]) * mul
    for suf, mul in si.items():
        if value.endswith(suf):
            return int(float(value[: -len(suf)]) * mul)
    return int(value)


parse_human_readable_int.__name__ = "human_readable_int"


def _json_list_type(value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list.") from e


def _nullable_str(value: str):
    return None if not value or value == "None" else value


def _parse_cuda_graph_backend_arg(raw: str) -> str:
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _opaque(name: str):
    """A type function the reader does not reproduce: accept the text as is."""
    def conv(value):
        return value
    conv.__name__ = name
    return conv


_TYPES = {"str": str, "int": int, "float": float, "json.loads": json.loads,
          "human_readable_int": parse_human_readable_int, "json_list_type": _json_list_type,
          "nullable_str": _nullable_str, "parse_cuda_graph_backend_arg": _parse_cuda_graph_backend_arg}


class _StoreConst(argparse.Action):
    """DeprecatedStoreTrueAction / DeprecatedStoreConstAction: no value, store a constant."""

    def __init__(self, option_strings, dest, const=True, default=None, **kwargs):
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, const=const, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)


class _Removed(argparse.Action):
    """DeprecatedAction: no value; raises (<= 0.5.7), errors with the release's message, or does nothing."""

    def __init__(self, option_strings, dest, error_message=None, exception=None, **kwargs):
        kwargs.pop("nargs", None)
        self.error_message = error_message
        self.exception = exception
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if self.exception is not None:  # SGLang: raise ValueError(self.help), uncaught
            raise ValueError(self.error_message)
        if self.error_message is not None:
            parser.error(self.error_message)


def build_parser(src: SglangSource, prog: str = "sglang serve") -> argparse.ArgumentParser:
    """An argparse parser with SGLang's option strings, actions, nargs, types and choices.

    Errors use argparse's own wording ("unrecognized arguments: ...", "ambiguous option: ...",
    "argument --x: invalid choice: ..."), as the installed release's parser does. Choices computed
    at run time are not enforced.
    """
    parser = argparse.ArgumentParser(prog=prog, allow_abbrev=True)
    for f in src.flags:
        kw: dict = {"dest": f.dest}
        if f.help is not None:
            kw["help"] = argparse.SUPPRESS if f.help == "==SUPPRESS==" else f.help.replace("%", "%%")
        default = f.default
        if isinstance(default, Runtime):
            default = None
        elif default == "==SUPPRESS==":
            default = argparse.SUPPRESS
        opts = list(f.option_strings)
        act = f.action
        if act == "BooleanOptionalAction":
            opts = [o for o in opts if not o.startswith("--no-") or o[5:] and "--" + o[5:] not in opts]
            parser.add_argument(*opts, action=argparse.BooleanOptionalAction, default=default,
                                **kw)
            continue
        if act in ("store_true", "store_false"):
            parser.add_argument(*opts, action=act, default=default, **kw)
            continue
        if act == "DeprecatedAction":
            parser.add_argument(*opts, action=_Removed, error_message=f.removed_message,
                                exception=f.removed_exception, **kw)
            continue
        if act in ("DeprecatedStoreTrueAction", "DeprecatedStoreConstAction"):
            const = True if act == "DeprecatedStoreTrueAction" else f.const
            parser.add_argument(*opts, action=_StoreConst, const=const, default=default, **kw)
            continue
        if act in ("store_const", "append_const", "count"):
            parser.add_argument(*opts, action=act, const=f.const, default=default, **kw)
            continue
        # store, DeprecatedAliasStoreAction, LoRAPathAction and other value-taking actions
        if f.type is not None:
            kw["type"] = _TYPES.get(f.type) or _opaque(f.type)
        if isinstance(f.choices, list):
            kw["choices"] = f.choices
        if f.nargs is not None:
            kw["nargs"] = f.nargs
            if f.nargs == "?" and f.const is not None and not isinstance(f.const, Runtime):
                kw["const"] = f.const
        if f.required:
            kw["required"] = True
        parser.add_argument(*opts, action="store", default=default, **kw)
    return parser


# --------------------------------------------------------------------------------------
# Validation and normalisation
# --------------------------------------------------------------------------------------

class _ParseError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParseError(message)

    def exit(self, status=0, message=None):
        raise _ParseError(message or f"exit {status}")


def _parser(src: SglangSource, lenient: bool = False) -> argparse.ArgumentParser:
    """The release's parser (cached on ``src``), raising _ParseError instead of exiting.

    ``lenient``: no option is required (normalising a partial argv).
    """
    cache = src.__dict__.setdefault("_parser_cache", {})
    if lenient not in cache:
        p = build_parser(src)
        p.__class__ = _RaisingParser
        if lenient:
            for a in p._actions:
                a.required = False
        cache[lenient] = p
    return cache[lenient]


def _looks_like_option(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not re.fullmatch(r"-\d+(\.\d*)?([eE][-+]?\d+)?", tok)


_HELP = ("-h", "--help")


def _resolve_option(src: SglangSource, name: str):
    """(Flag, matched option) | ("ambiguous", [candidates]) | ("help", "--help") | None.

    argparse's abbreviation rules, with its own -h/--help among the candidates (so ``--he`` is
    --help, and ``--h`` is ambiguous between --help, --host, ...).
    """
    if name in src.by_option:
        return src.by_option[name], name
    if name in _HELP:
        return "help", name
    if name.startswith("--"):
        cands = [o for o in src.option_strings() if o.startswith(name)]
        if cands == ["--help"]:
            return "help", "--help"
        if len(cands) == 1:
            return src.by_option[cands[0]], cands[0]
        if len(cands) > 1:
            return "ambiguous", cands
    return None


def _given_value(src: SglangSource, argv, option: str):
    """The value ``argv`` gives ``option`` (last one wins; abbreviations resolved), else None."""
    flag = src.by_option.get(option)
    out = None
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        hit = _resolve_option(src, name) if flag is not None and _looks_like_option(tok) else None
        if hit and hit[0] is flag:
            if eq:
                out = inline
            elif i + 1 < len(argv) and not _looks_like_option(argv[i + 1]):
                out = argv[i + 1]
    return out


def _concrete_suggestion(src: SglangSource, text, argv=(), values=()) -> str | None:
    """SGLang's replacement text as argv that THIS release's parser accepts, else None.

    SGLang writes ``new_flag`` and help texts for people: ``--cuda-graph-backend-{decode,prefill}=disabled``
    (one option per brace item), ``--attn-dp-size <dp-size>`` (the value --dp-size has). Braces expand;
    ``<name>`` takes the value --name has in ``argv``, else its static default in this release; an
    option left without a value gets the old flag's ``values``. What still does not parse is dropped:
    a suggestion must work as written.
    """
    if not isinstance(text, str) or not text.startswith("-"):
        return None
    m = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if m:
        alts = [text[:m.start()] + alt.strip() + text[m.end():] for alt in m.group(1).split(",")]
        return _concrete_suggestion(src, " ".join(alts), argv, values)

    def fill(placeholder):
        option = "--" + placeholder.group(1)
        given = _given_value(src, argv, option)
        flag = src.by_option.get(option)
        if given is None and flag is not None and flag.default is not None \
                and not isinstance(flag.default, Runtime) and flag.default != "==SUPPRESS==":
            given = str(flag.default)
        return given if given is not None else placeholder.group(0)

    tokens = re.sub(r"<([\w-]+)>", fill, text).split()
    if values and "=" not in tokens[-1] and len(tokens) == 1:
        hit = _resolve_option(src, tokens[-1])
        if hit and hit[0] not in ("ambiguous", "help") and hit[0].takes_value:
            tokens += list(values)
    if any(t.partition("=")[0] in _HELP for t in tokens):
        return None
    try:
        _parser(src, lenient=True).parse_args(tokens)
    except (_ParseError, ValueError):
        return None
    return " ".join(tokens)


def _replacement(src: SglangSource, old: str, values=()) -> tuple[str | None, str]:
    """The replacement for ``old`` that THIS release accepts (with the old flag's values), and the note."""
    note, cands = FLAG_HISTORY.get(old, ("", []))
    for opt, value in cands:
        if not src.has(opt):
            continue
        repl = _concrete_suggestion(src, opt if value is None else f"{opt} {value}", values=values)
        if repl:
            return repl, note
    return None, note


def _fmt_cands(cands):
    return ", ".join(cands)


def validate_argv(src: SglangSource, argv: list[str], model_config: dict | None = None,
                  hardware: dict | None = None) -> list[Problem]:
    """Every problem the installed release's parser would hit in ``argv`` (not just the first).

    With the model's ``model_config`` (config.json), also what the release's ServerArgs resolution
    would refuse at start for that model once the argv parses (kind "refused_at_start", see
    startup_refusals).

    Deprecated aliases that still work are reported as kind "renamed" with their replacement;
    everything else (unknown, removed, ambiguous, bad_choice, bad_type, missing_value) makes
    ``sglang serve`` exit with an argparse error, or (removed, <= 0.5.7) die at start with the
    ValueError its DeprecatedAction raises; "help" (-h, --help or a prefix of it) prints the usage
    and exits without starting the server. A suggested replacement is argv this release accepts.
    """
    argv = list(argv)
    check = _ArgvCheck(src, argv)
    out = check.tokens() + check.required()
    if model_config and not any(p.severity == "error" for p in out):
        out += startup_refusals(src, normalise_argv(src, argv), model_config, hardware)
    return out


# nargs -> (fewest, most) values argparse takes for it (None: no limit)
_NARGS_RANGE = {None: (1, 1), "?": (0, 1), "*": (0, None), "+": (1, None), 0: (0, 0)}


class _ArgvCheck:
    """One pass over an argv as the release's parser reads it: a cursor over the tokens, a problem list."""

    def __init__(self, src: SglangSource, argv: list[str]):
        self.src = src
        self.v = src.version
        self.argv = argv
        self.parser = _parser(src)
        self.actions = {o: a for a in self.parser._actions for o in a.option_strings}
        self.i = 0

    def tokens(self) -> list[Problem]:
        """The problems of each token in turn (an option consumes its values)."""
        out: list[Problem] = []
        while self.i < len(self.argv):
            tok = self.argv[self.i]
            self.i += 1
            out += self._token(tok)
        return out

    def _following_values(self, eq, limit=None) -> list[str]:
        """Consume the tokens after an option up to the next option (none after ``--x=v``)."""
        values = []
        while self.i < len(self.argv) and not eq and (limit is None or len(values) < limit) \
                and not _looks_like_option(self.argv[self.i]):
            values.append(self.argv[self.i])
            self.i += 1
        return values

    def _token(self, tok) -> list[Problem]:
        v = self.v
        if not _looks_like_option(tok):
            return [Problem(tok, "unknown", f"sglang {v} takes no positional arguments: "
                            f"'{tok}' would fail with 'unrecognized arguments: {tok}'. "
                            "Put it after the flag it belongs to, or remove it.", [])]
        name, eq, inline = tok.partition("=")
        hit = _resolve_option(self.src, name)
        if hit is None:
            # its value(s), if any: tokens up to the next option (argparse leaves them all unrecognized)
            values = [inline] if eq else self._following_values(eq)
            return [_unknown_problem(self.src, name, values)]
        if hit[0] == "help":
            how = "" if name == hit[1] else f" (argparse expands it to {hit[1]})"
            return [Problem(name, "help", f"{name} is not a server flag{how}: it is argparse's help "
                            f"option, so sglang {v} would print its usage and exit without starting "
                            "the server. Remove it.", [])]
        if hit[0] == "ambiguous":
            cands = hit[1]
            msg = (f"{name} is ambiguous in sglang {v}: argparse fails with 'ambiguous option: {name} "
                   f"could match {_fmt_cands(cands)}'. Spell the flag in full: one of "
                   f"{_fmt_cands(cands)}.")
            self._following_values(eq)
            return [Problem(name, "ambiguous", msg, cands)]
        return self._option(name, eq, inline, *hit)

    def _option(self, name, eq, inline, flag, opt) -> list[Problem]:
        """A flag of the release: its values, then whether it is removed, renamed, or given a bad value."""
        action = self.actions[opt]
        values, problem = self._values(name, eq, inline, flag, opt, action)
        if problem is not None:
            return [problem]
        if flag.removed_message:
            return [self._removed(name, flag, opt, values)]
        out = []
        if flag.deprecated_alias_of or flag.action in DEPRECATED_ACTIONS:
            out.append(self._renamed(name, flag, opt, values))
        if values and action.nargs != 0:
            out += self._bad_value(name, flag, opt, action, values)
        return out

    def _values(self, name, eq, inline, flag, opt, action):
        """(the option's values, None) as argparse takes them, or (None, the problem when it cannot)."""
        v, nargs = self.v, action.nargs
        if eq:
            if nargs == 0:
                return None, Problem(name, "bad_type", f"{opt} takes no value in sglang {v}: argparse fails "
                                     f"with 'argument {_astr(action)}: ignored explicit argument "
                                     f"'{inline}''. Write {opt} alone.", [])
            return [inline], None
        lo, hi = _NARGS_RANGE.get(nargs, (nargs, nargs) if isinstance(nargs, int) else (1, 1))
        values = self._following_values(eq, hi)
        if len(values) >= lo:
            return values, None
        need = "expected one argument" if nargs is None else (
            "expected at least one argument" if nargs == "+" else f"expected {nargs} arguments")
        return None, Problem(name, "missing_value", f"{opt} needs a value in sglang {v}: argparse "
                             f"fails with 'argument {_astr(action)}: {need}'. Give it a value"
                             + (f" (one of {_fmt_cands(map(str, flag.choices))})"
                                if isinstance(flag.choices, list) else "") + ".",
                             [str(c) for c in flag.choices] if isinstance(flag.choices, list) else [])

    def _removed(self, name, flag, opt, values) -> Problem:
        src = self.src
        repl, _ = _replacement(src, name if name in FLAG_HISTORY else opt, values)
        repl = repl or _concrete_suggestion(src, flag.deprecated_alias_of, self.argv, values)
        fails = (f"the server dies at start with '{flag.removed_exception}: {flag.removed_message}' "
                 "(its DeprecatedAction raises it while parsing the arguments)."
                 if flag.removed_exception else f"it fails with '{flag.removed_message}'")
        return Problem(name, "removed", f"{opt} is removed in sglang {self.v}: {fails}"
                       + (f" Use {repl} instead." if repl else " Remove it."),
                       [repl] if repl else [])

    def _renamed(self, name, flag, opt, values) -> Problem:
        v = self.v
        raw = flag.deprecated_alias_of
        new = _concrete_suggestion(self.src, raw, self.argv, values)
        if flag.action == "DeprecatedAction":  # warns and ignores the flag
            msg = (f"{opt} is deprecated in sglang {v}: still accepted, with a warning, but it has no "
                   "effect; remove it" + (f" (use {new} instead)." if new else
                                          f" (SGLang's help points to {raw})." if raw else "."))
        else:
            msg = (f"{opt} is a deprecated alias in sglang {v} (still accepted, with a warning)"
                   + (f"; use {new} instead." if new else f"; SGLang names '{raw}' as its replacement."
                      if raw and raw != flag.dest else "; it has no effect, remove it."))
        return Problem(name, "renamed", msg, [new] if new else [], severity="warning")

    def _bad_value(self, name, flag, opt, action, values) -> list[Problem]:
        """The values through the action's type and choices, as argparse checks them."""
        try:
            self.parser._get_values(action, list(values))
        except argparse.ArgumentError as e:
            kind = "bad_choice" if "invalid choice" in str(e) else "bad_type"
            sugg = [str(c) for c in flag.choices] if isinstance(flag.choices, list) else []
            if kind == "bad_choice":
                bad = str(e).split("invalid choice: ", 1)[1].split(" (choose", 1)[0]
                close = difflib.get_close_matches(bad.strip("'\""), sugg, n=3, cutoff=0.5)
                hint = f" Did you mean {', '.join(close)}?" if close else ""
                msg = (f"{opt}: value not accepted by sglang {self.v}: argparse fails with '{e}'. "
                       f"Use one of: {', '.join(sugg)}.{hint}")
            else:
                tname = flag.type or "value"
                msg = (f"{opt}: value not accepted by sglang {self.v}: argparse fails with '{e}'. "
                       f"Give a valid {tname}.")
            return [Problem(name, kind, msg, sugg)]
        return []

    def required(self) -> list[Problem]:
        """Required options (e.g. --model-path) the argv does not give."""
        given = set()
        for tok in self.argv:
            if _looks_like_option(tok):
                hit = _resolve_option(self.src, tok.partition("=")[0])
                if hit and hit[0] not in ("ambiguous", "help"):
                    given.add(hit[0].dest)
        return [Problem(a.option_strings[0], "missing_value",
                        f"sglang {self.v} requires {a.option_strings[0]}: argparse fails with 'the "
                        f"following arguments are required: {_astr(a)}'. Add it.", [])
                for a in self.parser._actions if a.required and a.dest not in given]


def _astr(action) -> str:
    return "/".join(action.option_strings)


def _unknown_problem(src: SglangSource, name: str, values=()) -> Problem:
    v = src.version
    if name in FLAG_HISTORY:
        repl, note = _replacement(src, name, values)
        named = next((o for o, _ in FLAG_HISTORY[name][1] if src.has(o)), None)
        kind = "removed"
        msg = (f"{name} is not a flag of sglang {v} ({note}): it fails with 'unrecognized arguments: "
               f"{name}'. " + (f"In {v} use {repl}." if repl else f"In {v} use {named} with a value." if named
                               else f"Remove it; it has no replacement in {v}."))
        return Problem(name, kind, msg, [repl] if repl else [])
    longs = [o for o in src.by_option if o.startswith("--")]
    close = difflib.get_close_matches(name, longs, n=3, cutoff=0.75)
    msg = f"{name} is not a flag of sglang {v}: it fails with 'unrecognized arguments: {name}'."
    msg += f" Did you mean {', '.join(close)}?" if close else " Remove it."
    return Problem(name, "unknown", msg, close)


def normalise_argv(src: SglangSource, argv: list[str]) -> dict:
    """``{dest: value}`` for what ``argv`` sets, resolved the way the release's parser resolves it.

    Abbreviations (``--tp 2`` -> ``tp_size: 2``), aliases (``--tensor-parallel-size``), ``--x=v``
    and ``--no-x`` forms, types and order (later wins) are all handled by argparse itself; only
    dests the argv sets appear (defaults are left out). Raises ValueError with argparse's message
    when the argv is invalid for this release.
    """
    parser = _parser(src, lenient=True)
    # parse onto a namespace where every dest is a sentinel: what changes is what argv set
    ns = argparse.Namespace(**{a.dest: _SENTINEL for a in parser._actions if a.dest != "help"})
    try:
        parser.parse_args(list(argv), namespace=ns)
    except (_ParseError, ValueError) as e:  # ValueError: a flag whose DeprecatedAction raises
        raise ValueError(f"sglang {src.version}: {e}") from None
    field = {f.dest: f.server_arg for f in src.flags}
    return {field.get(k, k): v for k, v in vars(ns).items() if v is not _SENTINEL}


class _Sentinel:
    def __repr__(self):
        return "<unset>"


_SENTINEL = _Sentinel()
