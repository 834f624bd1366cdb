"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `.ci/run`, 2026-12-06 (83 tests in 32 min, caches warm,
nothing else running); a module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_real_sglang_lab.py": 1176,   # one cold full-profile install, four real starts, the router rollout (292 s)
    "test_verify_lab.py": 597,
    "test_rollout_recovery_lab.py": 540,
    "test_model_lab.py": 482,   # its own hub, 8 stagings and rollbacks
    "test_bad_inputs_lab.py": 411,
    "test_regression_lab.py": 380,   # a deploy, its rollback, 5 regression steps (one venv) and the restore
    "test_audit_lab.py": 379,
    "test_router_lab.py": 355,
    "test_deploy_lab.py": 261,
    "test_rollout_lab.py": 233,
    "test_multinode_lab.py": 169,
    "test_pd_lab.py": 135,
    "test_secrets_lab.py": 95,
    "test_supply_chain_lab.py": 88,
    "test_upgrade_preview_lab.py": 83,
    "test_lab_tool.py": 12,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
