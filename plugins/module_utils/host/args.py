"""A host's SGLang arguments as data: mapping <-> argv, and systemd quoting.

The inventory holds SGLang's server arguments as a YAML mapping keyed by argparse dest
(`tp_size: 2`, `speculative_algorithm: NEXTN`). This module turns that mapping into argv the
same way every time (the unit file, validation and drift all use it), so a rendered unit is
byte-stable and re-runs change nothing.

Stdlib only: used by filter plugins on the controller and by modules on hosts.
"""

import hashlib
import json
import math
import re
from collections.abc import Mapping

from ansible_collections.sglang.fleet.plugins.module_utils.errors import SglangFleetError

# Flags that carry secrets. They never go into argv or the unit: the service's
# EnvironmentFile holds them and the launcher passes them to SGLang in-process.
SECRET_ARGS = {
    "api_key": "SGLANG_API_KEY",
    "admin_api_key": "SGLANG_ADMIN_API_KEY",
    "ssl_keyfile_password": "SGLANG_SSL_KEYFILE_PASSWORD",
}

# What a secret read back from a host becomes, everywhere (reports, play output, drift).
REDACTED = "<redacted>"

# ServerArgs fields whose values are secrets. Real SGLang hands them out in clear: /server_info
# is every field (0.5.11 srt/entrypoints/http_server.py:641 `dataclasses.asdict(server_args)`;
# 0.5.23 srt/utils/common.py:3589 `build_server_info` -> `resolved_dict()`), and from 0.5.20 its
# `launch_command` is the raw argv (0.5.20 srt/server_args.py:736 `" ".join(argv)`; 0.5.22+
# redacts only --watermark-config, 0.5.23 srt/server_args.py:717), so the `--api-key` the
# launcher appends in-process shows there. Redact them where they are read (redact_server_info).
SECRET_FIELDS = frozenset(("api_key", "admin_api_key", "ssl_keyfile_password",
                           "watermark_key", "watermark_key_b", "watermark_config"))
_SECRET_FLAGS = tuple(sorted("--" + f.replace("_", "-") for f in SECRET_FIELDS))
# Real flags that are a prefix of a secret flag: an exact flag is never an abbreviation.
_PREFIX_FLAGS = ("--ssl-keyfile",)

# Arguments that must appear first in argv, for a readable unit; the rest are sorted.
LEADING_ARGS = ("model_path",)

# RouterArgs fields holding secrets (sglang-router 0.3.2 router_args.py:44, 116, 137): never in
# the router's argv (refused), masked where its argv is read back (drift).
ROUTER_SECRET_FIELDS = frozenset(("api_key", "oracle_password", "control_plane_api_keys"))

_LOOPBACK = re.compile(r"^(127(\.[0-9]+){3}|::1|\[::1\]|localhost)$")


def is_loopback(host) -> bool:
    """True when a --host value serves this machine only (127.0.0.0/8, ::1, localhost)."""
    return bool(_LOOPBACK.match(str(host)))


_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_SYSTEMD_SAFE_RE = re.compile(r"^[A-Za-z0-9_./:,+=@-]+$")
# What ends a line of a unit or EnvironmentFile (and what no argv word can hold): newline,
# carriage return, NUL. A value with one could add a directive (`ExecStartPre=+...`, as root).
_LINE_BREAK_RE = re.compile("[\n\r\x00]")
_BREAK_NAMES = {"\n": "a newline (\\n)", "\r": "a carriage return (\\r)", "\x00": "a NUL byte (\\0)"}
# systemd directive names ([Service] settings of sglang_service_hardening / _unit_extra).
_DIRECTIVE_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")


class ArgsError(SglangFleetError, ValueError):
    """A value in the host's SGLang arguments cannot be turned into argv."""


def inventory_args(host_vars, host=None):
    """A host's SGLang arguments as the inventory declares them: the fleet's sglang_args_common with the
    host's sglang_args over it. The one merge of the two (the host model, host/host_model.py,
    and the plugins that read other hosts' arguments call it, naming that `host` in the error).

    Either one set to anything but a mapping (a list or string of flags) raises ArgsError."""
    merged = {}
    for name in ("sglang_args_common", "sglang_args"):
        value = host_vars.get(name)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise ArgsError(not_a_mapping(f"{name} of {host}" if host else name, value, name))
        merged.update(value)
    return merged


