"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-03 (lab phase 40 min, 59 tests, the
machine busier than CI's); a module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_real_sglang_lab.py": 1700,   # one cold full-profile install, four real starts, the router rollout (+190 s alone)
    "test_audit_lab.py": 1049,
    "test_bad_inputs_lab.py": 1035,
    "test_rollout_lab.py": 951,
    "test_rollout_recovery_lab.py": 868,
    "test_router_lab.py": 682,
    "test_model_lab.py": 700,   # its own hub, 8 stagings and rollbacks (6:21 alone, 2026-12-04)
    "test_regression_lab.py": 250,   # a deploy, its rollback, 5 regression steps (one venv) and the restore
    "test_verify_lab.py": 634,
    "test_deploy_lab.py": 577,
    "test_multinode_lab.py": 343,
    "test_secrets_lab.py": 291,
    "test_pd_lab.py": 231,
    "test_upgrade_preview_lab.py": 198,
    "test_supply_chain_lab.py": 108,
    "test_lab_tool.py": 23,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
