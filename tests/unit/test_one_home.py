"""One home per concept (issue #43): a helper the collection has once is not written again beside it."""

import ast
import builtins
import importlib.util
import inspect
import os
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
CODE = sorted(p for root in ("plugins",) for p in (REPO / root).rglob("*.py"))
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
             for path in python_files("plugins", "scripts", "bench", "sglang_fleet", "tests")
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
    for path in python_files("plugins"):
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
             for path in python_files("plugins")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ImportFrom)
             for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not found, "make these names public:\n" + "\n".join(found)


def test_sglang_code_runs_in_the_one_import_sandbox():
    """SGLang's own server_args.py with stubbed dependencies (the import sandbox) is scripts/sglang_sandbox.py's:
    the tests' real parser, the sweep's and the oracle's resolution are each a Sandbox, none a finder of its own."""
    import_machinery = [f"{rel(path)}:{node.lineno} class {node.name}"
                        for path in python_files("plugins", "scripts", "tests", "lab", "bench", "sglang_fleet")
                        for node in ast.walk(ast.parse(path.read_text()))
                        if isinstance(node, ast.ClassDef)
                        and any(ast.unparse(b).endswith(("MetaPathFinder", "Loader")) for b in node.bases)]
    assert {line.split(":")[0] for line in import_machinery} == {"scripts/sglang_sandbox.py"}, import_machinery
    for caller in ("tests/source/real_parser_dump.py", "scripts/release_sweep_real_parser.py", "scripts/sglang_oracle.py"):
        text = (REPO / caller).read_text()
        assert "import sglang_sandbox" in text and re.search(r"sandbox\.Sandbox\(", text), caller


# Shared module options (doc fragments, plugins/doc_fragments/): a module declares api_key, timeout,
# host or one of the bench client's base_url, api and timeout_s itself only where the option means
# something else than the fragment's, for the reason given.
SHARED_OPTIONS = ("api_key", "timeout", "host", "base_url", "api", "timeout_s")
KEEPS_ITS_OWN = {
    ("sglang_bench", "api_key"): "no default (None): the bench client then sends no Authorization header",
    ("sglang_router_drift", "api_key"): "the router's key, not the server's, and no default",
    ("sglang_deploy_state", "timeout"): "30 s for the one health probe",
    ("sglang_ready", "timeout"): "the whole wait for the first 200 (1800 s), not one request",
    ("sglang_model_stage", "timeout"): "rsync's time limit, 0 = never",
    ("sglang_drift", "host"): "required without fleet, and named in the fix (run deploy.yml -l HOST)",
    ("sglang_host_check", "host"): "required",
    ("sglang_router_drift", "host"): "no default: the compare step needs it",
    ("sglang_router_verify", "host"): "required: the router whose replicas are read",
}
# The fragment fits, but the module is not this change's to edit (roles/sglang_tune's work in progress).
FITS_BUT_LEFT = {("sglang_tune", "host")}


