"""Values are data, never code: the systemd unit sglang_service renders, and what is refused.

The unit template (roles/sglang_common/templates/unit.service.j2, from sglang_service's variables
through roles/sglang_service/tasks/unit.yml) is rendered with the
project's filters and Ansible's own core filters in a Jinja2 environment set up like Ansible's
template module (and checked byte for byte against `ansible -m template`), then read back the way
systemd reads it (systemd.syntax(7), systemd.service(5) "Command lines", systemd.exec(5)
"Environment="): lines continued by a trailing backslash, `%%` specifiers, words split on white
space with double/single quotes and C escapes, `$$` on command lines. Property-tested with
hypothesis; checked with `systemd-analyze verify` where it exists.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import FilterModule as CoreFilters
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sglang.fleet.plugins.module_utils.host.args import (
    SECRET_ARGS,
    ArgsError,
    env_file_line,
    systemd_quote,
    to_argv,
    unit_value_problems,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "sglang_service"
sys.path.insert(0, str(REPO / "plugins" / "filter"))
from sglang_args import FilterModule as ProjectFilters  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python")
LAUNCHER = "/usr/local/lib/sglang-fleet/sglang_launch.py"
INJECTION = "x\nExecStartPre=+/bin/touch /tmp/pwned\n#"
BREAK_FIX = ("which would end its line in the systemd unit or the EnvironmentFile and could start another "
             "directive (e.g. ExecStartPre=, run as root); remove it: a value there must be a single line "
             "without NUL bytes")


# ----------------------------------------------------------------------------- systemd, read back

_C_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
              '"': '"', "'": "'", "s": " "}


def systemd_words(text):
    """One setting's value -> words: `%%` -> `%` (other specifiers refused), white space splits,
    "..." and '...' group, backslash escapes (C escapes) anywhere."""
    assert not re.search(r"%[^%]", text.replace("%%", "")), f"a % specifier systemd would expand: {text!r}"
    text = text.replace("%%", "%")
    words, word, quote, i, in_word = [], "", None, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            nxt = text[i + 1]
            assert nxt in _C_ESCAPES, f"unknown escape \\{nxt} in {text!r}"
            word, i, in_word = word + _C_ESCAPES[nxt], i + 2, True
            continue
        if quote:
            if c == quote:
                quote = None
            else:
                word += c
        elif c in "\"'":
            quote, in_word = c, True
        elif c in " \t":
            if in_word:
                words.append(word)
            word, in_word = "", False
        else:
            word, in_word = word + c, True
        i += 1
    assert quote is None, f"unterminated quote in {text!r}"
    if in_word:
        words.append(word)
    return words


def exec_argv(value):
    """A command line's words, with `$$` -> `$` (a lone `$NAME` would be substituted: refused)."""
    out = []
    for word in systemd_words(value):
        assert not re.search(r"\$[^$]|\$$", word.replace("$$", "")), f"systemd would substitute in {word!r}"
        out.append(word.replace("$$", "$"))
    return out


def unit_settings(unit):
    """[(section, name, value)] of a unit file, continuation lines joined as systemd joins them."""
    out, section, pending = [], None, None
    for raw in unit.split("\n"):
        line = raw if pending is None else pending + " " + raw
        pending = None
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            section = stripped
            continue
        name, sep, value = stripped.partition("=")
        assert sep, f"not a setting: {line!r}"
        out.append((section, name.strip(), value.strip()))
    assert pending is None
    return out


# ----------------------------------------------------------------------------- rendering

