"""sglang_source_assertions: the user's own grep/sed-style checks on the installed SGLang source.

The validator's messages (preflight, plugins/filter/sglang_assertions.py), the evaluator on the real
sources of two releases of different eras (0.5.11: everything in server_args.py; 0.5.23: the
arg_groups/ hooks), the static audit's report and lines, and the sglang_audit module as Ansible runs it.
The examples are the ones shipped in roles/sglang_audit/README.md and inventories/.
"""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.audit.assertions import MAX_FILES, evaluate, validate
from ansible_collections.sglang.fleet.plugins.module_utils.audit.host_audit import (
    AuditError,
    load_installed,
    static_audit,
)
from ansible_collections.sglang.fleet.plugins.module_utils.host.gpu_facts import declared_facts

REPO = pathlib.Path(__file__).resolve().parents[2]
LAB_CT129 = yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / "ct129.yml").read_text())

# The three examples of roles/sglang_audit/README.md (and inventories/production/group_vars).
PR_23859 = {
    "name": "sglang PR 23859 (Qwen3.5/3.6 MTP draft path) is in this release",
    "path": ["srt/server_args.py", "srt/arg_groups/speculative_hook.py"],
    "regex": r'model_arch in \[[^\]]*"Qwen3_5ForConditionalGeneration",[^\]]*\]:\s*\n'
             r'\s*if (?:self|server_args|cfg)\.speculative_draft_model_path is None',
    "must": "match",
    "message": "Without it, NEXTN/MTP on Qwen3_5ForConditionalGeneration needs --speculative-draft-model-path",
    "fix": "set sglang_args.speculative_draft_model_path to the model_path",
}
MULTIMODAL_RULE = {
    "name": "multimodal auto-disable rule present",
    "path": "srt/server_args.py",
    "regex": r"^\s*if self\.get_model_config\(\)\.is_multimodal:\n\s*self\.disable_piecewise_cuda_graph = True",
    "must": "match",
    "message": "sglang_expect.piecewise_cuda_graph for multimodal models was written for this rule",
    "fix": "re-check piecewise_cuda_graph in the audit of this release and update sglang_expect",
}
MAX_BS_48GB = {
    "name": "cuda_graph_max_bs default is 32 on 35-60 GB GPUs at TP < 4",
    "path": ["srt/server_args.py", "srt/arg_groups/memory_hook.py"],
    "regex": r"gpu_mem < 60 \* 1024:(?:\n.*){0,15}?\n\s*if \w+\.tp_size < 4:\s*\n\s*\S*max_bs = (?P<max_bs>\d+)",
    "must": "match",
    "group": "max_bs",
    "equals": "32",
    "message": "mem_fraction_static 0.88 on 48 GB A6000s was sized with 32 decode CUDA graph batch sizes",
    "fix": "set sglang_args.cuda_graph_max_bs to 32, or re-size mem_fraction_static for the new default",
}
# The draft-path list itself (without Qwen3_5): proves the PR 23859 regex is anchored on real code.
DRAFT_LIST = {**PR_23859, "name": "draft-path auto-detect list", "count": 1,
              "regex": PR_23859["regex"].replace("Qwen3_5ForConditionalGeneration", "DeepseekV3ForCausalLM")}
del DRAFT_LIST["must"]


def one(item, package, **kw):
    assert validate([item]) == []
    return evaluate([item], str(package), **kw)[0]


def line_of(package, location):
    rel, line = location.rsplit(":", 1)
    return (pathlib.Path(package) / rel.split("/", 1)[1]).read_text().splitlines()[int(line) - 1]


# ----------------------------------------------------------------------------- validation

def shipped_examples():
    """The examples of the role README (a yaml block) and of the production group_vars (commented)."""
    readme = (REPO / "roles" / "sglang_audit" / "README.md").read_text()
    block = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    prod = (REPO / "inventories" / "production" / "group_vars" / "sglang_servers.yml").read_text()
    commented = prod.split("\n# sglang_source_assertions:\n", 1)[1]
    uncommented = "sglang_source_assertions:\n" + "\n".join(line[2:] for line in commented.splitlines())
    return yaml.safe_load(block)["sglang_source_assertions"], yaml.safe_load(uncommented)["sglang_source_assertions"]