def module_constant(path, name):
    """A module's string constant (its DOCUMENTATION), read without importing the module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value.value
    return None


def fragment_options():
    """{option: (fragment, its documentation)} of every doc fragment of the collection (DOCUMENTATION and
    any named one), as ansible-doc reads them from the ModuleDocFragment class."""
    import yaml

    found = {}
    for path in sorted((REPO / "plugins" / "doc_fragments").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"doc_fragment_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for var, text in sorted(vars(module.ModuleDocFragment).items()):
            if var.isupper():
                name = f"sglang.fleet.{path.stem}" + ("" if var == "DOCUMENTATION" else f".{var.lower()}")
                for option, doc in yaml.safe_load(text)["options"].items():
                    assert option not in found, f"{option} is documented in {found[option][0]} and {name}"
                    found[option] = (name, doc)
    return found


def same_option(a, b):
    return all(a.get(k) == b.get(k) for k in ("type", "default", "required", "choices", "elements"))


def test_shared_module_options_are_written_once_in_a_doc_fragment():
    """api_key (6 modules), timeout (6), host (11) and the bench client's base_url, api and timeout_s (2)
    were each written in every module: where the option means what the fragment says (same type, default,
    required, choices), the module extends the fragment."""
    import yaml

    fragments = fragment_options()
    assert sorted(fragments) == sorted(SHARED_OPTIONS)
    own, fits = [], []
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        doc = yaml.safe_load(module_constant(path, "DOCUMENTATION"))
        for option in SHARED_OPTIONS:
            mine = (doc.get("options") or {}).get(option)
            if mine is None:
                continue
            own.append((path.stem, option))
            if same_option(mine, fragments[option][1]) and (path.stem, option) not in FITS_BUT_LEFT:
                fits.append(f"{rel(path)}: {option} is {fragments[option][0]}'s: extend it")
    assert fits == []
    assert sorted(own) == sorted([*KEEPS_ITS_OWN, *FITS_BUT_LEFT]), "a module writes a shared option again"


def test_the_shared_options_specs_are_the_fragments():
    """module_utils/module_options.py's argument specs say what the fragments document (validate-modules
    checks each module; this checks the helper itself, api_key never logged)."""
    from ansible_collections.sglang.fleet.plugins.module_utils import module_options

    fragments = fragment_options()
    specs = {**module_options.server_options(), **module_options.inventory_host_option(),
             **module_options.bench_client_options()}
    assert module_options.server_options() == {**module_options.api_key_option(), **module_options.http_timeout_option()}
    assert sorted(specs) == sorted(SHARED_OPTIONS)
    for option, spec in specs.items():
        assert same_option(spec, fragments[option][1]), option
    assert specs["api_key"]["no_log"] is True
    assert module_options.api_key_option() is not module_options.api_key_option()  # a fresh dict per module
    assert module_options.bench_client_options()["api"] is not module_options.bench_client_options()["api"]


def test_tune_plans_with_verifys_measurement_shape():
    """One measurement's shape (concurrency levels, repeats, requests per stream, output length) is verify's:
    tune's plan reads sglang_verify_shape (roles/sglang_verify/tasks/shape.yml, from verify's inputs and
    defaults), never those variables with their defaults written again."""
    tune_tasks = sorted((REPO / "roles" / "sglang_tune" / "tasks").glob("*.yml"))
    assert 'verify_shape: "{{ sglang_verify_shape }}"' in (REPO / "roles" / "sglang_tune" / "tasks" / "main.yml").read_text()
    again = [f"{rel(path)}: {m.group(0)}" for path in tune_tasks
             for m in re.finditer(r"sglang_verify_(?:concurrency|repeats|requests_per_stream|output_len)\b", path.read_text())]
    assert again == [], again


def top_level_functions(path):
    return {node.name for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_a_name_means_one_thing():
    """`fingerprint` is host/args.py's (SGLang version + argv: what makes two runs comparable), not the
    digest of a deploy's inputs (action/sglang_deploy_state.py's inputs_digest); `load_source` is the
    reader's (source/loader.py), not the cached reading (source/cache.py's cached_source)."""
    homes = {"fingerprint": "plugins/module_utils/host/args.py", "load_source": "plugins/module_utils/source/loader.py"}
    for name, home in homes.items():
        defined = [rel(p) for p in python_files("plugins") if name in top_level_functions(p)]
        assert defined == [home], name
    # no module imports the cached reading by the reader's name
    by_old_name = [f"{rel(path)}:{node.lineno}" for path in python_files("plugins", "tests", "scripts", "bench")
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("source.cache")
                   and any(alias.name == "load_source" for alias in node.names)]
    assert by_old_name == [], by_old_name


def test_action_plugins_write_reports_through_the_one_helper():
    """Run the module, pop the report arguments, stamp, write: sglang_report.py's run_module_and_report,
    for audit, compat, release and drift alike; only sglang_report.py calls write_report."""
    calls = {}
    for path in python_files("plugins/action"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func).rsplit(".", 1)[-1]
                if name in ("write_report", "run_module_and_report"):
                    calls.setdefault(name, set()).add(path.stem)
    assert calls == {"write_report": {"sglang_report"},
                     "run_module_and_report": {"sglang_audit", "sglang_compat", "sglang_drift", "sglang_release"}}


def test_role_inputs_reads_each_roles_argument_specs_once(monkeypatch):
    """sglang_role_inputs validates an entry point and looks for misspelled names with one reading of
    the role's meta/argument_specs.yml (unknown_role_vars takes the specs read), and says the same."""
    import types

    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from ansible_collections.sglang.fleet.plugins.action import sglang_role_inputs
    from ansible_collections.sglang.fleet.plugins.filter import fleet_vars

    read = []
    real = fleet_vars.role_argument_specs
    monkeypatch.setattr(fleet_vars, "role_argument_specs", lambda path: read.append(path) or real(path))
    monkeypatch.setattr(fleet_vars.yaml, "safe_load", lambda *a, _real=fleet_vars.yaml.safe_load: read.append("yaml") or _real(*a))
    task = types.SimpleNamespace(args={"roles": ["sglang_drift", "sglang_verify"]}, async_val=0, check_mode=False,
                                 action="sglang.fleet.sglang_role_inputs")
    connection = types.SimpleNamespace(_shell=types.SimpleNamespace(tmpdir="/nonexistent"))
    loader = DataLoader()
    action = sglang_role_inputs.ActionModule(task, connection, None, loader, Templar(loader=loader), None)
    result = action.run(task_vars={"sglang_version": "0.5.11", "sglang_verify_min_tok_z": 1})
    assert result == {"failed": True,
                      "msg": "unknown variable sglang_verify_min_tok_z: did you mean sglang_verify_min_decode_tok_s?"}
    roles = sglang_role_inputs.ROLES_DIR
    assert read == [os.path.join(roles, "sglang_drift"), "yaml", os.path.join(roles, "sglang_verify"), "yaml"]


