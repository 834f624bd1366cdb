"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-01 (lab phase 46 min, 50 tests); a
module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_rollout_lab.py": 1253,
    "test_audit_lab.py": 1171,
    "test_bad_inputs_lab.py": 1112,
    "test_rollout_recovery_lab.py": 989,
    "test_router_lab.py": 811,
    "test_verify_lab.py": 718,
    "test_deploy_lab.py": 522,
    "test_secrets_lab.py": 299,
    "test_pd_lab.py": 296,
    "test_supply_chain_lab.py": 246,
    "test_multinode_lab.py": 221,
    "test_lab_tool.py": 24,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
