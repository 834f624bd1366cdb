"""Lab modules, longest first: `make lab-test` hands whole modules to pytest-xdist workers
(--dist loadfile --no-loadscope-reorder: in collection order, not by test count), so the long
ones do not start last and run alone.

Seconds per module (fleet setup included), measured with three workers beside molecule on the
2-core CI-class machine in a fresh-clone `make test`, 2026-12-02 (lab phase 31 min, 52 tests); a
module not listed goes last. Re-measure with `--durations=0`.
"""

MODULE_SECONDS = {
    "test_rollout_lab.py": 840,
    "test_audit_lab.py": 776,
    "test_bad_inputs_lab.py": 732,
    "test_rollout_recovery_lab.py": 684,
    "test_verify_lab.py": 505,
    "test_router_lab.py": 470,
    "test_deploy_lab.py": 407,
    "test_secrets_lab.py": 261,
    "test_pd_lab.py": 230,
    "test_multinode_lab.py": 206,
    "test_supply_chain_lab.py": 171,
    "test_upgrade_preview_lab.py": 200,  # a guess: one host deployed, then two previews
    "test_lab_tool.py": 22,
}


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: -MODULE_SECONDS.get(item.path.name, 0))  # stable: a module's order is kept
