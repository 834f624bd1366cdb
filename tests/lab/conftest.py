"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `.ci/run` of f48fe0f, 2026-12-06 (83 tests in 39 min, caches
warm, nothing else running); a module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_real_sglang_lab.py": 1566,  # one cold full-profile install, four real starts, the router rollout (457 s)
    "test_verify_lab.py": 801,
    "test_regression_lab.py": 1180,  # a deploy, its rollback, 5 regression steps (one venv), the restore; tune.yml (~330 s), its limits and output check (~180 s)
    "test_rollout_recovery_lab.py": 628,
    "test_model_lab.py": 571,  # its own hub, 8 stagings and rollbacks
    "test_bad_inputs_lab.py": 559,
    "test_router_lab.py": 515,  # + a tune behind the router (~60 s)
    "test_audit_lab.py": 334,
    "test_deploy_lab.py": 323,
    "test_rollout_lab.py": 261,
    "test_multinode_lab.py": 197,
    "test_pd_lab.py": 149,
    "test_secrets_lab.py": 117,
    "test_upgrade_preview_lab.py": 82,
    "test_supply_chain_lab.py": 62,
    "test_lab_tool.py": 16,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