# A filter plugin only maps filter names to plugins/module_utils/ (README: "logic lives in
# plugins/module_utils/"): its functions are glue, a call of one module_utils function with the
# filter's own arguments, at most turning that function's error into Ansible's filter error.
# Logic still written in a filter file waits for its move, each named with where it belongs; the
# list may only shrink (the host model's, multi-node and PD planning moved to module_utils/host/).
FILTER_LOGIC_NOT_YET_MOVED = {  # file: (where it belongs, its names)
    "fleet_vars.py": ("the misspelled-variable check, also imported by action plugins",
                      ["unknown_vars", "role_argument_specs", "unknown_role_vars"]),
    "sglang_args.py": ("host/args.py: redaction given a mapping of secrets, the same-machine check",
                       ["sglang_redact", "sglang_same_machine"]),
    "sglang_release.py": ("release/: the release records as lines", ["release_lines"]),
    "sglang_router.py": ("router/: its workers, PD plan and API key; a lambda reordering worker_url's arguments",
                         ["PD_DERIVED", "worker_url", "worker_urls", "pd_plan", "worker_keys", "key_problems",
                          "FilterModule.filters"]),
}


def _without_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _plain(node):
    """A name, a dotted name or a constant: no expression that decides anything."""
    return isinstance(node, (ast.Name, ast.Constant)) or (isinstance(node, ast.Attribute) and _plain(node.value))


def _plain_call(node):
    return isinstance(node, ast.Call) and _plain(node.func) \
        and all(_plain(a.value if isinstance(a, ast.Starred) else a) for a in node.args) \
        and all(_plain(k.value) for k in node.keywords)


def _is_glue(func):
    """`return f(args)`; or that in a try whose handlers raise AnsibleFilterError; or a wrapper: a def
    of that shape (decorated at most with functools.wraps) and `return` of it."""
    body = _without_docstring(func.body)
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return _plain_call(body[0].value)
    if len(body) == 1 and isinstance(body[0], ast.Try):
        tried = body[0]
        return (len(tried.body) == 1 and isinstance(tried.body[0], ast.Return) and _plain_call(tried.body[0].value)
                and not tried.orelse and not tried.finalbody
                and all(len(h.body) == 1 and isinstance(h.body[0], ast.Raise) and isinstance(h.body[0].exc, ast.Call)
                        and ast.unparse(h.body[0].exc.func) == "AnsibleFilterError" for h in tried.handlers))
    if len(body) == 2 and isinstance(body[0], ast.FunctionDef) and isinstance(body[1], ast.Return):
        return (_is_glue(body[0]) and ast.unparse(body[1].value) == body[0].name
                and all(_plain_call(d) and ast.unparse(d.func) == "functools.wraps" for d in body[0].decorator_list))
    return False