def role_defaults():
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def context(args, **over):
    """The template's variables, concrete (what Ansible would have resolved for a host)."""
    defaults = role_defaults()
    ctx = {
        "ansible_managed": "Ansible managed", "sglang_version": "0.5.23", "sglang_service_name": "sglang",
        "sglang_service_args": args, "sglang_service_user": "sglang", "sglang_service_group": "sglang",
        "sglang_service_home": "/var/lib/sglang", "sglang_service_environment": {},
        "sglang_service_entrypoint": "sglang.launch_server", "sglang_service_log_file": "",
        # the role's default: the collection's base hardening with the server's own (an expression)
        "sglang_service_hardening": _resolve(defaults["sglang_service_hardening"], {}), "sglang_service_unit_extra": {},
        "_sglang_service_env_file": "/etc/sglang/sglang.env", "_sglang_service_python": PYTHON,
        "_sglang_service_unit_file": "/etc/systemd/system/sglang.service",
        "_sglang_service_launcher": LAUNCHER,
    }
    ctx.update(over)
    return ctx


def _environment():
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    core = CoreFilters().filters()   # Ansible's own filters the template uses (not its `default`)
    env.filters.update({name: core[name] for name in ("comment", "basename", "dirname", "combine")})
    env.filters.update(ProjectFilters().filters())
    env.filters.update({f"sglang.fleet.{name}": f for name, f in ProjectFilters().filters().items()})  # roles: FQCN
    return env


JINJA = _environment()
UNIT_TEMPLATE = REPO / "roles" / "sglang_common" / "templates" / "unit.service.j2"
TEMPLATE = JINJA.from_string(UNIT_TEMPLATE.read_text())
# sglang_service's task that hands its variables to sglang_common's one unit: its `vars:` are the
# mapping (role variable -> sglang_common_unit_*), resolved here as Ansible resolves them.
UNIT_VARS = yaml.safe_load((ROLE / "tasks" / "unit.yml").read_text())[0]["vars"]


def _resolve(value, ctx):
    """A task variable's value, templated: one {{ expression }} keeps its type, as in Ansible."""
    if not isinstance(value, str) or "{{" not in value:
        return value
    text = value.strip()
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return JINJA.compile_expression(text[2:-2])(**ctx)
    return JINJA.from_string(value).render(ctx)


def unit_context(ctx):
    """ctx plus the sglang_common_unit_* variables sglang_service passes to the unit."""
    return {**ctx, **{name: _resolve(value, ctx) for name, value in UNIT_VARS.items()}}


def render(ctx):
    return TEMPLATE.render(unit_context(ctx))


def exec_start(unit):
    found = [v for s, n, v in unit_settings(unit) if n.startswith("Exec")]
    assert [n for s, n, v in unit_settings(unit) if n.startswith("Exec")] == ["ExecStart"], unit
    return exec_argv(found[0])


def environment(unit):
    out = []
    for _, name, value in unit_settings(unit):
        if name == "Environment":
            out += systemd_words(value)
    return out


# ----------------------------------------------------------------------------- the reported attack

def test_a_newline_in_an_argument_is_refused_naming_it():
    with pytest.raises(ArgsError) as err:
        to_argv({"model_path": "/models/m", "served_model_name": INJECTION})
    assert str(err.value) == f"sglang_args.served_model_name: the value contains a newline (\\n), {BREAK_FIX}"
    with pytest.raises(AnsibleFilterError) as err:   # and the template can never render it
        render(context({"model_path": "/models/m", "served_model_name": INJECTION}))
    assert "the value contains a newline (\\n)" in str(err.value)


def test_systemd_quote_and_env_file_line_refuse_line_breaks_and_nul():
    for bad, what in (("a\rb", "a carriage return (\\r)"), ("a\x00b", "a NUL byte (\\0)"),
                      ("a\nb\r", "a newline (\\n), a carriage return (\\r)")):
        with pytest.raises(ArgsError) as err:
            systemd_quote(bad)
        assert str(err.value) == f"the value contains {what}, {BREAK_FIX}"
        with pytest.raises(ArgsError) as err:
            env_file_line("HF_TOKEN", bad)
        assert str(err.value) == f"sglang_service_secrets.HF_TOKEN: the value contains {what}, {BREAK_FIX}"
        assert bad not in str(err.value)


