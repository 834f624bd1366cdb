"""Upgrade preview (plugins/module_utils/compat/upgrade.py) on the real sglang 0.5.11 and 0.5.23 wheels.

ct129 (inventories/lab) runs 0.5.11 (era A); 0.5.23 (era C) turns its prefill CUDA graph on (the
breakable allow-list) where 0.5.11 auto-disables it for a multimodal model. The playbook's bad
inputs (a target that is not a release, or not on PyPI) stop before any host is read.
"""
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from ansible_run import run_module
from local_http import QuietHandler, serving
from wheels import sglang_source_tree

from ansible_collections.sglang.fleet.plugins.module_utils.compat.upgrade import preview, serving_topic
from ansible_collections.sglang.fleet.plugins.module_utils.source import load_source

REPO = pathlib.Path(__file__).resolve().parents[2]
COMMON = yaml.safe_load((REPO / "group_vars" / "all" / "sglang.yml").read_text())["sglang_args_common"]
CT129 = yaml.safe_load((REPO / "inventories" / "lab" / "host_vars" / "ct129.yml").read_text())
ARGS = {**COMMON, **CT129["sglang_args"]}
MODEL = CT129["lab_model"]["config"]
A6000 = {"gpu_model": "NVIDIA RTX A6000", "gpu_count": 2, "compute_capability": "8.6", "source": "declared"}
PREFILL = "prefill/piecewise CUDA graph"
RULE_0511 = "sglang/srt/server_args.py:1229"
RULE_0523 = "sglang/srt/configs/model_config.py:2501"


@pytest.fixture(scope="module")
def old():
    return load_source(sglang_source_tree("0.5.11"))


@pytest.fixture(scope="module")
def new():
    return load_source(sglang_source_tree("0.5.23"))


@pytest.mark.wheels
def test_ct129_prefill_graph_flips_from_auto_disabled_to_on_with_both_rules(old, new):
    r = preview(old, new, ARGS, A6000, MODEL, host="ct129")
    assert (r["from"]["version"], r["from"]["era"], r["to"]["version"], r["to"]["era"]) == ("0.5.11", "A", "0.5.23", "C")
    assert r["refuses_argv"] is False and r["flags"] == [] and r["predicted_with"] == []
    assert [o["name"] for o in r["optimisations"]] == [PREFILL]
    flip = r["optimisations"][0]
    assert flip["status_changes"] is True
    assert (flip["from"]["status"], flip["from"]["value"], flip["from"]["rule"]) == ("auto-disabled", False, RULE_0511)
    assert (flip["to"]["status"], flip["to"]["value"], flip["to"]["rule"]) == ("on", "breakable", RULE_0523)
    assert f"  {PREFILL}: auto-disabled [{RULE_0511}] -> on (breakable) [{RULE_0523}]" in r["lines"]
    assert r["summary"] == ("ct129 0.5.11 -> 0.5.23: argv accepted; prefill/piecewise CUDA graph auto-disabled -> on; "
                            "7 serving default(s) change")
    assert r["lines"][-1] == "compatibility: not checked"


@pytest.mark.wheels
def test_serving_defaults_that_change_with_file_and_line_in_each_release(old, new):
    r = preview(old, new, ARGS, A6000, MODEL, host="ct129")
    by = {d["field"]: d for d in r["defaults"]}
    assert sorted(by) == ["enable_fused_qk_norm_rope", "hicache_mem_layout", "hicache_ratio",
                          "hicache_storage_prefetch_policy", "mamba_full_memory_ratio", "mm_enable_dp_encoder",
                          "swa_full_tokens_ratio"]
    assert by["hicache_mem_layout"] == {
        "option": "--hicache-mem-layout", "field": "hicache_mem_layout", "topic": "memory",
        "from": "layer_first", "to": "page_first",
        "from_where": "sglang/srt/server_args.py:5820", "to_where": "sglang/srt/arg_groups/fields/memory.py:135"}
    assert (by["swa_full_tokens_ratio"]["from"], by["swa_full_tokens_ratio"]["to"]) == ("0.8", "unset (chosen at start)")
    # changed too, but not about serving (the rule leaves them out)
    assert "file_storage_path" not in by and "encoder_transfer_backend" not in by
    # an option the host sets is never listed as a default change
    r = preview(old, new, {**ARGS, "hicache_mem_layout": "layer_first"}, A6000, MODEL)
    assert "hicache_mem_layout" not in {d["field"] for d in r["defaults"]}


def test_the_fleet_report_shows_the_latest_preview_of_each_host(old, new, tmp_path):
    import json  # noqa: PLC0415

    r = preview(old, new, ARGS, A6000, MODEL, host="ct129")
    (tmp_path / "ct129").mkdir()
    (tmp_path / "ct129" / "upgrade-latest.json").write_text(json.dumps(r))
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "fleet_report.py"), "--reports", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr  # a preview is shown, it fails nothing
    header, _, row = proc.stdout.splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")]
    cell = row.strip("|").split("|")[columns.index("upgrade preview")].strip()
    assert cell == r["summary"].removeprefix("ct129 ")
    assert cell.startswith("0.5.11 -> 0.5.23: argv accepted; prefill/piecewise CUDA graph auto-disabled -> on;")


def test_the_serving_rule_names_a_topic_or_none():
    assert [serving_topic(f) for f in ("mem_fraction_static", "schedule_policy", "cuda_graph_max_bs_decode",
                                       "attention_backend", "speculative_num_steps", "tp_size", "log_level",
                                       "file_storage_path")] == [
        "memory", "scheduling", "graphs", "attention", "speculative decoding", "parallelism", None, None]


