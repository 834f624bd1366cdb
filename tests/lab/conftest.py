"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in fresh-clone `.ci/run`s (MODULE_SECONDS says which); a module not listed goes
last. Re-measure with `--durations=0`, or `bench/lab_cpu.py .lab/lab-cpu.jsonl`.
"""

import json
import os
import resource
import time

import lab_fleet
import pytest

MODULE_SECONDS = {  # walls of fresh-clone `.ci/run`s, three workers: 57c7c33 (2026-12-07, stop 53) for the
    # eight modules it finished, 33b22c2 (stop 50) for the others; the longest start first
    "test_real_sglang_lab.py": 2604,  # one full-profile install, seven real starts, the router rollout, a real tune
    "test_tune_lab.py": 1436,  # tune.yml on the seeds' case, its limits and output check
    "test_rollout_recovery_lab.py": 1003,  # deploys the three lab hosts: audit, bad inputs and rollout start from it
    "test_router_lab.py": 820,  # a tune behind the router
    "test_verify_lab.py": 793,
    "test_deploy_lab.py": 791,
    "test_bad_inputs_lab.py": 632,  # from rollout recovery's snapshot
    "test_model_lab.py": 628,  # its own hub, 8 stagings and rollbacks
    "test_regression_lab.py": 500,  # 3 regression.yml runs on the tune module's fleet (its snapshot)
    "test_audit_lab.py": 490,  # from rollout recovery's snapshot
    "test_multinode_lab.py": 391,
    "test_rollout_lab.py": 372,  # on the recovery module's fleet (its snapshot)
    "test_pd_lab.py": 327,
    "test_secrets_lab.py": 273,
    "test_supply_chain_lab.py": 93,
    "test_upgrade_preview_lab.py": 79,  # on the deploy module's fleet (its snapshot)
    "test_lab_tool.py": 16,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept


# What each module cost in CPU (#41: what each lab test pays for): the controller's (this process and
# the plays it waited for: ansible-playbook, its forks, ssh, podman) and its fleets' hosts' (their
# containers' cgroups, lab_fleet.HOST_CPU_S). With LAB_CPU_LOG set (make lab-test), one JSON line per
# module there; the session's summary prints them (tests/conftest.py).
@pytest.fixture(scope="module", autouse=True)
def module_cpu(request):
    log = os.environ.get("LAB_CPU_LOG")
    if not log:
        yield
        return
    lab_fleet.HOST_CPU_S.clear()
    lab_fleet.SNAPSHOT_USE.clear()
    start, before = time.monotonic(), controller_cpu_s()
    yield
    line = {"module": request.path.name, "wall_s": round(time.monotonic() - start, 1), "end": round(time.time()),
            "controller_cpu_s": round(controller_cpu_s() - before, 1),
            "hosts_cpu_s": round(sum(lab_fleet.HOST_CPU_S.values()), 1),
            "fleet": ", ".join(sorted(set(lab_fleet.SNAPSHOT_USE.values())))}
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


# The same per test (its call, setup and teardown of function-scoped fixtures; a module's fleet is its
# module's line less its tests'), one JSON line each: where a module's CPU goes.
@pytest.fixture(autouse=True)
def cpu_per_test(request):
    log = os.environ.get("LAB_CPU_LOG")
    if not log:
        yield
        return
    start, before, hosts_before = time.monotonic(), controller_cpu_s(), lab_fleet.hosts_cpu_s()
    yield
    line = {"test": request.node.nodeid, "wall_s": round(time.monotonic() - start, 1), "end": round(time.time()),
            "controller_cpu_s": round(controller_cpu_s() - before, 1),
            "hosts_cpu_s": round(lab_fleet.hosts_cpu_s() - hosts_before, 1)}
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")


def controller_cpu_s():
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime
