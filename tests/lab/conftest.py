"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-05 (81 tests in 54 min, the machine
busier than CI's: a benchmark ran beside it); a module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_real_sglang_lab.py": 1964,   # one cold full-profile install, four real starts, the router rollout (682 s)
    "test_rollout_recovery_lab.py": 1007,
    "test_model_lab.py": 907,   # its own hub, 8 stagings and rollbacks
    "test_bad_inputs_lab.py": 832,
    "test_audit_lab.py": 798,
    "test_verify_lab.py": 665,
    "test_router_lab.py": 564,
    "test_rollout_lab.py": 491,
    "test_deploy_lab.py": 435,
    "test_regression_lab.py": 350,   # a deploy, its rollback, 5 regression steps (one venv) and the restore
    "test_multinode_lab.py": 322,
    "test_pd_lab.py": 283,
    "test_secrets_lab.py": 246,
    "test_upgrade_preview_lab.py": 132,
    "test_supply_chain_lab.py": 122,
    "test_lab_tool.py": 15,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