def _is_mapping(filters):
    """FilterModule.filters: `return {name: function}`, a function maybe wrapped by a plain call."""
    body = _without_docstring(filters.body)
    return len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Dict) \
        and all(isinstance(k, ast.Constant) and (_plain(v) or _plain_call(v))
                for k, v in zip(body[0].value.keys, body[0].value.values))


def test_a_filter_plugin_maps_filter_names_to_module_utils():
    """plugins/filter/*.py hold imports, glue functions and a FilterModule that maps names to functions,
    importing their logic from plugins/module_utils/ and never from another filter file."""
    logic, imports = [], []
    for path in python_files("plugins/filter"):
        for node in _without_docstring(ast.parse(path.read_text()).body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                imports += [f"{rel(path)}: {name}" for name in names if ".plugins.filter" in name]
            elif isinstance(node, ast.FunctionDef):
                if not _is_glue(node):
                    logic.append((path.name, node.name))
            elif isinstance(node, ast.ClassDef) and node.name == "FilterModule":
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef)]
                if [m.name for m in methods] != ["filters"] or not _is_mapping(methods[0]):
                    logic.append((path.name, "FilterModule.filters"))
            else:
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", node)]
                logic += [(path.name, ast.unparse(t)) for t in targets]
    assert imports == [], "import the logic from plugins/module_utils/, not from another filter file"
    waiting = [(file, name) for file, (_home, names) in FILTER_LOGIC_NOT_YET_MOVED.items() for name in names]
    assert sorted(logic) == sorted(waiting), "logic in a filter file: move it to plugins/module_utils/"


def test_the_host_model_lives_in_module_utils_host():
    """The host model, multi-node and PD planning are plugins/module_utils/host/'s (issue #43): each filter
    of their filter files is a function of its home there, or glue whose call is the home's."""
    from ansible_collections.sglang.fleet.plugins.filter import sglang_host, sglang_multinode, sglang_pd
    from ansible_collections.sglang.fleet.plugins.module_utils.host import host_model, multinode, pd

    for filters, home in ((sglang_host, host_model), (sglang_multinode, multinode), (sglang_pd, pd)):
        for name, func in filters.FilterModule().filters().items():
            func = getattr(func, "__wrapped__", func)  # functools.wraps
            if func.__module__ == filters.__name__:
                returned = [ast.unparse(n.value.func) for n in ast.walk(ast.parse(inspect.getsource(func)))
                            if isinstance(n, ast.Return)]
                assert len(returned) == 1 and returned[0].startswith(home.__name__.rsplit(".", 1)[1] + "."), name
            else:
                assert func.__module__ == home.__name__, name


def test_a_hosts_report_path_is_written_once():
    """`<reports_dir>/<host>` is report/fleet_reports.py's host_path: the roles and playbooks call it as the
    filter sglang.fleet.sglang_report_path, the scripts and plugins as host_path or host_folders."""
    from ansible_collections.sglang.fleet.plugins.filter import fleet_reports as report_filters
    from ansible_collections.sglang.fleet.plugins.module_utils.report.fleet_reports import host_folders, host_path

    assert host_path("reports", "ct129") == "reports/ct129"
    assert host_path(REPO / "reports", "ct129", "tune-20261201T081104Z", "step-1") == \
        f"{REPO}/reports/ct129/tune-20261201T081104Z/step-1"
    assert host_folders("/srv/reports", ["ct129", "ct130"]) == ["/srv/reports/ct129", "/srv/reports/ct130"]
    path = report_filters.FilterModule().filters()["sglang_report_path"]
    assert path("ct129", "/srv/reports", "verify-history.jsonl") == "/srv/reports/ct129/verify-history.jsonl"

    in_yaml = re.compile(r"\}\}/\{\{\s*inventory_hostname\b|'/'\s*~\s*inventory_hostname\b|report_dir\s*~\s*'/'")
    found = [f"{rel(path)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
             for root in ("roles", "playbooks") for ext in ("*.yml", "*.j2") for path in sorted((REPO / root).rglob(ext))
             for text in [path.read_text()] for m in in_yaml.finditer(text)]
    home = REPO / "plugins" / "module_utils" / "report" / "fleet_reports.py"
    for path in python_files("plugins", "scripts", "sglang_fleet"):
        tree = ast.parse(path.read_text())
        the_home = {id(n) for f in tree.body if path == home and getattr(f, "name", "") == "host_path" for n in ast.walk(f)}
        found += [f"{rel(path)}:{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and id(node) not in the_home and node.args
                  and ast.unparse(node.func) in ("os.path.join", "pathlib.Path") and "report" in ast.unparse(node.args[0])]
    assert found == [], "use sglang.fleet.sglang_report_path (YAML) or fleet_reports.host_path (Python):\n" + "\n".join(found)


