"""Every module's documentation parses with ansible-doc, and says what its author meant (issue #11).

ansible-doc renders DOCUMENTATION / RETURN from YAML: an unquoted ``: `` makes a description a
mapping (ansible-doc then fails), and a comma inside a one-line ``{description: ..., type: ...}``
silently cuts the description into stray keys (ansible-doc still works, the text is garbled). Both
are checked here, on the JSON that ``ansible-doc --json`` returns.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_DOC = str(pathlib.Path(sys.executable).with_name("ansible-doc"))
ENV = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}

# Every module of the collection (the router's included), by FQCN as users call them.
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py"))

# ansible-doc lists the filters of plugins/filter/ as sglang.fleet.<name> (the links of filter_plugins/
# point at the same files), but none of them has documentation (a <name>.yml beside the plugin or DOCUMENTATION in it) yet. Remove a filter
# from this list when it gets documentation: it is then checked like a module.
FILTERS_WITHOUT_DOCS = [
    "env_file_line", "sglang_args_problems", "sglang_argv", "sglang_expect_problems", "sglang_is_loopback",
    "sglang_host_model", "sglang_host_variant", "sglang_local_url", "sglang_regression_plan",
    "sglang_multinode_batches", "sglang_multinode_gpu_problems", "sglang_multinode_plan", "sglang_multinode_without",
    "sglang_pd_plan", "sglang_redact", "sglang_release_lines", "sglang_router_key_problems", "sglang_router_pd_plan",
    "sglang_router_worker_keys", "sglang_router_worker_url", "sglang_router_worker_urls", "sglang_same_machine",
    "sglang_unit_lines",
    "sglang_unit_value_problems", "sglang_verify_threshold_problems", "systemd_quote", "unknown_role_vars", "unknown_vars",
]

OPTION_KEYS = {"description", "type", "required", "default", "choices", "elements", "aliases", "suboptions",
               "no_log", "version_added"}
RETURN_KEYS = {"description", "type", "returned", "sample", "elements", "contains", "version_added"}


def ansible_doc(*args):
    return subprocess.run([ANSIBLE_DOC, *args], capture_output=True, text=True, env=ENV, cwd=REPO,
                          check=False, timeout=120)


def _is_text(desc) -> bool:
    return isinstance(desc, str) or (isinstance(desc, list) and all(isinstance(d, str) for d in desc))


def _entry_problems(entries, allowed, where) -> list:
    out = []
    for name, spec in (entries or {}).items():
        if not isinstance(spec, dict):
            out.append(f"{where}.{name} is not a mapping: {spec!r}")
            continue
        stray = sorted(set(spec) - allowed)
        if stray:
            out.append(f"{where}.{name} has stray keys {stray} (a comma in an unquoted description?)")
        if not _is_text(spec.get("description")):
            out.append(f"{where}.{name}.description is not text: {spec.get('description')!r}")
        out += _entry_problems(spec.get("suboptions") or spec.get("contains"), allowed, f"{where}.{name}")
    return out


@pytest.mark.parametrize("module", MODULES)
def test_module_documentation(module):
    fqcn = f"sglang.fleet.{module}"
    text = ansible_doc(fqcn)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"> MODULE {fqcn} (")
    got = ansible_doc("--json", fqcn)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)[fqcn]
    problems = [f"description item is not text: {d!r}" for d in doc["doc"]["description"] if not _is_text(d)]
    problems += _entry_problems(doc["doc"].get("options"), OPTION_KEYS, "options")
    problems += _entry_problems(doc["return"], RETURN_KEYS, "RETURN")
    assert problems == []
    tasks = yaml.safe_load(doc["examples"])
    assert isinstance(tasks, list) and any(fqcn in task for task in tasks), doc["examples"]


def _filter_names() -> list:
    names = []
    for path in sorted((REPO / "plugins" / "filter").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"_filters_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        names += list(mod.FilterModule().filters())
    return sorted(names)


def test_filter_documentation():
    listed = ansible_doc("-t", "filter", "-l", "--json")
    assert listed.returncode == 0, listed.stderr
    ours = {k.split(".", 2)[2]: v for k, v in json.loads(listed.stdout).items() if k.startswith("sglang.fleet.")}
    assert sorted(ours) == _filter_names()   # ansible-doc sees every filter of plugins/filter/
    assert sorted(n for n, short in ours.items() if short == "UNDOCUMENTED") == sorted(FILTERS_WITHOUT_DOCS)
    for name in sorted(set(ours) - set(FILTERS_WITHOUT_DOCS)):
        got = ansible_doc("-t", "filter", f"sglang.fleet.{name}")
        assert got.returncode == 0, got.stderr