def test_the_shipped_examples_are_valid_and_the_ones_tested_here():
    readme, production = shipped_examples()
    assert readme == production == [PR_23859, MULTIMODAL_RULE, MAX_BS_48GB]
    assert validate([PR_23859, MULTIMODAL_RULE, MAX_BS_48GB, DRAFT_LIST]) == []
    assert validate(LAB_CT129["sglang_source_assertions"]) == []
    assert validate(None) == [] and validate([]) == []


@pytest.mark.parametrize("item, message", [
    ({"name": "a", "path": "srt/server_args.py", "regex": "x", "must": "match", "mesage": "m"},
     "sglang_source_assertions[0] ('a') has an unknown key 'mesage': did you mean message?"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "x", "must": "match", "flags": "i"},
     "sglang_source_assertions[0] ('a') has an unknown key 'flags': the keys are name, path, regex, must, count, "
     "group, equals, message, fix"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "is_multimodal(", "must": "match"},
     "sglang_source_assertions[0] ('a'): regex 'is_multimodal(' is not a valid Python regular expression: "
     "missing ), unterminated subpattern at position 13"),
    ({"name": "a", "path": "srt/server_args.py", "must": "match"},
     "sglang_source_assertions[0] ('a') has no regex: a Python regular expression (re.MULTILINE) to search the "
     "files for"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "x", "must": "match", "count": 1},
     "sglang_source_assertions[0] ('a') sets both must and count: use one (must: match | not_match, or count: N)"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "x"},
     "sglang_source_assertions[0] ('a') needs must (match or not_match) or count (the exact number of matches)"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "x", "must": "matches"},
     "sglang_source_assertions[0] ('a'): must is 'matches': use match or not_match (or count: N)"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "x", "count": "2"},
     "sglang_source_assertions[0] ('a'): count is '2': it must be a whole number >= 0, without quotes"),
    ({"name": "a", "path": "../../../../etc/passwd", "regex": "root", "must": "match"},
     "sglang_source_assertions[0] ('a'): path '../../../../etc/passwd' leaves the sglang package (..): write it "
     "relative to the installed sglang package folder, e.g. srt/server_args.py or srt/**/*.py"),
    ({"name": "a", "path": ["srt/server_args.py", "srt/../../torch/*.py"], "regex": "x", "must": "match"},
     "sglang_source_assertions[0] ('a'): path 'srt/../../torch/*.py' leaves the sglang package (..): write it "
     "relative to the installed sglang package folder, e.g. srt/server_args.py or srt/**/*.py"),
    ({"name": "a", "path": "/opt/ml-env/sglang-0.5.11/lib/python3.11/site-packages/sglang/srt/server_args.py",
      "regex": "x", "must": "match"},
     "sglang_source_assertions[0] ('a'): path '/opt/ml-env/sglang-0.5.11/lib/python3.11/site-packages/sglang/srt/"
     "server_args.py' is absolute: write it relative to the installed sglang package folder, e.g. "
     "srt/server_args.py or srt/**/*.py"),
    ({"name": "a", "path": "sglang/srt/server_args.py", "regex": "x", "must": "match"},
     "sglang_source_assertions[0] ('a'): path 'sglang/srt/server_args.py' starts with sglang/, but paths are "
     "relative to the sglang package folder itself: write srt/server_args.py"),
    ({"name": "a", "regex": "x", "must": "match"},
     "sglang_source_assertions[0] ('a') has no path: a file or glob relative to the installed sglang package, "
     "e.g. srt/server_args.py or srt/**/*.py"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "(x)", "must": "not_match", "group": 1, "equals": "x"},
     "sglang_source_assertions[0] ('a'): group and equals compare the captured value of a match, so they need "
     "must: match"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "(x)", "must": "match", "group": 2, "equals": "x"},
     "sglang_source_assertions[0] ('a'): group 2 does not exist: the regex has 1 group(s)"),
    ({"name": "a", "path": "srt/server_args.py", "regex": "(?P<bs>x)", "must": "match", "group": "max_bs"},
     "sglang_source_assertions[0] ('a'): group 'max_bs' is not a named group of the regex (its named groups: bs)"),
    ({"path": "srt/server_args.py", "regex": "x", "must": "match"},
     "sglang_source_assertions[0] has no name: give it a short name (name: ...), shown in the report and its "
     "failures"),
])
def test_bad_assertion_data_is_refused_naming_the_item(item, message):
    assert validate([item]) == [message]


def test_not_a_list_and_not_a_mapping_and_duplicate_names():
    assert validate({"name": "a"}) == [
        "sglang_source_assertions must be a list of assertions (name, path, regex, must or count), got dict"]
    assert validate([MULTIMODAL_RULE, "srt/server_args.py"]) == [
        "sglang_source_assertions[1] must be a mapping with name, path, regex and must or count, got str"]
    assert validate([MULTIMODAL_RULE, {**MAX_BS_48GB, "name": MULTIMODAL_RULE["name"]}]) == [
        "sglang_source_assertions[1] ('multimodal auto-disable rule present'): the name 'multimodal auto-disable "
        "rule present' is already used by sglang_source_assertions[0]: names must be unique"]


def test_the_preflight_filter_gives_the_validators_messages():
    spec = importlib.util.spec_from_file_location("_assertion_filters", REPO / "plugins" / "filter" / "sglang_assertions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    problems = mod.FilterModule().filters()["sglang_source_assertion_problems"]
    assert problems([MULTIMODAL_RULE]) == []
    assert problems([{**MULTIMODAL_RULE, "count": 1}]) == [
        "sglang_source_assertions[0] ('multimodal auto-disable rule present') sets both must and count: use one "
        "(must: match | not_match, or count: N)"]


def test_the_role_refuses_it_in_preflight_and_checks_its_shape():
    tasks = yaml.safe_load((REPO / "roles" / "sglang_audit" / "tasks" / "preflight.yml").read_text())
    check = next(t for t in tasks if "sglang_source_assertions" in t["name"])
    assert check["ansible.builtin.assert"]["that"] == "__sglang_audit_input_problems | length == 0"
    # the expectations' problems first, then the assertions' (one check: the first one with a problem)
    assert check["vars"]["__sglang_audit_input_problems"] == (
        "{{ (sglang_expect | default({}) | sglang.fleet.sglang_expect_problems) or "
        "(sglang_source_assertions | default([]) | sglang.fleet.sglang_source_assertion_problems) }}")
    options = yaml.safe_load((REPO / "roles" / "sglang_audit" / "meta" / "argument_specs.yml").read_text()
                             )["argument_specs"]["main"]["options"]
    assert sorted(options["sglang_source_assertions"]["options"]) == sorted(
        ["name", "path", "regex", "must", "count", "group", "equals", "message", "fix"])
    assert options["sglang_source_assertions"]["options"]["must"]["choices"] == ["match", "not_match"]


# ----------------------------------------------------------------------------- real releases

@pytest.fixture(scope="module")
def v0511():
    return sglang_source_tree("0.5.11")


@pytest.fixture(scope="module")
def v0523():
    return sglang_source_tree("0.5.23")


@pytest.mark.wheels
def test_multimodal_rule_present_on_0_5_11_at_the_audits_rule_line(v0511):
    r = one(MULTIMODAL_RULE, v0511)
    assert (r["status"], r["location"], r["matches"]) == ("pass", "sglang/srt/server_args.py:1229", 1)
    assert r["detail"] == "matched at sglang/srt/server_args.py:1229"
    assert line_of(v0511, r["location"]).strip() == "if self.get_model_config().is_multimodal:"


@pytest.mark.wheels
def test_multimodal_rule_gone_from_server_args_on_0_5_23(v0523):
    # 0.5.15+ refined it (an allow-list of multimodal archs), 0.5.19+ moved it to configs/model_config.py.
    r = one(MULTIMODAL_RULE, v0523)
    assert (r["status"], r["location"], r["matches"], r["files_read"]) == ("fail", None, 0, 1)
    assert r["detail"] == "no match; 1 file read for srt/server_args.py"


@pytest.mark.wheels
@pytest.mark.parametrize("version, location", [
    ("0.5.11", "sglang/srt/server_args.py:1346"),
    ("0.5.23", "sglang/srt/arg_groups/memory_hook.py:129"),
])
def test_captured_default_equals_on_both_eras(version, location):
    package = sglang_source_tree(version)
    r = one(MAX_BS_48GB, package)
    assert (r["status"], r["value"], r["location"]) == ("pass", "32", location)
    assert r["detail"] == f"group max_bs is '32' at {location}, equals '32'"
    assert line_of(package, location).strip() in ("self.cuda_graph_max_bs = 32", "decode_cuda_graph_config.max_bs = 32")
    r = one({**MAX_BS_48GB, "equals": 160}, package)   # a number is compared as text
    assert (r["status"], r["value"]) == ("fail", "32")
    assert r["detail"] == f"group max_bs is '32' at {location}, expected '160'"


@pytest.mark.wheels
@pytest.mark.parametrize("version, location", [
    ("0.5.11", "sglang/srt/server_args.py:3493"),
    ("0.5.23", "sglang/srt/arg_groups/speculative_hook.py:1121"),
])
def test_pr_23859_is_in_no_release_but_its_list_is_where_the_regex_looks(version, location):
    # PR 23859 was closed unmerged: through 0.5.23 (the newest on PyPI) the list of architectures whose
    # draft path defaults to model_path has no Qwen3_5ForConditionalGeneration.
    package = sglang_source_tree(version)
    control = one(DRAFT_LIST, package)
    assert (control["status"], control["location"], control["matches"]) == ("pass", location, 1)
    assert line_of(package, location).strip() == "if model_arch in ["
    r = one(PR_23859, package)
    assert (r["status"], r["matches"]) == ("fail", 0)
    assert r["detail"] == ("no match; " + ("1 file" if version == "0.5.11" else "2 files")
                           + " read for srt/server_args.py, srt/arg_groups/speculative_hook.py")


@pytest.mark.wheels
def test_pr_23859_passes_on_the_release_with_the_prs_change_applied(v0511, v0523, tmp_path):
    """The PR's change (the two Qwen3.5 architectures added to the list) applied to each era's file."""
    for version, tree, rel, last in (
            ("0.5.11", v0511, "srt/server_args.py", '                "HYV3ForCausalLM",\n            ]:\n'),
            ("0.5.23", v0523, "srt/arg_groups/speculative_hook.py",
             '        "Qwen4ExpForConditionalGeneration",\n    ]:\n')):
        text = (tree / rel).read_text()
        assert text.count(last) == 1
        indent = last[:len(last) - len(last.lstrip())]
        added = f'{indent}"Qwen3_5ForConditionalGeneration",\n{indent}"Qwen3_5MoeForConditionalGeneration",\n'
        package = tmp_path / version / "sglang"
        (package / rel).parent.mkdir(parents=True)
        (package / rel).write_text(text.replace(last, last.split("\n")[0] + "\n" + added + last.split("\n", 1)[1]))
        r = one(PR_23859, package)
        line = {"0.5.11": 3493, "0.5.23": 1121}[version]
        assert (r["status"], r["location"]) == ("pass", f"sglang/{rel}:{line}")


@pytest.mark.wheels
def test_not_match_count_and_errors_on_a_real_tree(v0511, v0523):
    r = one({"name": "no enable_flashinfer_mla", "path": "srt/server_args.py", "regex": r"--enable-flashinfer-mla\b",
             "must": "not_match"}, v0523)
    assert (r["status"], r["detail"]) == ("pass", "no match; 1 file read for srt/server_args.py")
    r = one({"name": "no is_multimodal rule", "path": "srt/server_args.py", "regex": MULTIMODAL_RULE["regex"],
             "must": "not_match"}, v0511)
    assert (r["status"], r["detail"]) == (
        "fail", "matched at sglang/srt/server_args.py:1229, expected no match")
    r = one({"name": "two nested lists", "path": "srt/server_args.py",
             "regex": r'^\s*"Qwen3_5ForConditionalGeneration",$', "count": 2}, v0511)
    assert (r["status"], r["matches"]) == ("fail", 4)
    assert r["detail"] == ("4 matches, expected 2: sglang/srt/server_args.py:2189, sglang/srt/server_args.py:2216, "
                           "sglang/srt/server_args.py:2344, sglang/srt/server_args.py:3830; "
                           "1 file read for srt/server_args.py")
    r = one({"name": "typo", "path": "srt/server_arg.py", "regex": "x", "must": "match"}, v0511)
    assert (r["status"], r["detail"]) == (
        "error", f"no file of the installed sglang package ({v0511}) matches srt/server_arg.py")
    r = one({"name": "whole srt", "path": "srt/**/*.py", "regex": "x", "count": 0}, v0523, max_files=100)
    assert r["status"] == "error"
    assert r["detail"].startswith("srt/**/*.py matches ") and r["detail"].endswith(
        " files, more than the 100 read per assertion: narrow the path")


@pytest.mark.wheels
def test_a_glob_over_srt_of_0_5_23_fits_under_the_cap(v0523):
    r = one({"name": "hooks", "path": "srt/**/*.py", "regex": r"^def _auto_choose_speculative_params\(", "count": 1},
            v0523)
    assert 2000 < r["files_read"] <= MAX_FILES
    assert (r["status"], r["location"]) == ("pass", "sglang/srt/arg_groups/speculative_hook.py:1430")


def test_a_symlink_out_of_the_package_is_not_read(tmp_path):
    package = tmp_path / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "srt" / "server_args.py").write_text("x = 1\n")
    (tmp_path / "secret.py").write_text("x = 1\n")
    (package / "srt" / "leak.py").symlink_to(tmp_path / "secret.py")
    r = one({"name": "x", "path": "srt/*.py", "regex": "^x = 1$", "count": 1}, package)
    assert (r["status"], r["location"], r["files_read"]) == ("pass", "sglang/srt/server_args.py:1", 1)


