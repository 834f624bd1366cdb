"""Shared test setup.

The collection's code imports as Ansible imports it, `ansible_collections.sglang.fleet.plugins...`:
pytest.ini puts `.collections` (whose `ansible_collections/sglang/fleet` links to the repository
root) on sys.path. This file stays so that helpers run outside pytest can `import conftest` for the
same path.
"""
import json
import os
import pathlib
import shutil
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
COLLECTIONS = str(REPO / ".collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


# The lab's deployed-fleet snapshots (tests/lab/lab_fleet.py) belong to one test run: its id is set here,
# before pytest-xdist starts the workers that inherit it, and the run's snapshots are removed at its end.
# So does the run's AnsiballZ payload cache: every ansible-playbook the tests start shares one
# (tests/ansible_plugins/callback/session_payload_cache.py), removed at the end.
def pytest_configure(config):
    if hasattr(config, "workerinput"):
        return
    os.environ["SGLANG_FLEET_SNAPSHOT_RUN"] = os.urandom(6).hex()
    os.environ["SGLANG_FLEET_PAYLOAD_CACHE"] = tempfile.mkdtemp(prefix="sglang-fleet-payloads-")
    plugins = str(REPO / "tests" / "ansible_plugins" / "callback")
    os.environ["ANSIBLE_CALLBACK_PLUGINS"] = os.pathsep.join(filter(None, (os.environ.get("ANSIBLE_CALLBACK_PLUGINS"), plugins)))
    os.environ["ANSIBLE_CALLBACKS_ENABLED"] = ",".join(filter(None, (os.environ.get("ANSIBLE_CALLBACKS_ENABLED"),
                                                                     "session_payload_cache")))


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    shutil.rmtree(os.environ.get("SGLANG_FLEET_PAYLOAD_CACHE", ""), ignore_errors=True)
    if not (REPO / ".lab" / "snapshots").is_dir():
        return
    sys.path.insert(0, str(REPO / "tests" / "lab"))
    import lab_fleet  # noqa: PLC0415 (the lab's helpers, only where a lab ran)

    lab_fleet.remove_snapshots(os.environ["SGLANG_FLEET_SNAPSHOT_RUN"])


# The lab modules' CPU seconds (tests/lab/conftest.py writes them to LAB_CPU_LOG), printed here: pytest-xdist's
# controller loads this file, not tests/lab/conftest.py, which only its workers collect.
def pytest_terminal_summary(terminalreporter):
    log = os.environ.get("LAB_CPU_LOG")
    if not log or not os.path.exists(log) or hasattr(terminalreporter.config, "workerinput"):
        return
    rows = [row for line in open(log, encoding="utf-8") if line.strip() and "module" in (row := json.loads(line))]
    rows.sort(key=lambda r: -(r["controller_cpu_s"] + r["hosts_cpu_s"]))
    terminalreporter.section("CPU seconds by lab module (controller + its hosts)")
    for r in rows:
        terminalreporter.write_line(f"{r['controller_cpu_s'] + r['hosts_cpu_s']:8.0f} = {r['controller_cpu_s']:6.0f} + "
                                    f"{r['hosts_cpu_s']:6.0f}  wall {r['wall_s']:6.0f}  {r['module']}"
                                    + (f" ({r['fleet']})" if r.get("fleet") else ""))
    terminalreporter.write_line(f"{sum(r['controller_cpu_s'] + r['hosts_cpu_s'] for r in rows):8.0f} in all")