@pytest.mark.wheels
def test_era_a_to_c_renamed_flag_is_a_warning_with_its_replacement(old, new):
    r = preview(old, new, {**ARGS, "disable_cuda_graph": True}, A6000, MODEL, host="ct129")
    assert r["refuses_argv"] is False
    assert [(c["flag"], c["kind"], c["severity"], c["replacement"]) for c in r["flags"]] == [
        ("--disable-cuda-graph", "renamed", "warning",
         "--cuda-graph-backend-decode=disabled --cuda-graph-backend-prefill=disabled")]
    assert "1 flag warning(s)" in r["summary"]


@pytest.mark.wheels
def test_a_target_that_refuses_the_argv_says_so_and_predicts_with_the_replacements(old, new):
    args = {**ARGS, "enforce_piecewise_cuda_graph": True, "cuda_graph_max_bs": 32}
    r = preview(old, new, args, A6000, MODEL, host="ct129")
    assert r["refuses_argv"] is True
    assert [(c["flag"], c["kind"], c["severity"], c["replacement"]) for c in r["flags"]] == [
        ("--cuda-graph-max-bs", "ambiguous", "error", "--cuda-graph-max-bs-decode"),
        ("--enforce-piecewise-cuda-graph", "removed", "error", "--cuda-graph-backend-prefill breakable")]
    assert "unrecognized arguments: --enforce-piecewise-cuda-graph" in r["flags"][1]["message"]
    assert r["predicted_with"] == ["--cuda-graph-max-bs -> --cuda-graph-max-bs-decode 32",
                                   "--enforce-piecewise-cuda-graph -> --cuda-graph-backend-prefill breakable"]
    assert r["lines"][1] == "flags: the target REFUSES this argv (the server would not start)"
    # enforced on 0.5.11 (its rule), explicitly breakable on 0.5.23: the status stays on
    flip = r["optimisations"][0]
    assert (flip["name"], flip["status_changes"], flip["from"]["rule"], flip["to"]["value"]) == (
        PREFILL, False, "sglang/srt/server_args.py:1196", "breakable")
    assert r["summary"].startswith("ct129 0.5.11 -> 0.5.23: the target REFUSES the argv;")


@pytest.mark.wheels
def test_the_module_gives_the_preview_with_the_target_compat_verdict():
    compat = {"status": "blocked", "summary": "6 ok, 1 blocked",
              "checks": [{"check": "memory_fit", "status": "ok", "detail": "27.0 GB of weights on 2x 48 GB"}]}
    rc, result, out = run_module({"from_source_dir": str(sglang_source_tree("0.5.11")),
                                  "to_source_dir": str(sglang_source_tree("0.5.23")), "args": ARGS,
                                  "hardware": A6000, "model_config": MODEL, "compat": compat, "host": "ct129"},
                                 module="sglang_upgrade_preview")
    assert rc == 0, out
    assert result["changed"] is False
    assert result["report"]["compat"]["memory_fit"]["status"] == "ok"
    assert result["lines"][-2:] == ["compatibility of 0.5.23: blocked (6 ok, 1 blocked)",
                                    "  memory fit: ok - 27.0 GB of weights on 2x 48 GB"]
    assert result["summary"].endswith("; compat blocked")


def _playbook(*extra):
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i",
                           str(REPO / "inventories" / "lab" / "hosts.yml"), str(REPO / "upgrade-preview.yml"),
                           "-l", "ct129", *extra], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_a_target_that_is_not_a_release_stops_before_any_host_is_read():
    p = _playbook("-e", "sglang_upgrade_to=latest")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Give the target release with -e sglang_upgrade_to=X" in p.stdout
    assert "got 'latest'" in p.stdout
    assert "Read the host's release records" not in p.stdout


class NotOnIndex(QuietHandler):
    """A package index's simple API (PEP 503) that knows sglang 0.5.23 alone."""

    def do_GET(self):  # noqa: N802
        if self.path != "/simple/sglang/":
            self.send_response(404)
            self.end_headers()
            return
        page = b'<a href="sglang-0.5.23-py3-none-any.whl#sha256=00">sglang-0.5.23-py3-none-any.whl</a>'
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(page)


def test_a_target_not_on_the_index_stops_before_any_host_is_read():
    with serving(NotOnIndex) as url:
        p = _playbook("-e", "sglang_upgrade_to=0.5.99", "-e", f"upgrade_preview_index_url={url}/simple")
    assert p.returncode == 2, p.stdout + p.stderr
    flat = " ".join(p.stdout.split())
    assert f"sglang 0.5.99 is not a release on {url}/simple (no file of it in {url}/simple/sglang/)" in flat, p.stdout
    assert "pip index versions sglang" in flat
    assert "Read the host's release records" not in p.stdout


def test_an_index_that_does_not_answer_is_said_as_such_before_any_host_is_read():
    with serving(NotOnIndex) as url:
        pass  # closed: nothing listens on that port any more
    p = _playbook("-e", "sglang_upgrade_to=0.5.23", "-e", f"upgrade_preview_index_url={url}")
    assert p.returncode == 2, p.stdout + p.stderr
    flat = " ".join(p.stdout.split())
    assert f"the controller could not ask {url} whether sglang 0.5.23 exists (" in flat, p.stdout
    assert "a mirror's simple API given with -e upgrade_preview_index_url=URL. Nothing was read on any host." in flat, p.stdout
    assert "Read the host's release records" not in p.stdout