def test_preflight_names_every_variable_and_never_shows_a_value():
    problems = unit_value_problems({
        "sglang_version": "0.5.23\n", "sglang_args": {"model_path": "/m", "served_model_name": INJECTION,
                                                       "json_model_override_args": {"a": ["ok", "b\x00"]}},
        "sglang_service_user": "sglang", "sglang_service_home": "/var/lib/sglang\r",
        "sglang_service_environment": {"NCCL_DEBUG": "INFO", "BAD NAME": "x", "X\nY": "1"},
        "sglang_service_secrets": {"HF_TOKEN": "hf_secret\nExecStartPre=/bin/sh"},
        "sglang_service_hardening": {"ProtectSystem": "full\nExecStartPre=+/bin/sh"},
        "sglang_service_unit_extra": {"LimitMEMLOCK": "infinity", "ExecStartPre=+/bin/sh #": "x"},
    })
    nl, nul, cr = ("the value contains a newline (\\n), ", "the value contains a NUL byte (\\0), ",
                   "the value contains a carriage return (\\r), ")
    assert problems == [
        f"sglang_version: {nl}{BREAK_FIX}",
        f"sglang_args.served_model_name: {nl}{BREAK_FIX}",
        f"sglang_args.json_model_override_args.a[1]: {nul}{BREAK_FIX}",
        f"sglang_service_home: {cr}{BREAK_FIX}",
        f"sglang_service_environment: the name 'X\\nY'... : {nl}{BREAK_FIX}",
        "sglang_service_environment: 'BAD NAME' is not a valid environment variable name (letters, digits and _, "
        "not starting with a digit)",
        "sglang_service_environment: 'X\\nY' is not a valid environment variable name (letters, digits and _, "
        "not starting with a digit)",
        f"sglang_service_secrets.HF_TOKEN: {nl}{BREAK_FIX}",
        f"sglang_service_hardening.ProtectSystem: {nl}{BREAK_FIX}",
        "sglang_service_unit_extra: 'ExecStartPre=+/bin/sh #' is not a systemd [Service] directive name "
        "(e.g. LimitMEMLOCK)",
    ]
    assert not [p for p in problems if "hf_secret" in p]
    assert unit_value_problems({"sglang_service_environment": {"CUDA_VISIBLE_DEVICES": "0,1"},
                                "sglang_args": {"model_path": "/m", "tp_size": 2}}) == []


# ----------------------------------------------------------------------------- properties

KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,24}", fullmatch=True).filter(lambda k: k not in SECRET_ARGS)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
SCALARS = st.one_of(TEXT, st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none())
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4),
                   st.dictionaries(TEXT, st.one_of(TEXT, st.integers()), max_size=3))
ENV = st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}", fullmatch=True).filter(lambda k: k != "HOME"),
                      TEXT, max_size=3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=st.dictionaries(KEYS, VALUES, max_size=8), env=ENV)
def test_any_mapping_renders_exactly_one_exec_start_with_the_intended_argv(args, env):
    def breaks(value):
        return isinstance(value, str) and bool(re.search("[\n\r\x00]", value))

    try:
        intended = to_argv(args)
    except ArgsError:
        with pytest.raises(AnsibleFilterError):     # what to_argv refuses, the template refuses
            render(context(args, sglang_service_environment=env))
        return
    if any(breaks(v) for v in env.values()):
        with pytest.raises(AnsibleFilterError):
            render(context(args, sglang_service_environment=env))
        return
    unit = render(context(args, sglang_service_environment=env))
    assert exec_start(unit) == [PYTHON, LAUNCHER, "sglang.launch_server", *intended]
    home, *rest = environment(unit)
    assert (home, sorted(rest)) == ("HOME=/var/lib/sglang", sorted(f"{k}={v}" for k, v in env.items()))
    # every string the user gave arrives as one argv word, byte for byte
    for value in args.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and item and not isinstance(value, dict):
                assert item in intended