# ----------------------------------------------------------------------------- the static audit and the module

def venv_with(tmp_path, version):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "sglang").symlink_to(sglang_source_tree(version))
    return str(tmp_path / "venv")


CT129_ARGS = {"host": "127.0.0.1", "port": 30000, **LAB_CT129["sglang_args"]}


@pytest.mark.wheels
def test_static_audit_reports_and_fails_like_an_expectation(tmp_path):
    src, where = load_installed(venv_with(tmp_path, "0.5.11"), "0.5.11")
    report = static_audit(src, CT129_ARGS, declared_facts(LAB_CT129["sglang_hardware"]), {}, source_path=where,
                          host="ct129", assertions=[MULTIMODAL_RULE, PR_23859])
    assert [(a["name"], a["status"], a["location"]) for a in report["assertions"]] == [
        (MULTIMODAL_RULE["name"], "pass", "sglang/srt/server_args.py:1229"), (PR_23859["name"], "fail", None)]
    failure = ("ct129: sglang_source_assertions 'sglang PR 23859 (Qwen3.5/3.6 MTP draft path) is in this release' "
               "failed on sglang 0.5.11: no match; 1 file read for srt/server_args.py, "
               "srt/arg_groups/speculative_hook.py. Without it, NEXTN/MTP on Qwen3_5ForConditionalGeneration needs "
               "--speculative-draft-model-path. Fix: set sglang_args.speculative_draft_model_path to the model_path")
    assert (report["ok"], report["failures"]) == (False, [failure])
    assert report["lines"][-3:] == [
        "source assertions (sglang_source_assertions): 2 checked, 1 FAILED",
        "  pass multimodal auto-disable rule present: matched at sglang/srt/server_args.py:1229",
        f"  FAILED {failure}"]


@pytest.mark.wheels
def test_static_audit_refuses_bad_assertion_data(tmp_path):
    src, where = load_installed(venv_with(tmp_path, "0.5.23"), "0.5.23")
    with pytest.raises(AuditError) as err:
        static_audit(src, {"model_path": "/models/x"}, {}, {}, source_path=where, host="h200x1",
                     assertions=[{**MULTIMODAL_RULE, "path": "/etc/passwd"}])
    assert str(err.value) == (
        "h200x1: sglang_source_assertions[0] ('multimodal auto-disable rule present'): path '/etc/passwd' is "
        "absolute: write it relative to the installed sglang package folder, e.g. srt/server_args.py or srt/**/*.py")


def run_module(args):
    """The sglang_audit module as Ansible runs it (as tests/unit/test_sglang_audit_wheels.py does)."""
    argv = [str(pathlib.Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,",
            "-e", f"ansible_python_interpreter={sys.executable}", "-m", "sglang.fleet.sglang_audit", "-a", json.dumps(args)]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "0"}
    p = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    out = p.stdout
    return p.returncode, json.loads(out[out.find("=> {") + 3:]), out + p.stderr


@pytest.mark.wheels
def test_module_returns_the_assertions_and_fails_with_their_message(tmp_path):
    venv = venv_with(tmp_path, "0.5.23")
    args = {"model_path": "/models/Qwen3-8B", "host": "127.0.0.1", "port": 30000}
    rc, result, raw = run_module({"venv": venv, "version": "0.5.23", "args": args, "host": "h200x1",
                                  "assertions": [MAX_BS_48GB, MULTIMODAL_RULE]})
    assert rc == 2, raw
    got = [(a["name"], a["status"], a["location"], a["value"]) for a in result["report"]["assertions"]]
    assert got == [(MAX_BS_48GB["name"], "pass", "sglang/srt/arg_groups/memory_hook.py:129", "32"),
                   (MULTIMODAL_RULE["name"], "fail", None, None)]
    assert result["msg"] == (
        "h200x1: SGLang audit failed:\nh200x1: sglang_source_assertions 'multimodal auto-disable rule present' "
        "failed on sglang 0.5.23: no match; 1 file read for srt/server_args.py. sglang_expect.piecewise_cuda_graph "
        "for multimodal models was written for this rule. Fix: re-check piecewise_cuda_graph in the audit of this "
        "release and update sglang_expect")
    assert "source assertions (sglang_source_assertions): 2 checked, 1 FAILED" in result["lines"]
    rc, result, raw = run_module({"venv": venv, "version": "0.5.23", "args": args, "host": "h200x1",
                                  "assertions": [{**MAX_BS_48GB, "regex": "(?P<max_bs>"}]})
    assert rc == 2, raw
    assert result["msg"] == (
        "h200x1: sglang_source_assertions[0] ('cuda_graph_max_bs default is 32 on 35-60 GB GPUs at TP < 4'): regex "
        "'(?P<max_bs>' is not a valid Python regular expression: missing ), unterminated subpattern at position 0")


@pytest.mark.wheels
def test_what_the_readme_says_the_audit_prints(tmp_path):
    readme = (REPO / "roles" / "sglang_audit" / "README.md").read_text()
    shown = readme.split("What the static audit prints for them on 0.5.11 (ct129):\n\n", 1)[1].split("\n\n", 1)[0]
    src, where = load_installed(venv_with(tmp_path, "0.5.11"), "0.5.11")
    report = static_audit(src, CT129_ARGS, declared_facts(LAB_CT129["sglang_hardware"]), {}, source_path=where,
                          host="ct129", assertions=shipped_examples()[0])
    assert report["lines"][-4:] == [line[4:] for line in shown.splitlines()]


@pytest.mark.wheels
@pytest.mark.parametrize("version", ["0.5.11", "0.5.13.post1"])   # the releases the lab deploys to ct129
def test_the_lab_ct129_example_passes_on_its_releases(version):
    (item,) = LAB_CT129["sglang_source_assertions"]
    assert (item["regex"], item["path"], item["equals"]) == (MAX_BS_48GB["regex"], MAX_BS_48GB["path"], "32")
    r = one(item, sglang_source_tree(version))
    assert (r["status"], r["value"]) == ("pass", "32")