def _kind(value):
    """`a list`, `a string`, ...: what a value is, in the inventory's words (not Python's class name)."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):  # bool is an int: test it first
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def not_a_mapping(what, value, name="sglang_args"):
    """Why a `name` (sglang_args, sglang_args_common) that is not a mapping is refused, and the fix."""
    return (f"{what} is {_kind(value)}, not a mapping: write each SGLang flag as a key (its argparse dest: "
            f"tp_size for --tp-size) with its value, true for a flag without one, e.g. "
            f"{name}: {{tp_size: 2, enable_metrics: true}}")


def flag_name(key):
    """`tp_size` -> `--tp-size` (argparse dests use underscores, flags use dashes)."""
    return "--" + key.replace("_", "-")


def dest_name(flag):
    """`--tp-size` -> `tp_size`."""
    return flag.lstrip("-").replace("-", "_")


def _scalar(key, value):
    if isinstance(value, str) and _LINE_BREAK_RE.search(value):
        raise ArgsError(f"sglang_args.{key}: {line_break_problem(value)}")
    if isinstance(value, bool):  # bool is an int: test it first
        raise ArgsError(f"sglang_args.{key}: a list may not contain booleans, got {value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArgsError(f"sglang_args.{key}: {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        if value == "":
            raise ArgsError(
                f"sglang_args.{key}: empty string; remove the key (or set it to null) "
                "to use SGLang's default"
            )
        return value
    raise ArgsError(
        f"sglang_args.{key}: unsupported value {value!r} of type {type(value).__name__}; "
        "use a string, number, boolean, list or mapping"
    )


def flag_groups(args):
    """Mapping -> [(flag, [values...])], model_path first, the rest sorted by flag.

    true -> the bare flag; false or null -> omitted (SGLang's default applies; turn a
    default-on feature off with its `disable_*` / `no_*` form); list -> one flag followed by
    its values; mapping -> compact JSON with sorted keys (for JSON-valued flags such as
    `json_model_override_args`).
    """
    if not isinstance(args, dict):
        raise ArgsError(not_a_mapping("sglang_args", args))
    groups = []
    for key in sorted(args, key=lambda k: (k not in LEADING_ARGS, str(k).replace("-", "_"))):
        value = args[key]
        if not isinstance(key, str) or not _KEY_RE.match(key):
            raise ArgsError(
                f"sglang_args: {key!r} is not an SGLang argument name; use the argparse dest "
                "in lower case, e.g. tp_size for --tp-size"
            )
        dest = key.replace("-", "_")
        if dest in SECRET_ARGS:
            raise ArgsError(
                f"sglang_args.{key} is a secret and would be visible in the unit file and in "
                f"the process list; set it in sglang_service_secrets.{SECRET_ARGS[dest]} "
                "(kept in a root-only EnvironmentFile) instead"
            )
        flag = flag_name(dest)
        if value is None or value is False:
            continue
        if value is True:
            groups.append((flag, []))
        elif isinstance(value, dict):
            groups.append((flag, [json.dumps(value, sort_keys=True, separators=(",", ":"))]))
        elif isinstance(value, (list, tuple)):
            if not value:
                raise ArgsError(f"sglang_args.{key}: empty list; remove the key to use SGLang's default")
            groups.append((flag, [_scalar(key, item) for item in value]))
        else:
            groups.append((flag, [_scalar(key, value)]))
    return groups


def to_argv(args):
    """Mapping -> argv list (no program name), deterministic."""
    argv = []
    for flag, values in flag_groups(args):
        argv.append(flag)
        argv.extend(values)
    return argv


def fingerprint(version, args):
    """What makes two runs of a server comparable: SGLang version + argv (sorted, secrets never in it).

    Returns {"id": 16 hex digits, "version": str, "argv": [...]}; verify's history and the
    host's release records key on it.
    """
    argv = to_argv(args)
    digest = hashlib.sha256(json.dumps([str(version), argv]).encode()).hexdigest()[:16]
    return {"id": digest, "version": str(version), "argv": argv}


def systemd_quote(word, exec_line=True):
    """Quote one argv word for a systemd ExecStart= line (or, exec_line=False, an Environment=
    assignment, where `$` has no special meaning: systemd.exec "Environment=").

    systemd splits on white space, honours double quotes with C escapes, expands `$VAR` (command
    lines only) and `%` specifiers: safe words stay bare, others are double-quoted with `\\` and
    `"` escaped, and `%` (and on command lines `$`) doubled so they reach the process literally.
    A newline, carriage return or NUL cannot be quoted: refused.
    """
    word = str(word)
    if _LINE_BREAK_RE.search(word):
        raise ArgsError(line_break_problem(word))
    escaped = word.replace("%", "%%")
    if exec_line:
        escaped = escaped.replace("$", "$$")
    if _SYSTEMD_SAFE_RE.match(word):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unit_lines(args):
    """Mapping -> one systemd-quoted `--flag value...` string per flag, in argv order."""
    return [" ".join(systemd_quote(w) for w in [flag, *values]) for flag, values in flag_groups(args)]


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# The devices the project tells apart: "cuda" (the NVIDIA GPU path, SGLang's default when `device`
# is unset: it auto-detects, 0.5.23 srt/utils/common.py:1073-1086) and "cpu" (`--device cpu`, run
# with SGLANG_USE_CPU_ENGINE=1, 0.5.23 srt/utils/common.py:221-224). A CPU server uses no GPU.
CPU, CUDA = "cpu", "cuda"


def device_of(args):
    """The device a server of these arguments runs on: "cpu" for `device: cpu`, else "cuda".

    The one derivation of it: the host model (host/host_model.py, `sglang_host.device`)
    and gpus_needed call it; the roles take `sglang_host.device`."""
    return CPU if str((args or {}).get("device") or "").strip().lower() == CPU else CUDA


def gpus_needed(args):
    """GPUs one node needs for these arguments: tp x pp (x dp without DP attention) / nnodes;
    0 for a CPU server (`device: cpu`).

    On CPU the ranks are processes bound to CPU cores, not GPUs: SGLang 0.5.23 itself checks at
    start-up that dp_size x tp_size x pp_size ranks fit the NUMA nodes, or the core groups of
    SGLANG_CPU_OMP_THREADS_BIND (srt/utils/numa_utils.py:459-496). It has no other limit on
    tp_size for `device: cpu` (srt/arg_groups/platform_hook.py:158-173 picks the attention and
    sampling backends, nothing more), so neither has this project."""
    if device_of(args) == CPU:
        return 0
    tp = args.get("tp_size", 1) or 1
    pp = args.get("pp_size", 1) or 1
    dp = 1 if args.get("enable_dp_attention") else (args.get("dp_size", 1) or 1)
    nnodes = args.get("nnodes", 1) or 1
    return max(1, -(-(tp * pp * dp) // nnodes))


# A Hugging Face repo id: "name" or "owner/name", each part starting with a letter or digit.
_HUB_ID_RE = re.compile(r"^(?!.*(--|\.\.))[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def check_expect(expect):
    """Problems with a host's sglang_expect: it must be a mapping, and a number must be written as one.

    A quoted number ("3") never equals the 3 SGLang resolves, so it would fail every audit; it
    is refused before the host changes instead, with the unquoted spelling.
    """
    if not isinstance(expect, dict):
        return [f"sglang_expect must be a mapping of setting: value, got {type(expect).__name__}"]
    problems = []
    for key, value in expect.items():
        if isinstance(value, str) and re.match(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$", value):
            problems.append(f"sglang_expect.{key} is {value!r}, a quoted number: SGLang resolves it as a number, "
                            f"so the text never matches; write it without quotes (sglang_expect.{key}: {value.strip()})")
    return problems


def check_args(args, gpu_count=None, gpu_source="declared", environment=None):
    """Problems with a host's SGLang arguments that SGLang itself would only find at start-up.

    `environment` is the server's (sglang_service_environment), when known. Returns a list of
    messages (empty when fine); each says what is wrong and how to fix it.
    """
    if not isinstance(args, dict):
        return [not_a_mapping("sglang_args", args)]
    problems = []
    norm = {str(k).replace("-", "_"): v for k, v in args.items()}
    model = norm.get("model_path")
    if not isinstance(model, str) or not model:
        problems.append("sglang_args.model_path is missing: set it to the model folder on the host "
                        "(e.g. /models/Qwen3.6-27B) or a Hugging Face repo id")
    elif not model.startswith("/") and not _HUB_ID_RE.match(model):
        problems.append(f"sglang_args.model_path {model!r} is neither a folder on the host (those start with /) "
                        "nor a Hugging Face repo id (owner/name of letters, digits, '.', '_' and '-'): write the "
                        "absolute path (e.g. /models/Qwen3.6-27B) or the repo id (e.g. Qwen/Qwen3-8B)")
    for key in ("tp_size", "pp_size", "dp_size", "nnodes"):
        if key in norm and norm[key] is not None and (not _is_int(norm[key]) or norm[key] < 1):
            problems.append(f"sglang_args.{key} is {norm[key]!r}: it must be a whole number >= 1 "
                            f"(e.g. {key}: 2, without quotes)")
    port = norm.get("port")
    if port is not None and (not _is_int(port) or not 1 <= port <= 65535):
        problems.append(f"sglang_args.port is {port!r}: it must be a whole number from 1 to 65535")
    mem = norm.get("mem_fraction_static")
    if mem is not None and (isinstance(mem, bool) or not isinstance(mem, (int, float)) or not 0 < mem < 1):
        problems.append(f"sglang_args.mem_fraction_static is {mem!r}: it must be a fraction between 0 and 1 "
                        "(e.g. 0.88)")
    ctx = norm.get("context_length")
    if ctx is not None and (not _is_int(ctx) or ctx < 1):
        problems.append(f"sglang_args.context_length is {ctx!r}: it must be a whole number of tokens")
    if device_of(norm) == CPU and environment is not None \
            and str((environment or {}).get("SGLANG_USE_CPU_ENGINE", "")) != "1":
        # is_cpu() is False without it (0.5.23 srt/utils/common.py:220-224, 0.5.11 :181-183): SGLang
        # then takes its CUDA code paths and fails at start-up (0.5.23: rotary_embedding/base.py:138
        # imports vllm's CUDA ops), after the old release has been stopped.
        problems.append("sglang_args.device is cpu but sglang_service_environment has no SGLANG_USE_CPU_ENGINE: "
                        "\"1\": SGLang runs its CPU path only with it (srt/utils/common.py is_cpu) and otherwise "
                        "fails at start-up; add SGLANG_USE_CPU_ENGINE: \"1\" to sglang_service_environment")
    if problems or gpu_count is None:
        return problems
    needed = gpus_needed(norm)
    if needed == 0:  # a CPU server: no GPU to count (device_of)
        return problems
    if needed > gpu_count:
        problems.append(
            f"these arguments need {needed} GPU(s) per node (tp_size {norm.get('tp_size', 1)}"
            + (f" x pp_size {norm['pp_size']}" if norm.get("pp_size", 1) != 1 else "")
            + (f" x dp_size {norm['dp_size']}" if norm.get("dp_size", 1) != 1 and not norm.get("enable_dp_attention") else "")
            + f") but the host has {gpu_count} ({gpu_source}); lower tp_size to at most {gpu_count} "
            "or fix sglang_hardware.gpu_count"
        )
    return problems


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_file_line(name, value):
    """One `NAME="value"` line of a systemd EnvironmentFile, quoted so the value arrives as is."""
    if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
        raise ArgsError(f"sglang_service_secrets: {name!r} is not a valid environment variable name")
    text = str(value)
    if _LINE_BREAK_RE.search(text):   # the value is a secret: never shown
        raise ArgsError(f"sglang_service_secrets.{name}: {line_break_problem(text)}")
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return f'{name}="{text}"'


def line_break_problem(text):
    """Why a value with a newline, carriage return or NUL is refused, and the fix."""
    found = ", ".join(name for char, name in _BREAK_NAMES.items() if char in str(text))
    return (f"the value contains {found}, which would end its line in the systemd unit or the "
            "EnvironmentFile and could start another directive (e.g. ExecStartPre=, run as root); "
            "remove it: a value there must be a single line without NUL bytes")


def unit_value_problems(variables):
    """Problems with what the unit and the EnvironmentFile are rendered from, before any host changes.

    `variables` maps each role variable's name to its value (sglang_service_environment,
    sglang_service_hardening, sglang_version, ...). Every string in them, mapping keys included,
    is checked for newline, carriage return and NUL; names of environment variables and of
    systemd directives must be valid names. Values are never shown (some are secrets).
    """
    problems = []

    def walk(where, value):
        if isinstance(value, dict):
            for key, item in value.items():
                if _LINE_BREAK_RE.search(str(key)):
                    problems.append(f"{where}: the name {str(key)[:40]!r}... : {line_break_problem(key)}")
                    continue
                walk(f"{where}.{key}", item)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{where}[{i}]", item)
        elif isinstance(value, str) and _LINE_BREAK_RE.search(value):
            problems.append(f"{where}: {line_break_problem(value)}")

    for name, value in variables.items():
        walk(name, value)
        if name in ("sglang_service_environment", "sglang_service_secrets") and isinstance(value, dict):
            problems += [f"{name}: {key!r} is not a valid environment variable name (letters, digits and _, "
                         "not starting with a digit)" for key in value
                         if not isinstance(key, str) or not _ENV_NAME_RE.match(key)]
        if name in ("sglang_service_hardening", "sglang_service_unit_extra", "sglang_router_hardening") and isinstance(value, dict):
            problems += [f"{name}: {key!r} is not a systemd [Service] directive name (e.g. LimitMEMLOCK)"
                         for key in value if not isinstance(key, str) or not _DIRECTIVE_RE.match(key)]
    return problems


def local_url(args):
    """Base URL a host uses to reach its own server: SGLang's --host/--port, with a wildcard
    bind address (0.0.0.0, ::) reached through 127.0.0.1; SGLang's defaults otherwise."""
    host = str(args.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{args.get('port') or 30000}"


# --------------------------------------------------------------------------------------
# Secrets read back from a host: redacted where they are read
# --------------------------------------------------------------------------------------

def is_secret_flag(word):
    """`--api-key`, `--api-key=K` or an argparse abbreviation of a secret flag (`--api-k`)."""
    name = str(word).split("=", 1)[0]
    if not name.startswith("--") or len(name) <= 4 or name in _PREFIX_FLAGS:
        return False
    return any(flag.startswith(name) for flag in _SECRET_FLAGS)


def redact_argv(argv):
    """argv with the values of secret flags (abbreviated, `--x=v` too) as REDACTED."""
    out, hide = [], False
    for word in argv:
        word = str(word)
        if hide:
            out.append(REDACTED)
            hide = False
        elif is_secret_flag(word):
            if "=" in word:
                out.append(word.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(word)
                hide = True
        else:
            out.append(word)
    return out


def redact_text(text, secrets=()):
    """`text` with every occurrence of each secret value (non-empty strings) as REDACTED."""
    values = sorted({str(v) for v in secrets if v not in (None, "")}, key=len, reverse=True)
    if not values:
        return str(text)
    # one pass, longest first: a short secret never matches inside an earlier "<redacted>"
    return re.sub("|".join(re.escape(v) for v in values), REDACTED, str(text))


def redact_server_info(value, secrets=()):
    """A /server_info answer (or any part of it) with every secret redacted, recursively:
    SECRET_FIELDS values, secret flag values in `launch_command` (SGLang's `" ".join(argv)`,
    so split on single spaces), and any of the known secret values anywhere in a string."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in SECRET_FIELDS and item not in (None, "", False):
                out[key] = REDACTED
            elif key == "launch_command" and isinstance(item, str):
                out[key] = " ".join(redact_argv(redact_text(item, secrets).split(" ")))
            elif key == "launch_command" and isinstance(item, list):
                out[key] = redact_argv([redact_text(w, secrets) for w in item])
            else:
                out[key] = redact_server_info(item, secrets)
        return out
    if isinstance(value, (list, tuple)):
        return [redact_server_info(item, secrets) for item in value]
    if isinstance(value, str) and secrets:
        return redact_text(value, secrets)
    return value
