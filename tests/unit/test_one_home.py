"""One home per concept (issue #43): a helper the collection has once is not written again beside it."""

import ast
import builtins
import importlib.util
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


# Shared module options (doc fragments, plugins/doc_fragments/): a module declares api_key, timeout or
# host itself only where the option means something else than the fragment's, for the reason given.
SHARED_OPTIONS = ("api_key", "timeout", "host")
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
    """api_key (6 modules), timeout (6) and host (11) were each written in every module: where the
    option means what the fragment says (same type, default, required), the module extends the fragment."""
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
    specs = {**module_options.server_options(), **module_options.inventory_host_option()}
    assert module_options.server_options() == {**module_options.api_key_option(), **module_options.http_timeout_option()}
    assert sorted(specs) == sorted(SHARED_OPTIONS)
    for option, spec in specs.items():
        assert same_option(spec, fragments[option][1]), option
    assert specs["api_key"]["no_log"] is True
    assert module_options.api_key_option() is not module_options.api_key_option()  # a fresh dict per module


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
