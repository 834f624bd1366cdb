"""The reader's data types: what a release's source says (flags, rules) and what it will do (findings)."""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any


class UnknownLayout(Exception):
    """The installed sglang tree does not match any known flag layout (era)."""


# The reader needs ast.unparse (3.9): the floor of the host's Python for the flag check, the audit
# and drift (tests/source/test_reader_host_pythons.py runs them under 3.8-3.13).
PYTHON_FLOOR = (3, 9)


class UnsupportedPython(UnknownLayout):
    """The host's Python is older than the reader needs."""


@dataclasses.dataclass(frozen=True)
class Runtime:
    """A value SGLang computes at run time; ``expr`` is its source text."""

    expr: str

    def __repr__(self):
        return f"<runtime: {self.expr}>"


@dataclasses.dataclass
class Flag:
    """One ``add_argument`` call of SGLang's server parser, as read from source."""

    option_strings: list[str]
    dest: str
    type: str | None = None            # "str", "int", "float", or a function name
    choices: list | Runtime | None = None
    default: Any = None                # static value, or Runtime(expr)
    action: str = "store"              # "store", "store_true", "BooleanOptionalAction", ...
    nargs: Any = None
    const: Any = None
    required: bool = False
    help: str | None = None
    deprecated_alias_of: str | None = None   # the flag/dest this one now maps to
    removed_message: str | None = None       # DeprecatedAction(error_message=...): parser.error
    removed_exception: str | None = None     # DeprecatedAction raises this (<= 0.5.7: ValueError(help))
    file: str = ""                     # relative to the site-packages folder: sglang/srt/...
    line: int = 0
    field: str = ""                    # ServerArgs field the value ends in (from_cli_args renames)

    @property
    def server_arg(self) -> str:
        """The ServerArgs field the flag's value ends in: ``field`` where from_cli_args renames, else ``dest``."""
        return self.field or self.dest

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append", "extend", "DeprecatedAliasStoreAction",
                               "LoRAPathAction") or self.nargs not in (None, 0)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("choices", "default"):
            if isinstance(getattr(self, k), Runtime):
                d[k] = {"runtime": getattr(self, k).expr}
        return d


@dataclasses.dataclass
class Problem:
    """Something in an argv that the installed release would reject or misread."""

    flag: str
    kind: str          # unknown | removed | renamed | ambiguous | bad_choice | bad_type | missing_value | help
    #                    | refused_at_start (parses, but ServerArgs raises at start for this model)
    message: str
    suggestion: list[str] = dataclasses.field(default_factory=list)
    # "error": the release's parser rejects the argv; "warning": accepted (deprecated alias)
    severity: str = "error"


@dataclasses.dataclass
class Rule:
    """An auto-adjust rule found in the installed source."""

    name: str
    file: str
    line: int
    text: str          # the condition's source line(s), stripped
    data: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Finding:
    """What the installed release will do with one optimisation, and why."""

    name: str
    status: str        # "on" | "auto-disabled" | "unavailable on this hardware" | "off by default"
    value: Any = None
    reason: str = ""
    rule_file: str | None = None
    rule_line: int | None = None
    override: str | None = None
    how_to_enable: str | None = None


@dataclasses.dataclass
class SglangSource:
    """What the installed release's source says: version, era, flags and auto-adjust rules."""

    path: str
    version: str
    era: str
    flags: list[Flag]
    rules: dict[str, Rule] = dataclasses.field(default_factory=dict)
    _tree: Any = dataclasses.field(default=None, repr=False)

    @functools.cached_property
    def by_option(self) -> dict[str, Flag]:
        return {o: f for f in self.flags for o in f.option_strings}

    @functools.cached_property
    def by_dest(self) -> dict[str, list[Flag]]:
        out: dict[str, list[Flag]] = {}
        for f in self.flags:
            out.setdefault(f.dest, []).append(f)
        return out

    def option_strings(self) -> list[str]:
        """Every option string the parser accepts, including -h/--help."""
        return ["-h", "--help"] + [o for f in self.flags for o in f.option_strings]

    def has(self, option: str) -> bool:
        return option in self.by_option

    def version_tuple(self) -> tuple:
        return vtuple(self.version)


def vtuple(v: str) -> tuple:
    out = []
    for p in re.split(r"[.+]", v):
        m = re.match(r"(\d+)", p)
        if m and p.isdigit():
            out.append(int(p))
        elif p.startswith("post") and p[4:].isdigit():
            out.append(int(p[4:]) / 1000)  # 0.5.13.post1 sorts after 0.5.13, before 0.5.14
            break
        else:
            break
    while len(out) < 3:
        out.append(0)
    return tuple(out)


def arg_value(src: SglangSource, args: dict, field: str, default=None):
    """A value from args (dest or field names), else the static default of that field."""
    if field in args:
        return args[field]
    for f in src.flags:
        if (f.field == field or f.dest == field) and f.dest in args:
            return args[f.dest]
    for f in src.flags:
        if (f.field == field or f.dest == field) and not isinstance(f.default, Runtime) \
                and not f.deprecated_alias_of and f.default != "==SUPPRESS==":
            return f.default if f.default is not None else default
    return default


def first_known_option(src: SglangSource, *candidates: str) -> str | None:
    return next((c for c in candidates if src.has(c.split(" ")[0].split("=")[0])), None)