def test_awkward_but_valid_values_arrive_as_given():
    args = {"model_path": "/models/My Model (v2)", "served_model_name": 'a "b" \\c $HOME %n \'d\' \t e',
            "chat_template": "{% if x %}$$ 100% \\n{% endif %}", "tp_size": 2, "enable_metrics": True,
            "json_model_override_args": {"rope": {"type": "yarn", "factor": 4.0}}, "dp_size": None}
    env = {"NCCL_DEBUG": "INFO", "ODD": 'quote " backslash \\ dollar $x percent %i'}
    unit = render(context(args, sglang_service_environment=env, sglang_service_home="/srv/sglang home"))
    assert exec_start(unit) == [PYTHON, LAUNCHER, "sglang.launch_server", "--model-path", "/models/My Model (v2)",
                                "--chat-template", "{% if x %}$$ 100% \\n{% endif %}", "--enable-metrics",
                                "--json-model-override-args", '{"rope":{"factor":4.0,"type":"yarn"}}',
                                "--served-model-name", 'a "b" \\c $HOME %n \'d\' \t e', "--tp-size", "2"]
    assert environment(unit) == ["HOME=/srv/sglang home", "NCCL_DEBUG=INFO",
                                 'ODD=quote " backslash \\ dollar $x percent %i']


# ----------------------------------------------------------------------------- Ansible and systemd

def test_ansible_template_module_renders_the_same_bytes(tmp_path):
    args = {"model_path": "/models/My Model", "served_model_name": 'a "b" $x 50%', "tp_size": 2}
    ctx = context(args, sglang_service_environment={"ODD": "$y %z"})
    (tmp_path / "vars.json").write_text(json.dumps(unit_context(ctx)))
    dest = tmp_path / "sglang.service"
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{tmp_path / 'vars.json'}",
         "-m", "ansible.builtin.template", "-a", f"src={UNIT_TEMPLATE} dest={dest}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert dest.read_text() == render(ctx)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_rendered_unit(tmp_path):
    args = {"model_path": "/models/My Model", "served_model_name": 'a "b" \\c $HOME %n', "tp_size": 2,
            "json_model_override_args": {"k": "v w"}}
    unit = tmp_path / "sglang.service"
    unit.write_text(render(context(args, sglang_service_environment={"ODD": "$y %i \"q\""},
                                   sglang_service_unit_extra={"LimitMEMLOCK": "infinity"})))
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert (proc.returncode, proc.stdout) == (0, "")
    # only systemd's complaints about this machine (no such user, no /etc/sglang/sglang.env), none on syntax
    assert [ln for ln in proc.stderr.splitlines() if str(unit) in ln and "sglang.service:" in ln] == []


def test_preflight_refuses_before_anything_changes(tmp_path):
    """The role's preflight, run by ansible-playbook: the play stops at the check, naming each
    variable, with the secret's value nowhere in the output (-vvv)."""
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.import_role: {name: sglang_service, tasks_from: preflight}\n")
    (tmp_path / "vars.json").write_text(json.dumps({
        "sglang_version": "0.5.23", "sglang_args": {"model_path": "/models/m", "served_model_name": INJECTION},
        "sglang_service_environment": {"NCCL_DEBUG": "INFO\r"}, "sglang_service_secrets": {"HF_TOKEN": "hf_c4nary\x00"}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-vvv",
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{REPO / 'group_vars' / 'all' / 'sglang.yml'}",
         "-e", f"@{tmp_path / 'vars.json'}", str(play)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "TASK [sglang_service : Refuse line breaks and NUL bytes in what the unit and the EnvironmentFile" in out
    assert re.search(r"ok=1 +changed=0 +unreachable=0 +failed=1", out), out   # its argument spec, then this check
    msg = json.loads(out[out.index("fatal: [localhost]: FAILED! => ") + 31:].split("\n\n")[0])["msg"]
    assert msg == ("localhost: " + "; ".join([
        f"sglang_args.served_model_name: the value contains a newline (\\n), {BREAK_FIX}",
        f"sglang_service_environment.NCCL_DEBUG: the value contains a carriage return (\\r), {BREAK_FIX}",
        f"sglang_service_secrets.HF_TOKEN: the value contains a NUL byte (\\0), {BREAK_FIX}"]))
    assert "hf_c4nary" not in out
