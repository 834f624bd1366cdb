"""Shared test setup.

The collection's code imports as Ansible imports it, `ansible_collections.sglang.fleet.plugins...`:
pytest.ini puts `.collections` (whose `ansible_collections/sglang/fleet` links to the repository
root) on sys.path. This file stays so that helpers run outside pytest can `import conftest` for the
same path.
"""
import json
import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS = str(REPO / ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


# The lab modules' CPU seconds (tests/lab/conftest.py writes them to LAB_CPU_LOG), printed here: pytest-xdist's
# controller loads this file, not tests/lab/conftest.py, which only its workers collect.
def pytest_terminal_summary(terminalreporter):
    log = os.environ.get("LAB_CPU_LOG")
    if not log or not os.path.exists(log) or hasattr(terminalreporter.config, "workerinput"):
        return
    rows = [json.loads(line) for line in open(log, encoding="utf-8") if line.strip()]
    rows.sort(key=lambda r: -(r["controller_cpu_s"] + r["hosts_cpu_s"]))
    terminalreporter.section("CPU seconds by lab module (controller + its hosts)")
    for r in rows:
        terminalreporter.write_line(f"{r['controller_cpu_s'] + r['hosts_cpu_s']:8.0f} = {r['controller_cpu_s']:6.0f} + "
                                    f"{r['hosts_cpu_s']:6.0f}  wall {r['wall_s']:6.0f}  {r['module']}")
    terminalreporter.write_line(f"{sum(r['controller_cpu_s'] + r['hosts_cpu_s'] for r in rows):8.0f} in all")
