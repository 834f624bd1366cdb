"""bench/lab_cpu.py: the lab phase's CPU log read back as tables and a timeline."""

import importlib.util
import json
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("lab_cpu", REPO / "bench" / "lab_cpu.py")
lab_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab_cpu)

# two modules: a ran 0-180 s, b 60-120 s (its fleet from a's snapshot); each test's line ends before its module's
LOG = [
    {"test": "tests/lab/test_a_lab.py::test_one", "wall_s": 100, "end": 1110, "controller_cpu_s": 20, "hosts_cpu_s": 10},
    {"test": "tests/lab/test_b_lab.py::test_two", "wall_s": 50, "end": 1115, "controller_cpu_s": 5, "hosts_cpu_s": 1},
    {"module": "test_b_lab.py", "wall_s": 60, "end": 1120, "controller_cpu_s": 8, "hosts_cpu_s": 2,
     "fleet": "started from a snapshot"},
    {"module": "test_a_lab.py", "wall_s": 180, "end": 1180, "controller_cpu_s": 60, "hosts_cpu_s": 40,
     "fleet": "deployed, snapshot taken"},
]


def test_the_tables_order_modules_by_cpu_and_give_each_fleet_what_its_tests_did_not_use(tmp_path):
    log = tmp_path / "lab-cpu.jsonl"
    log.write_text("\n".join(json.dumps(row) for row in LOG) + "\n")
    modules, tests = lab_cpu.read(log)
    table = lab_cpu.modules_table(modules)
    assert table[2] == "| test_a_lab.py | 60 + 40 = 100 | 180 | deployed, snapshot taken |"
    assert table[3] == "| test_b_lab.py | 8 + 2 = 10 | 60 | started from a snapshot |"
    assert table[4] == "| all 2 | 68 + 42 = 110 | 240 | |"
    fleets = lab_cpu.tests_table(modules, tests, 1)
    assert fleets[2] == "| test_a_lab.py::test_one | 20 + 10 | 100 |" and len(fleets) == 3 + 3 + 2
    assert fleets[-2:] == ["| test_a_lab.py | 70 | 80 |", "| test_b_lab.py | 4 | 10 |"]


def test_the_timeline_counts_the_modules_running_in_each_minute():
    modules, _ = lab_cpu.read_rows(LOG)
    assert [line.split("modules")[0].split()[-1] for line in lab_cpu.timeline(modules)] == ["1.0", "2.0", "1.0"]
