"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-01 (loaded by benchmarks beside
it); a module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_rollout_lab.py": 1452,
    "test_audit_lab.py": 1278,
    "test_bad_inputs_lab.py": 1037,
    "test_rollout_recovery_lab.py": 952,
    "test_verify_lab.py": 684,
    "test_deploy_lab.py": 621,
    "test_router_lab.py": 600,  # estimated from a loaded run (21 min at load 11-15, 9 of them a since-removed copy)
    "test_pd_lab.py": 470,  # alone, beside other lab runs: 438 s (load 6), 441 s (10), 524 s (12)
    "test_multinode_lab.py": 240,
    "test_secrets_lab.py": 326,
    "test_supply_chain_lab.py": 160,
    "test_lab_tool.py": 25,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