# The units the collection installs and the role variable of each one's hardening.
HARDENED_UNITS = {"sglang_service": "sglang_service_hardening", "sglang_router": "sglang_router_hardening",
                  "sglang_schedule": "sglang_schedule_hardening"}


def test_every_units_hardening_is_the_one_base_with_its_own_settings():
    """The systemd hardening was written three times (service, router, schedule): each role's default is now
    module_utils/unit_hardening.py's BASE with the unit's own settings over it (sglang.fleet.sglang_unit_hardening),
    and a unit's own settings never repeat a base setting."""
    import jinja2
    import yaml

    from ansible_collections.sglang.fleet.plugins.filter.sglang_args import FilterModule
    from ansible_collections.sglang.fleet.plugins.module_utils.unit_hardening import BASE

    env = jinja2.Environment()
    env.filters["sglang.fleet.sglang_unit_hardening"] = FilterModule().filters()["sglang_unit_hardening"]
    for role, name in HARDENED_UNITS.items():
        default = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())[name].strip()
        assert default.startswith("{{") and default.endswith("| sglang.fleet.sglang_unit_hardening }}"), role
        own = env.compile_expression(default[2:-2].rpartition("|")[0])()
        assert own and not [key for key, value in own.items() if BASE.get(key) == value], role
        assert env.compile_expression(default[2:-2])() == {**BASE, **own}, role


def test_the_hardening_filter_gives_a_new_mapping_and_refuses_a_non_mapping():
    import pytest
    from ansible.errors import AnsibleFilterError

    from ansible_collections.sglang.fleet.plugins.filter.sglang_args import sglang_unit_hardening
    from ansible_collections.sglang.fleet.plugins.module_utils.unit_hardening import BASE

    own = {"SystemCallFilter": ["@system-service", "~@privileged"], "ProtectHome": "yes"}
    first = sglang_unit_hardening(own)
    assert first == {**BASE, **own} and sglang_unit_hardening() == BASE
    first["SystemCallFilter"].append("~@mount")
    assert own["SystemCallFilter"] == ["@system-service", "~@privileged"]   # the role's own lists stay as they were
    with pytest.raises(AnsibleFilterError) as err:
        sglang_unit_hardening(["ProtectHome=yes"])
    assert str(err.value) == "sglang_unit_hardening: a unit's own hardening is a mapping of [Service] settings, got list"


def test_a_files_bytes_are_read_by_the_one_helper(tmp_path):
    """records._read_bytes (b"" for a missing file) and venv_build.read_bytes (None) were one reader twice:
    module_utils/files.py's read_bytes, the missing file's value a parameter."""
    from ansible_collections.sglang.fleet.plugins.module_utils.files import read_bytes

    again = [f"{rel(path)}: def {name}" for path in python_files("plugins") if path != FILES_HELPER
             for name in top_level_functions(path) if name.strip("_") == "read_bytes"]
    assert again == []
    (tmp_path / "unit").write_bytes(b"[Unit]\n\x00")
    assert read_bytes(tmp_path / "unit") == read_bytes(tmp_path / "unit", b"") == b"[Unit]\n\x00"
    assert (read_bytes(tmp_path / "absent"), read_bytes(tmp_path / "absent", b"")) == (None, b"")
