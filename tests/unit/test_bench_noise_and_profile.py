"""bench/controller_profile.py (where a play's controller samples went) and bench/tune_offline.py's
real GPU noise rows (each restart against the others)."""

import json
import math
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))   # tune_offline imports its neighbours
import controller_profile  # noqa: E402
import tune_offline  # noqa: E402

PROCESS = 'process 7:"ansible-playbook deploy.yml"'
BUILD = ("_configure_module (ansible/plugins/action/__init__.py:1250);modify_module (ansible/executor/module_common.py:1290);"
         "recursive_finder (ansible/executor/module_common.py:760)")
TEMPLATE = "template (ansible/_internal/_templating/_engine.py:300)"


def test_each_sample_goes_to_the_first_phase_its_stack_shows_and_shares_add_up(tmp_path):
    """A payload build that templates on its way is a payload build (the first phase in order); a stack
    with none of the phases' frames is other; a function counts once per stack however often it recurs."""
    stacks = tmp_path / "run.txt"
    stacks.write_text("\n".join([
        f"{PROCESS};run (ansible/executor/task_executor.py:600);{BUILD} 30",
        f"{PROCESS};run (ansible/executor/task_executor.py:600);{BUILD};{TEMPLATE} 10",
        f"{PROCESS};run (ansible/executor/task_executor.py:600);{TEMPLATE} 40",
        f"{PROCESS};f (x.py:1);f (x.py:2);f (x.py:3) 20",
        "not a stack line",
    ]) + "\n")
    text = controller_profile.report(stacks, top=3)
    assert text.startswith("100 samples")
    assert "| module payload build (AnsiballZ) | 40 | 40.0 % |" in text
    assert "| templating | 40 | 40.0 % |" in text
    assert "| other | 20 | 20.0 % |" in text
    assert "| run (ansible/executor/task_executor.py) | 80 | 80.0 % |" in text
    assert "| f (x.py) | 20 | 20.0 % |" not in text   # 4th of the top list: cut at top=3
    assert "| f (x.py) | 60" not in controller_profile.report(stacks, top=10)   # counted once per stack


def test_a_gpu_restart_is_its_runs_median_against_the_median_of_the_other_restarts(tmp_path):
    def restart(c1, c4):
        return {"c1": {"runs": [{"output_throughput": v} for v in c1]},
                "c4": {"runs": [{"output_throughput": v} for v in c4]}}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"restarts": [restart([100, 150, 102], [400, 400, 400]),
                                                restart([98, 99, 500], [380, 390, 385]),
                                                restart([101, 101, 101], [410, 420, 415])]}))
    # c1 medians 102, 99, 101: each against the median of the other two
    assert tune_offline.gpu_ratios("c1", results) == pytest.approx([102 / 100, 99 / 101.5, 101 / 100.5])
    assert tune_offline.gpu_ratios("c4", results) == pytest.approx([400 / 400, 385 / 407.5, 415 / 392.5])


def test_the_recorded_h100_restarts_give_the_noise_bench_readme_quotes():
    """bench/README.md, "A real GPU's run-to-run noise": 1.2 % at concurrency 1, 3.4 % at 4, 11 restarts."""
    for level, sd in (("c1", 0.012), ("c4", 0.034)):
        logs = [math.log(r) for r in tune_offline.gpu_ratios(level)]
        assert len(logs) == 11
        mean = sum(logs) / len(logs)
        assert math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs)) == pytest.approx(sd, abs=0.0005)
